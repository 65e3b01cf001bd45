#!/usr/bin/env bash
# Where a µs kernel's per-process spread under kda eval comes from (issue 18, after run 51): one
# rmsnorm configuration (ROWS=1 THREADS=256 VEC=4, the winner of run 47) timed
#   * in the probe harness (bench/gpu/latency_modes.cu --lib): alone, with each thing kda-runner
#     does around a call (reset of persisting L2 lines, upload of the output slot, poison on the
#     device), at kda's arena offsets with random data, and after pads of device memory; PROBE_PROCS
#     (default 2) processes for each of PROBE_FLAGS (';'-separated sets of the probe's flags, default
#     none and the runner's "--blocking --cupti-all" set-up);
#   * by kda eval on the 2.5 µs workload 80a40a14 (batch 1, hidden 4096), --no-baseline, EVALS
#     (default 4) fresh evaluations each: as is, --no-sandbox, --host-inputs (EVAL_MODES picks).
# If the probe's variants stay steady and kda eval spreads as is but not with one of the switches,
# that switch names the cause. Records $OUT/modes.jsonl (probe) and $OUT/spread_calls.jsonl (one line
# per evaluation: mode, median, p10, p90, trial medians) and prints a table.
# Usage on the device (carry deps/, and prebuilt/ from an earlier KEEP_BIN=1 command):
#   bench/gpu/call_spread.sh
set -u
OUT=${OUT:-/tmp/kda-out}
BUDGET=${BUDGET:-560}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
t0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - t0) )); }
source bench/gpu/build.sh
KDA=$PWD/build-gpu/kda
task=tasks/cuda/rmsnorm
wl=80a40a14-e685-58d4-83cd-0d9796cc07f0
sol=/tmp/rms-vec4
rm -rf "$sol" && cp -r "$task/solutions/tunable" "$sol" && rm "$sol/tunables.toml"
printf 'defines = ["THREADS=256", "ROWS=1", "VEC=4"]\n' > "$sol/build.toml"
# build.toml counts only among the solution's sources (docs/solutions.md); runs 52-56 left it out and
# timed the default configuration (VEC=1, the scalar path) instead.
python3 -c "import json, sys; s = json.load(open(sys.argv[1])); s['sources'].append({'path': 'build.toml'}); json.dump(s, open(sys.argv[1], 'w'), indent=2)" "$sol/solution.json"

if [ "${PROBE_PROCS:-2}" -gt 0 ]; then
  [ -f build-gpu/CMakeCache.txt ] || cmake --preset gpu -DKDA_BUILD_BENCH=OFF > "$OUT/configure.log" 2>&1
  cmake --build --preset gpu -j 16 --target latency_modes_bench > "$OUT/modes_build.log" 2>&1 || tail -5 "$OUT/modes_build.log"
  for vec in 4 1; do  # the configuration kda eval times, and the default one (the scalar path)
    nvcc -std=c++17 -O3 -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -shared -cudart shared \
      -DTHREADS=256 -DROWS=1 -DVEC=$vec -DNVTX_DISABLE -I deps/include "$task/solutions/tunable/kernel.cu" -o /tmp/rms$vec.so
  done
  IFS=';' read -r -a flag_sets <<< "${PROBE_FLAGS:-;--blocking --cupti-all}"
  for flags in "${flag_sets[@]}"; do
    for p in $(seq "${PROBE_PROCS:-2}"); do
      [ "$(left)" -lt 120 ] && break
      for vec in ${PROBE_VECS:-4}; do
        timeout 60 build-gpu/src/runner/latency_modes_bench --lib /tmp/rms$vec.so $flags |
          sed "s/^{/{\"process\": $p, \"vec\": $vec, \"flags\": \"$flags\", /" | tee -a "$OUT/modes.jsonl"
      done
    done
  done
fi

for mode in ${EVAL_MODES:-as_is no-sandbox host-inputs}; do
  flag=""; [ "$mode" != as_is ] && flag="--$mode"
  for r in $(seq "${EVALS:-4}"); do
    [ "$(left)" -lt 25 ] && { echo "skipped (budget): $mode $r"; continue; }
    timeout 60 "$KDA" eval "$sol" --task "$task" --workloads "$wl" --no-baseline $flag --json --quiet > "$OUT/last.json" 2> "$OUT/last_err.txt"
    rc=$?
    python3 - "$OUT/last.json" "$mode" "$r" "$rc" "kda eval $sol --task $task --workloads $wl --no-baseline $flag" <<'EOF' | tee -a "$OUT/spread_calls.jsonl"
import json, sys
path, mode, r, rc, cmd = sys.argv[1:]
row = {"mode": mode, "eval": int(r), "rc": int(rc), "command": cmd}
try:
    t = json.load(open(path))["traces"][0]["evaluation"]
    c = t["kda"]["candidate"]
    row.update(status=t["status"], median_us=round(c["median_ms"] * 1e3, 3), p10_us=round(c["p10_ms"] * 1e3, 3),
               p90_us=round(c["p90_ms"] * 1e3, 3), n=c["n"], trials_us=[round(x * 1e3, 3) for x in c.get("trials_ms", [])],
               kernels=t["kda"].get("kernels", []))
except Exception as e:
    row["error"] = repr(e)
print(json.dumps(row))
EOF
  done
done
python3 - "$OUT/spread_calls.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for mode in dict.fromkeys(r["mode"] for r in rows):
    m = [r for r in rows if r["mode"] == mode and "median_us" in r]
    print(f"{mode:12} medians " + " ".join(f"{r['median_us']:.2f}" for r in m) + "  p10 " +
          " ".join(f"{r['p10_us']:.2f}" for r in m) + "  p90 " + " ".join(f"{r['p90_us']:.2f}" for r in m))
EOF
