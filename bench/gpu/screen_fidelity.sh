#!/usr/bin/env bash
# Where screening and the official evaluation disagree, on the H200 (issue 18): one kda tune of a
# CUDA pack (PACK, default rmsnorm) screens every configuration in one session; its best single
# configuration is then timed three more ways on the dev workloads:
#   * official  : kda eval, fresh processes and seeds, REPS (default 2) times;
#   * alone     : kda tune of that one configuration (a tunables.toml with a single unused macro), so a
#                 screening session that never loaded another candidate, REPS times;
#   * in session: its top rung in the full tune (state.json).
# If "alone" agrees with "official" and "in session" does not, what a long session holds (other
# candidates' modules, kept input sets) moves short kernels; if "alone" disagrees too, the screening
# procedure does. Records $OUT/fidelity.jsonl and prints one table.
# Usage on the device (carry deps/, and prebuilt/ from an earlier KEEP_BIN=1 command):
#   bench/gpu/screen_fidelity.sh
set -u
OUT=${OUT:-/tmp/kda-out}
BUDGET=${BUDGET:-300}
PACK=${PACK:-rmsnorm}
REPS=${REPS:-2}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
t0=$(date +%s)
export CC=/usr/bin/gcc CXX=/usr/bin/g++
source bench/gpu/build.sh
KDA=$PWD/build-gpu/kda
export KDA_CACHE_DIR=$(mktemp -d /tmp/kda-cache.XXXX)
task=tasks/cuda/$PACK
json_of() {  # json_of <label> <kda args...>: one line {label, command, rc, report} to fidelity.jsonl
  local label=$1; shift
  [ $(( BUDGET - ($(date +%s) - t0) )) -lt 20 ] && { echo "skipped (budget): $label"; return; }
  timeout 120 "$KDA" "$@" --json > "$OUT/last.json" 2> "$OUT/last_err.txt"
  local rc=$?
  python3 -c "import json,sys; r=None
try: r=json.load(open('$OUT/last.json'))
except Exception: pass
print(json.dumps({'label': '$label', 'command': 'kda ' + ' '.join(sys.argv[1:]), 'rc': $rc, 'report': r}))" "$@" >> "$OUT/fidelity.jsonl"
  echo "rc=$rc $label: kda $*"
}
json_of full tune "$task/solutions/tunable" --task "$task" --out /tmp/fid-full --no-final
best=/tmp/fid-full/best_single
[ -d "$best" ] || { echo "no best single configuration"; exit 1; }
cp /tmp/fid-full/state.json "$OUT/full_state.json"
alone=/tmp/fid-alone
rm -rf "$alone" && cp -r "$best" "$alone"
printf '[parameters.KDA_FIDELITY_PROBE]\nvalues = [1]\n' > "$alone/tunables.toml"
for r in $(seq "$REPS"); do
  json_of "official_$r" eval "$best" --task "$task" --workloads dev --no-baseline --quiet
  rm -rf /tmp/fid-alone-out
  json_of "alone_$r" tune "$alone" --task "$task" --out /tmp/fid-alone-out --no-final --quiet
  cp /tmp/fid-alone-out/state.json "$OUT/alone_state_$r.json" 2> /dev/null
done
python3 - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(out, "fidelity.jsonl"))]
def top(path):  # workload -> ms of the configuration's highest rung in a state.json
    ms = [m for m in json.load(open(path))["measurements"] if m["passed"]]
    return ms, max(m["rung"] for m in ms)
full = json.load(open(os.path.join(out, "full_state.json")))["measurements"]
best = next(r for r in rows if r["label"] == "full")["report"]["best_single_dir"]
bid = json.load(open("/tmp/fid-full/map.json"))["best_single"]["config"]["id"]
mine = [m for m in full if m["config"] == bid and m["passed"]]
session = max(mine, key=lambda m: m["rung"])["times"]
cols = {"in session": {u: t["ms"] for u, t in session.items()}}
for r in rows:
    rep = r["report"] or {}
    if r["label"].startswith("official"):
        cols[r["label"]] = {t["workload"]["uuid"]: (t["evaluation"].get("performance") or {}).get("latency_ms", 0)
                            for t in rep.get("traces", [])}
    if r["label"].startswith("alone"):
        n = r["label"].split("_")[1]
        p = os.path.join(out, f"alone_state_{n}.json")
        if os.path.exists(p):
            ms = [m for m in json.load(open(p))["measurements"] if m["passed"]]
            t = max(ms, key=lambda m: m["rung"])["times"]
            cols[r["label"]] = {u: v["ms"] for u, v in t.items()}
names = list(cols)
print(f"best single {bid}; latency ms per dev workload")
print("workload  " + "  ".join(f"{n:>12}" for n in names))
for u in sorted(cols["in session"]):
    print(f"{u[:8]}  " + "  ".join(f"{cols[n].get(u, 0):12.5f}" for n in names))
EOF
echo "total: $(( $(date +%s) - t0 )) s"
