#!/usr/bin/env bash
# Session probe (git-ignored): build kda (kept in $OUT/kda-bin.tgz); Triton's audit events standalone;
# kda eval of the triton and torch rmsnorm, the two Python GPU hacks, and a public Triton GDN decode.
set -uo pipefail
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv
export CMAKE_INCLUDE_PATH=$PWD/deps/include CPATH=$PWD/deps/include
KEEP_BIN=1 source bench/gpu/build.sh || { echo BUILD FAILED; exit 1; }
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
echo "== triton audit probe"; timeout 120 python3 deps/triton_audit.py > $OUT/triton-audit.txt 2>&1; echo "rc $?"; head -40 $OUT/triton-audit.txt
export KDA_CACHE_DIR=$(mktemp -d /tmp/kda-cache.XXXX)
show() { jq -r '.traces[] | "\(.workload.axes|tostring|.[0:60]) \(.evaluation.status) \(.evaluation.performance.latency_ms // "-") \(.evaluation.kda.speedup_vs_baseline // "-") \(.evaluation.kda.reason // "") \(.evaluation.log // .evaluation.kda.message // "" | tostring | .[0:300])"' "$1" 2>/dev/null | head -${2:-8}; }
ev() {  # ev <name> <limit> <kda eval args...>
  local name=$1 limit=$2; shift 2
  echo "== $name ($(( $(date +%s) - t0 )) s)"
  timeout $limit build-gpu/kda eval "$@" --json > $OUT/$name.json 2> $OUT/$name.err; echo "rc $?"
  tail -3 $OUT/$name.err; show $OUT/$name.json 12
}
ev eval-triton 200 solutions/cuda_rmsnorm_bf16/triton --task tasks/cuda/rmsnorm --workloads dev
find "$KDA_CACHE_DIR" -maxdepth 3 -path '*jit*' | head -10
ev eval-torch 120 solutions/cuda_rmsnorm_bf16/torch --task tasks/cuda/rmsnorm --workloads dev
ev hack-triton-torch 120 tests/fixtures/hacks/cuda/P_triton_torch_does_the_work --task tasks/cuda/rmsnorm --workloads dev --trials 1 --iterations 5
ev hack-python-cublas 120 tests/fixtures/hacks/cuda/P_python_matmul_cublas --task tasks/cuda/gemm --workloads dev --trials 1 --iterations 5
ev public-gdn-decode 240 deps/public/gdn_decode_kuangjux --task tasks/contest/gdn_decode_qk4_v8_d128_k_last --workloads all --baseline solutions/gdn_decode_qk4_v8_d128_k_last/warp_rows
jq -r '.score // empty | tostring' $OUT/public-gdn-decode.json | head -c 600; echo
echo "total $(( $(date +%s) - t0 )) s"
