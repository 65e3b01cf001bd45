#!/usr/bin/env bash
# Issue 43 GPU probe (git-ignored): build kda on the device, evaluate the torch and triton rmsnorm solutions.
set -uo pipefail
t0=$(date +%s)
echo "== machine"; nvidia-smi -L; which python3; python3 -c 'import sys,torch,triton; print(sys.version); print("torch",torch.__version__, torch.version.cuda); print("triton",triton.__version__)'
python3 -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDLIBRARY"))'
pkg-config --list-all 2>/dev/null | grep -i python || echo "no python pkg-config"
ls ~/.triton 2>/dev/null | head
export CMAKE_INCLUDE_PATH=$PWD/deps/include CPATH=$PWD/deps/include
source bench/gpu/build.sh || { echo BUILD FAILED; exit 1; }
ls -la build-gpu/libkda-python.so build-gpu/kda_python.py || echo "no python runtime built"
for s in torch triton; do
  echo "== eval $s"
  timeout 200 build-gpu/kda eval solutions/cuda_rmsnorm_bf16/$s --task tasks/cuda/rmsnorm --workloads dev --json > $OUT/eval-$s.json 2> $OUT/eval-$s.err
  echo "rc $?"; tail -5 $OUT/eval-$s.err
  jq -r '.traces[] | "\(.workload.axes|tostring) \(.evaluation.status) \(.evaluation.performance.latency_ms // "-") \(.evaluation.kda.speedup_vs_baseline // "-") \(.evaluation.log // .evaluation.kda.message // "" | tostring | .[0:300])"' $OUT/eval-$s.json 2>/dev/null
done
echo "total $(( $(date +%s) - t0 )) s"
