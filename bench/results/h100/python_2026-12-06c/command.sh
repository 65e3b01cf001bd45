#!/usr/bin/env bash
set -uo pipefail
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv
export CMAKE_INCLUDE_PATH=$PWD/deps/include CPATH=$PWD/deps/include
source bench/gpu/build.sh || { echo BUILD FAILED; exit 1; }
export KDA_CACHE_DIR=$(mktemp -d /tmp/kda-cache.XXXX)
show() { jq -r '.traces[] | "\(.workload.axes|tostring|.[0:70]) \(.evaluation.status) \(.evaluation.performance.latency_ms // "-") \(.evaluation.kda.speedup_vs_baseline // "-") \(.evaluation.kda.reason // "") \(.evaluation.log // .evaluation.kda.message // "" | tostring | .[0:400])"' "$1" 2>/dev/null | head -${2:-8}; }
ev() { local name=$1 limit=$2; shift 2; echo "== $name ($(( $(date +%s) - t0 )) s)"
  timeout $limit build-gpu/kda eval "$@" --json > $OUT/$name.json 2> $OUT/$name.err; echo "rc $?"; tail -3 $OUT/$name.err | cut -c1-600; show $OUT/$name.json 60; }
ev eval-triton 90 solutions/cuda_rmsnorm_bf16/triton --task tasks/cuda/rmsnorm --workloads dev
ev public-gdn-decode 140 deps/public/gdn_decode_kuangjux --task tasks/contest/gdn_decode_qk4_v8_d128_k_last --workloads all --baseline solutions/gdn_decode_qk4_v8_d128_k_last/warp_rows
jq -c '.score // empty' $OUT/public-gdn-decode.json | head -c 600; echo
echo "total $(( $(date +%s) - t0 )) s"
