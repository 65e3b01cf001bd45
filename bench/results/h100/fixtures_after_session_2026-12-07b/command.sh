#!/usr/bin/env bash
# Issue 46: the rest of the CUDA adversarial suite and the evaluator fixtures after the Session refactor.
# Everything printed lands in $OUT/log.txt (run_h200.sh's log); other files in $OUT/files-*.tgz.
export OUT=${OUT:-/tmp/kda-out}; mkdir -p $OUT
cd "$(dirname "$0")/.."
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv | tee -a $OUT/log.txt
light=$(cd tests/fixtures/hacks/cuda && ls -d S1_* S2_* S3* S4* S6* S7* S8* T* X* S12e* S12f* S12g* S12h* | tr '\n' ' ')
HACKS="$light" BUDGET=420 bash bench/gpu/run_h200.sh hacks fixtures
left=$(( 580 - ($(date +%s) - T0) ))
echo "heavy S12d fixtures with $left s left" | tee -a $OUT/log.txt
HACKS="S12d_gdn_prefill_full_input_hash_cache S12d_moe_full_input_hash_cache" BUDGET=$left bash bench/gpu/run_h200.sh hacks
