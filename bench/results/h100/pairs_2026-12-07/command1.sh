#!/usr/bin/env bash
# Issue 24 (call 1): build (kept for the next calls), then: chunked_wy with PAIRS=1 (a copy) on the dev workloads with the pack's stresses, and both
# PAIRS values on the dev workloads without stresses for the cost.
set -uo pipefail
export OUT=${OUT:-/tmp/kda-out}; mkdir -p $OUT
exec > >(tee $OUT/summary.txt) 2>&1
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv
export CMAKE_INCLUDE_PATH=$PWD/deps/include CPATH=$PWD/deps/include
export KEEP_BIN=1
source bench/gpu/build.sh || { echo BUILD FAILED; exit 1; }
export KDA_CACHE_DIR=$(mktemp -d /tmp/kda-cache.XXXX)
T=tasks/contest/gdn_prefill_qk4_v8_d128_k_last
S=solutions/gdn_prefill_qk4_v8_d128_k_last/chunked_wy
P1=/tmp/cw1; rm -rf $P1; cp -r $S $P1; sed -i 's/^#define PAIRS 0 /#define PAIRS 1 /' $P1/kernel.cu; grep -c "^#define PAIRS 1 " $P1/kernel.cu
TN=/tmp/prefill-nostress; rm -rf $TN; cp -r $T $TN; sed -i 's/^stress = .*/stress = []/' $TN/task.toml
show() {
  jq -r '.traces[] | "\(.workload.uuid[0:8]) T=\(.workload.axes.total_seq_len) n=\(.workload.axes.num_seqs) \(.evaluation.status) \(.evaluation.performance.latency_ms // "-" | tostring | .[0:7]) ms base \(.evaluation.kda.baseline.latency_ms // "-" | tostring | .[0:7]) tol=\(.evaluation.kda.tolerance_used // "-" | tostring | .[0:6]) \(.evaluation.kda.message // "" | .[0:200])"' $1
  jq -c '{geomean: .score.geomean_speedup, wall_s}' $1
}
ev() {
  local name=$1 lim=$2; shift 2
  local left=$(( ${BUDGET:-560} - ($(date +%s) - t0) )); [ $left -lt 25 ] && { echo "skipped (budget): $name"; return; }
  [ $lim -gt $left ] && lim=$left
  echo "== $name ($(( $(date +%s) - t0 )) s): kda eval $*"
  timeout $lim build-gpu/kda eval "$@" --json > $OUT/$name.json 2> $OUT/$name.err; echo "rc $?"
  tail -2 $OUT/$name.err | cut -c1-200
  show $OUT/$name.json
  gzip -kf $OUT/$name.json
}
ev pairs_dev 120 $P1 --task $T --workloads dev --trials 1 --iterations 20
ev pairs_dev_nostress 80 $P1 --task $TN --workloads dev --trials 3 --iterations 20
ev nopairs_dev_nostress 80 $S --task $TN --workloads dev --trials 3 --iterations 20
ev pairs_holdout 130 $P1 --task $T --holdout
echo "total $(( $(date +%s) - t0 )) s"
