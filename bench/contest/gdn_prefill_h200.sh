#!/usr/bin/env bash
# kda's GDN prefill (solutions/gdn_prefill_qk4_v8_d128_k_last/chunked_wy) on the H200 in one device command:
# build kda (bench/gpu/build.sh; KEEP_BIN=1 keeps the binaries, prebuilt/ reuses them), then `kda eval` of the
# solution in each variant of VARIANTS on each set of SETS, the pack's naive baseline interleaved.
#   VARIANTS  space-separated: "default" (the solution as committed) or a comma-separated list of defines,
#             e.g. "PATH=1" (always the recurrence) or "PATH=2,STAGES=2" (always chunked, two stages); a
#             variant is a copy of the solution with a build.toml of those defines (default: "default")
#   SETS      kda eval --workloads values (default: "dev"); "all" and "holdout" for the official tables
#   EVAL_ARGS extra kda eval arguments (e.g. "--trials 1 --iterations 5")
# Records $OUT/prefill.jsonl (one line per evaluation: command, variant, set, rc, wall_s, the --json report)
# and prints bench/contest/prefill_table.py's per-workload table. Usage on the device (after
# scripts/device-deps.sh here; carry deps/): bench/contest/gdn_prefill_h200.sh
set -u
OUT=${OUT:-/tmp/kda-out}
BUDGET=${BUDGET:-570}
VARIANTS=${VARIANTS:-default}
SETS=${SETS:-dev}
SOL=${SOL:-solutions/gdn_prefill_qk4_v8_d128_k_last/chunked_wy}
TASK=tasks/contest/gdn_prefill_qk4_v8_d128_k_last
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
t0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - t0) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
source bench/gpu/build.sh
KDA=$PWD/build-gpu/kda
echo "commit $(git rev-parse --short HEAD 2> /dev/null || echo '?')"
variant_dir() {  # variant_dir <variant>: the solution directory of that variant
  if [ "$1" = default ]; then echo "$SOL"; return; fi
  local d; d=$(mktemp -d /tmp/prefill-variant.XXXX)
  cp -r "$SOL"/. "$d/"
  python3 - "$d" "$1" <<'PY'
import json, sys
d, defines = sys.argv[1], sys.argv[2].split(",")
open(f"{d}/build.toml", "w").write("defines = [" + ", ".join(json.dumps(x) for x in defines) + "]\n")
s = json.load(open(f"{d}/solution.json"))
s["sources"].append({"path": "build.toml"})
s["name"] += "_" + "_".join(x.replace("=", "") for x in defines)
json.dump(s, open(f"{d}/solution.json", "w"), indent=1)
PY
  echo "$d"
}
for set in $SETS; do
  for variant in $VARIANTS; do
    r=$(left); [ "$r" -lt 30 ] && { echo "skipped (budget): $variant on $set"; continue; }
    dir=$(variant_dir "$variant")
    start=$(date +%s.%N)
    timeout "$r" "$KDA" eval "$dir" --task "$TASK" --workloads "$set" ${EVAL_ARGS:-} --json > "$OUT/last.json" 2> "$OUT/last_err.txt"
    rc=$?
    tail -3 "$OUT/last_err.txt"
    python3 - "$OUT/last.json" "$rc" "$start" "$variant" "$set" "kda eval $SOL --task $TASK --workloads $set ${EVAL_ARGS:-} ($variant)" >> "$OUT/prefill.jsonl" <<'PY'
import json, sys, time
path, rc, start, variant, wset, cmd = sys.argv[1:7]
try:
    rep = json.load(open(path))
except Exception:
    rep = None
print(json.dumps({"command": cmd, "variant": variant, "set": wset, "rc": int(rc), "wall_s": round(time.time() - float(start), 3), "report": rep}))
PY
    echo "$variant on $set: rc $rc, $(( $(date +%s) - t0 )) s"
  done
done
python3 bench/contest/prefill_table.py "$OUT/prefill.jsonl"
