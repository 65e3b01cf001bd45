#!/usr/bin/env bash
# Issue 42: a tuning through kda serve on one GPU (kda tune --on local), with cpp-httplib and SQLite carried in
# deps/hs (Debian 12's header and libraries: the GPU machine has neither), then the dispatcher's official evals.
set -uo pipefail
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv
H=$PWD/deps/hs
mkdir -p $H/lib/pkgconfig
cat > $H/lib/pkgconfig/cpp-httplib.pc <<EOF
Name: cpp-httplib
Description: Debian 12 cpp-httplib, carried
Version: 0.11.4
Libs: -L$H/lib -lcpp-httplib
Cflags: -I$H/include -DCPPHTTPLIB_OPENSSL_SUPPORT -DCPPHTTPLIB_ZLIB_SUPPORT -DCPPHTTPLIB_BROTLI_SUPPORT
EOF
export PKG_CONFIG_PATH=$H/lib/pkgconfig LD_LIBRARY_PATH=$H/lib CC=/usr/bin/gcc CXX=/usr/bin/g++
export CMAKE_INCLUDE_PATH=$PWD/deps/include CPATH=$PWD/deps/include
cmake --preset gpu -DKDA_BUILD_BENCH=OFF -DSQLite3_INCLUDE_DIR=$H/include -DSQLite3_LIBRARY=$H/lib/libsqlite3.so > $OUT/configure.log 2>&1 || { tail -30 $OUT/configure.log; exit 1; }
grep "kda: CUDA backend" $OUT/configure.log
cmake --build --preset gpu -j 16 --target kda kda-runner > $OUT/build.log 2>&1 || { grep -m 20 -E "error" $OUT/build.log; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
export KDA_CACHE_DIR=$(mktemp -d /tmp/kda-cache.XXXX)
echo "== tune --on local ($(( $(date +%s) - t0 )) s)"
timeout 290 build-gpu/kda tune tasks/cuda/rmsnorm/solutions/tunable --task tasks/cuda/rmsnorm --on local \
  --out /tmp/tune-on --max-minutes 3 --json > $OUT/tune-on.json 2> $OUT/tune-on.err; echo "rc $?"
tail -25 $OUT/tune-on.err | cut -c1-300
jq -c '{configs_measured, configs_total, wall_s, baseline_geomean_ms, best_single_geomean_ms, dispatcher_geomean_ms, dispatcher_passed}' $OUT/tune-on.json 2>/dev/null
cp /tmp/tune-on/map.md /tmp/tune-on/map.json $OUT/ 2>/dev/null
for w in all; do
  left=$(( 570 - ($(date +%s) - t0) )); [ $left -lt 30 ] && break
  echo "== eval dispatcher $w ($(( $(date +%s) - t0 )) s)"
  timeout $left build-gpu/kda eval /tmp/tune-on/dispatcher --task tasks/cuda/rmsnorm --workloads $w --json > $OUT/disp-$w.json 2> $OUT/disp-$w.err; echo "rc $?"
  jq -r '.traces[] | "\(.workload.axes|tostring) \(.evaluation.status) x\(.evaluation.kda.speedup_vs_baseline) graph_safe=\(.evaluation.kda.graph_safe)"' $OUT/disp-$w.json 2>/dev/null
  jq -r '[.traces[] | .evaluation.kda.gates[]? | select(.gate=="graph-contract") | .status + ": " + .detail] | unique | .[]' $OUT/disp-$w.json 2>/dev/null | cut -c1-400
  jq -c '.score' $OUT/disp-$w.json 2>/dev/null
done
left=$(( 575 - ($(date +%s) - t0) ))
if [ $left -gt 70 ]; then
  echo "== torch binding, the baseline's kernel (issue 43) ($(( $(date +%s) - t0 )) s)"
  timeout $left build-gpu/kda eval solutions/cuda_rmsnorm_bf16/torch_binding --task tasks/cuda/rmsnorm --workloads all --json > $OUT/tb.json 2> $OUT/tb.err; echo "rc $?"
  tail -2 $OUT/tb.err | cut -c1-300
  jq -r '.traces[] | "\(.workload.axes|tostring) \(.evaluation.status) \(.evaluation.performance.latency_ms) base \(.evaluation.kda.baseline.latency_ms) x\(.evaluation.kda.speedup_vs_baseline)"' $OUT/tb.json 2>/dev/null
  jq -c '.score' $OUT/tb.json 2>/dev/null
fi
echo "total $(( $(date +%s) - t0 )) s"
