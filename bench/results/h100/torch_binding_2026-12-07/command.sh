#!/usr/bin/env bash
# The smallest GPU check of the torch binding: build, then the torch-binding rmsnorm on all workloads and
# the ATen cheat on dev.
set -uo pipefail
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv
export CMAKE_INCLUDE_PATH=$PWD/deps/include CPATH=$PWD/deps/include
source bench/gpu/build.sh || { echo BUILD FAILED; exit 1; }
export KDA_CACHE_DIR=$(mktemp -d /tmp/kda-cache.XXXX)
show() { jq -r '.traces[] | "\(.workload.axes|tostring|.[0:60]) \(.evaluation.status) \(.evaluation.performance.latency_ms // "-") base \(.evaluation.kda.baseline.latency_ms // "-") x\(.evaluation.kda.speedup_vs_baseline // "-") \(.evaluation.kda.reason // "") \(.evaluation.log // .evaluation.kda.message // "" | tostring | .[0:300])"' "$1" 2>/dev/null | head -${2:-8}; }
ev() { local name=$1 limit=$2; shift 2; echo "== $name ($(( $(date +%s) - t0 )) s): kda eval $*"
  timeout $limit build-gpu/kda eval "$@" --json > $OUT/$name.json 2> $OUT/$name.err; echo "rc $?"; tail -3 $OUT/$name.err | cut -c1-600; show $OUT/$name.json 40; jq -c '{score: .score}' $OUT/$name.json 2>/dev/null | head -c 600; echo; }
ev torch-binding-rmsnorm 120 solutions/cuda_rmsnorm_bf16/torch_binding --task tasks/cuda/rmsnorm --workloads all
left=$(( 330 - ($(date +%s) - t0) )); [ $left -gt 30 ] && ev torch-binding-cheat $left tests/fixtures/hacks/cuda/P_torch_binding_aten_does_the_work --task tasks/cuda/rmsnorm --workloads dev
echo "total $(( $(date +%s) - t0 )) s"
