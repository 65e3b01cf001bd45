#!/usr/bin/env bash
# kda tune on the H200, one device command: for each CUDA pack (PACKS, default rmsnorm softmax gemm)
# tune its tunable solution on the dev workloads from a cold build cache (compile included), then
# evaluate the naive baseline (interleaved, in the same reports), the best single configuration and
# the dispatcher officially (`kda eval`, fresh processes and seeds) on all workloads and on the
# holdout. Records $OUT/tune.jsonl (one line per tune and per evaluation, with its command),
# $OUT/<pack>/{map.json,map.md,state.json}, $OUT/log.txt, and prints per pack:
#   * throughput: configurations measured per minute of the tune's wall time (compiles included);
#   * baseline / best single / dispatcher geomean latency over all workloads and over the holdout;
#   * screening vs official: each dev workload's screening latency of the best single configuration
#     (its highest rung in state.json) against the official evaluation's latency of the same solution.
# Usage on the device (after scripts/device-deps.sh here; carry deps/): bench/gpu/tune_h200.sh
# PACKS names CUDA packs (tasks/cuda/<name>, its solutions/tunable) or task=tunable pairs of paths, e.g.
#   PACKS="tasks/contest/gdn_decode_qk4_v8_d128_k_last=solutions/gdn_decode_qk4_v8_d128_k_last/warp_rows"
# (the results are then named after the tunable's directory; such a solution is also evaluated as it is,
# its default configuration, on all workloads and the holdout). KDA=<path to kda> skips
# the build (a kda built elsewhere, with its kda-runner beside it); bench/gpu/build.sh says how a command
# reuses the binaries of an earlier one (KEEP_BIN=1, prebuilt/).
set -u
OUT=${OUT:-/tmp/kda-out}
BUDGET=${BUDGET:-570}
PACKS=${PACKS:-rmsnorm softmax gemm}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
t0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - t0) )); }
export CC=/usr/bin/gcc CXX=/usr/bin/g++
PACK_ROOT=${PACK_ROOT:-tasks/cuda}  # tasks/host with KDA=build/kda: the same run on this machine's host packs
if [ -z "${KDA:-}" ]; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  source bench/gpu/build.sh  # or prebuilt/kda-bin.tgz unpacked; KEEP_BIN=1 keeps the build in $OUT
  KDA=$PWD/build-gpu/kda
fi
export KDA_CACHE_DIR=$(mktemp -d /tmp/kda-cache.XXXX)  # cold: every configuration compiles here
record() {  # record <timeout> <kda args...>: one JSON line (command, rc, wall, report) to tune.jsonl
  local limit=$1; shift
  local r; r=$(left); [ "$r" -lt 25 ] && { echo "skipped (budget): kda $*"; return; }
  [ "$limit" -gt "$r" ] && limit=$r
  local start=$(date +%s.%N)
  timeout "$limit" "$KDA" "$@" --json > "$OUT/last.json" 2> "$OUT/last_err.txt"
  local rc=$?
  python3 - "$OUT/last.json" "$rc" "$start" "kda $*" >> "$OUT/tune.jsonl" <<'EOF'
import json, sys, time
path, rc, start, cmd = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
try:
    rep = json.load(open(path))
except Exception:
    rep = None
print(json.dumps({"command": cmd, "rc": rc, "wall_s": round(time.time() - start, 3), "report": rep}))
EOF
  echo "rc=$rc $(( $(date +%s) - t0 )) s: kda $*"
  [ "$rc" -ne 0 ] && tail -5 "$OUT/last_err.txt"
}
NAMES=""
for spec in $PACKS; do
  case "$spec" in
    *=*) task=${spec%%=*}; tunable=${spec#*=}; p=$(basename "$tunable"); as_is=1 ;;
    *) p=$spec; task=$PACK_ROOT/$p; tunable=$task/solutions/tunable; as_is=0 ;;
  esac
  NAMES="$NAMES $p"
  out=/tmp/tune-$p
  rm -rf "$out"
  if [ "$as_is" = 1 ]; then
    for w in all holdout; do record "${EVAL_LIMIT:-120}" eval "$tunable" --task "$task" --workloads "$w" --quiet; done
  fi
  # TUNE_ARGS_<pack>: extra kda tune arguments (e.g. TUNE_ARGS_gemm="--max-configs 24").
  extra=TUNE_ARGS_$(echo "$p" | tr -c 'A-Za-z0-9_\n' _)
  record "${TUNE_LIMIT:-200}" tune "$tunable" --task "$task" --out "$out" --no-final ${!extra:-}
  mkdir -p "$OUT/$p"
  cp "$out"/map.json "$out"/map.md "$out"/state.json "$OUT/$p/" 2> /dev/null
  cp "$OUT/last_err.txt" "$OUT/$p/tune_progress.txt"
  for sol in dispatcher best_single; do
    [ -d "$out/$sol" ] || continue
    for w in all holdout; do record "${EVAL_LIMIT:-120}" eval "$out/$sol" --task "$task" --workloads "$w" --quiet; done
  done
done
python3 - "$OUT" <<'EOF'
import json, math, os, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(out, "tune.jsonl"))]
def geo(v):
    v = [x for x in v if x > 0]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else 0
for r in rows:
    cmd, rep = r["command"], r["report"]
    if rep is None:
        print(f"{cmd[:90]}: no report (rc {r['rc']})")
        continue
    if cmd.startswith("kda tune"):
        n = rep.get("configs_measured", 0)
        print(f"{cmd[:90]}: {n} configurations in {r['wall_s']:.1f} s = {60 * n / r['wall_s']:.0f} per minute; "
              f"screening best single {rep.get('best_single_geomean_ms')} ms, dispatcher {rep.get('dispatcher_geomean_ms')} ms")
        continue
    ts = rep.get("traces", [])
    ok = rep.get("all_passed", False)
    perf = [t["evaluation"].get("performance") or {} for t in ts]
    base = [t["evaluation"]["kda"].get("baseline", {}).get("latency_ms", 0) for t in ts]
    print(f"{cmd[:90]}: {'PASSED' if ok else 'NOT ALL PASSED'} {len(ts)} workloads; geomean latency "
          f"{geo([q.get('latency_ms', 0) for q in perf]):.5f} ms, baseline {geo(base):.5f} ms, "
          f"speedup {rep.get('score', {}).get('geomean_speedup', 0):.3f}x")
# Screening vs official for the best single configuration, per dev workload.
for p in os.listdir(out):
    st, mp = os.path.join(out, p, "state.json"), os.path.join(out, p, "map.json")
    if not (os.path.exists(st) and os.path.exists(mp)):
        continue
    best = json.load(open(mp)).get("best_single", {}).get("config", {}).get("id")
    ms = [m for m in json.load(open(st))["measurements"] if m["config"] == best and m["passed"]]
    if not ms:
        continue
    top = max(ms, key=lambda m: m["rung"])
    off = next((r["report"] for r in rows if r["report"] and f"/tmp/tune-{p}/best_single" in r["command"]
                and "--workloads all" in r["command"]), None)
    if off is None:
        continue
    lat = {t["workload"]["uuid"]: (t["evaluation"].get("performance") or {}).get("latency_ms", 0) for t in off.get("traces", [])}
    dev = [(u, t["ms"], lat.get(u)) for u, t in top["times"].items() if lat.get(u)]
    worst = max((abs(s / o - 1) for _, s, o in dev), default=0)
    print(f"{p}: best single {best} rung {top['rung']}: screening vs official on {len(dev)} dev workloads, "
          f"largest difference {100 * worst:.1f} %: " + ", ".join(f"{u[:8]} {s:.5f}/{o:.5f}" for u, s, o in dev))
EOF
# The device tool brings back a handful of files: the per-pack outputs go back as one archive.
(cd "$OUT" && tar czf tune-files.tgz $NAMES 2> /dev/null && rm -rf $NAMES)
echo "total: $(( $(date +%s) - t0 )) s"
