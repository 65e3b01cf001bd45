#!/usr/bin/env bash
# Call 3 (prebuilt binaries): issue 25's first DSA indexer (mma_radix) on its dev workloads, then chunked_wy
# PAIRS=1 on the prefill holdout, then the indexer on all workloads with what is left.
set -uo pipefail
export OUT=${OUT:-/tmp/kda-out}; mkdir -p $OUT
exec > >(tee $OUT/summary.txt) 2>&1
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv
source bench/gpu/build.sh || { echo BUILD FAILED; exit 1; }
export KDA_CACHE_DIR=$(mktemp -d /tmp/kda-cache.XXXX)
show() {
  jq -r '.traces[] | "\(.workload.uuid[0:8]) \(.workload.axes | del(.num_pages) | tostring | .[0:60]) \(.evaluation.status) \(.evaluation.performance.latency_ms // "-" | tostring | .[0:7]) ms base \(.evaluation.kda.baseline.latency_ms // "-" | tostring | .[0:7]) tol=\(.evaluation.kda.tolerance_used // "-" | tostring | .[0:6]) \(.evaluation.kda.message // "" | .[0:240])"' $1
  jq -c '{geomean: .score.geomean_speedup, passed: .score.passed, wall_s}' $1
}
ev() {  # ev <name> <limit_s> <kda eval args...>
  local name=$1 lim=$2; shift 2
  local left=$(( 570 - ($(date +%s) - t0) )); [ $left -lt 25 ] && { echo "skipped (budget): $name"; return; }
  [ $lim -gt $left ] && lim=$left
  echo "== $name ($(( $(date +%s) - t0 )) s): kda eval $*"
  timeout $lim build-gpu/kda eval "$@" --json > $OUT/$name.json 2> $OUT/$name.err; echo "rc $?"
  tail -3 $OUT/$name.err | cut -c1-300
  show $OUT/$name.json
  gzip -f $OUT/$name.json
}
TI=tasks/contest/dsa_topk_indexer_fp8_h64_d128_topk2048_ps64
SI=solutions/dsa_topk_indexer_fp8_h64_d128_topk2048_ps64/mma_radix
ev indexer_dev 150 $SI --task $TI --workloads dev
T=tasks/contest/gdn_prefill_qk4_v8_d128_k_last
S=solutions/gdn_prefill_qk4_v8_d128_k_last/chunked_wy
# PAIRS is a mask now (1 X, 2 W, 4 U, 8 Delta; 15 = the PAIRS=1 of call 1): which parts the stresses need.
variant() { local d=/tmp/cw$1; rm -rf $d; cp -r $S $d; sed -i "s/^#define PAIRS 0 /#define PAIRS $1 /" $d/kernel.cu; grep -c "^#define PAIRS $1 " $d/kernel.cu; }
for m in 12 14 13 10; do variant $m; ev pairs${m}_dev 75 /tmp/cw$m --task $T --workloads dev --trials 1 --iterations 20; done
variant 15
ev pairs15_holdout 130 /tmp/cw15 --task $T --holdout
ev indexer_all 400 $SI --task $TI --workloads all
echo "total $(( $(date +%s) - t0 )) s"
