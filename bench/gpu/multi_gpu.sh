#!/usr/bin/env bash
# Issue 28: the local pool on one device against several, on one host. Three measurements, each run on ONE and
# on MANY devices of a `kda serve` pool started here (`--on local:DEVICES`):
#   tune   kda tune of a tunable solution: configurations measured per minute, and whether the two maps route
#          every visible workload to the same configuration;
#   eval   kda eval --workloads all of a solution: the same verdict on every workload, and each wall time;
#   run    kda run --lanes 2 with the tuner writer and the rules reviewer on MANY: the lanes' evaluations spread.
# Everything lands in $OUT: multi.jsonl (one line a measurement), log.txt, and the tune outputs' map.json.
# On a GPU machine with two or more cards (defaults):   bash bench/gpu/multi_gpu.sh
# The same on the CPU (host packs, host workers), to check the script itself:
#   ONE=cpu:1 MANY=cpu:2 TUNE_SOL=tasks/host/rmsnorm/solutions/tunable TUNE_PACK=tasks/host/rmsnorm \
#   EVAL_SOL=solutions/host_rmsnorm_f32/numpy EVAL_PACK=tasks/host/rmsnorm RUN_PACK=tasks/host/rmsnorm \
#   KDA=build/kda bash bench/gpu/multi_gpu.sh tune eval
# STAGES (arguments) default to all three; BUDGET (seconds, default 570) stops starting new commands.
set -u
OUT=${OUT:-/tmp/kda-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
KDA=${KDA:-build-gpu/kda}
ONE=${ONE:-0}
MANY=${MANY:-$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | paste -sd, -)}
TUNE_SOL=${TUNE_SOL:-tasks/cuda/rmsnorm/solutions/tunable}
TUNE_PACK=${TUNE_PACK:-tasks/cuda/rmsnorm}
EVAL_SOL=${EVAL_SOL:-solutions/gdn_decode_qk4_v8_d128_k_last/warp_rows}
EVAL_PACK=${EVAL_PACK:-tasks/contest/gdn_decode_qk4_v8_d128_k_last}
RUN_PACK=${RUN_PACK:-tasks/cuda/rmsnorm}
STAGES=" ${*:-tune eval run} "
t0=$(date +%s)
has() { case "$STAGES" in *" $1 "*) return 0 ;; esac; return 1; }
left() { echo $((${BUDGET:-570} - ($(date +%s) - t0))); }
if [ -z "$MANY" ] || [ "$MANY" = "$ONE" ]; then
  echo "multi_gpu: MANY names one device ('$MANY'): nothing to compare (issue 28 needs several GPUs)"
  exit 2
fi
echo "multi_gpu: ONE=local:$ONE MANY=local:$MANY, stages:$STAGES"

# record <name> <devices> <command...>: runs it, appends {"name", "devices", "rc", "wall_s"} to multi.jsonl.
record() {
  local name=$1 devices=$2
  shift 2
  local limit
  limit=$(left)
  if [ "$limit" -lt 30 ]; then
    echo "skipped (budget): $name on $devices"
    return 124
  fi
  echo "== $name on local:$devices: $*"
  local start rc
  start=$(date +%s.%N)
  timeout "$limit" "$@" > "$OUT/$name-$devices.out" 2> "$OUT/$name-$devices.err" < /dev/null
  rc=$?
  python3 -c "import json, sys, time; print(json.dumps({'name': sys.argv[1], 'devices': sys.argv[2], 'rc': int(sys.argv[3]), 'wall_s': round(time.time() - float(sys.argv[4]), 2)}))" \
    "$name" "$devices" "$rc" "$start" | tee -a "$OUT/multi.jsonl"
  tail -3 "$OUT/$name-$devices.err" | cut -c1-200
  return $rc
}

if has tune; then
  for d in "$ONE" "$MANY"; do
    record tune "$d" "$KDA" tune "$TUNE_SOL" --task "$TUNE_PACK" --on "local:$d" --out "$OUT/tune-$d" --json
  done
  python3 - "$OUT" "$ONE" "$MANY" <<'EOF' | tee -a "$OUT/multi.jsonl"
import json, sys
out, one, many = sys.argv[1:]
def load(d):
    try:
        return json.load(open(f"{out}/tune-{d}/map.json"))
    except (OSError, ValueError):
        return None
def routes(m):  # workload -> what serves it: its regime's routed_to (docs/tune.md), else the regime's best
    rows = {}
    for r in (m or {}).get("regimes", []):
        served = r.get("routed_to") or (r.get("best") or {}).get("label")
        for w in r.get("workloads", []):
            rows[w if isinstance(w, str) else json.dumps(w, sort_keys=True)] = json.dumps(served, sort_keys=True)
    return rows
def rate(d):  # configurations measured (state.json) per minute of the command's wall time (multi.jsonl)
    try:
        n = len({m["config"]["id"] if isinstance(m["config"], dict) else json.dumps(m["config"])
                 for m in json.load(open(f"{out}/tune-{d}/state.json"))["measurements"]})
        wall = [json.loads(l) for l in open(f"{out}/multi.jsonl") if '"name": "tune"' in l and f'"devices": "{d}"' in l][-1]["wall_s"]
        return {"configs": n, "wall_s": wall, "configs_per_min": round(60 * n / wall, 2)}
    except (OSError, ValueError, KeyError, IndexError, ZeroDivisionError):
        return None
a, b = load(one), load(many)
ra, rb = routes(a), routes(b)
same = bool(ra) and ra == rb
print(json.dumps({"name": "tune_maps", "maps_read": [a is not None, b is not None], "workloads": len(ra),
                  "same_routes": same, "differ": sorted(k for k in ra if ra.get(k) != rb.get(k))[:20],
                  "one": rate(one), "many": rate(many)}))
EOF
fi

if has eval; then
  for d in "$ONE" "$MANY"; do
    record eval "$d" "$KDA" eval "$EVAL_SOL" --task "$EVAL_PACK" --workloads all --on "local:$d" --json --quiet
  done
  python3 - "$OUT" "$ONE" "$MANY" <<'EOF' | tee -a "$OUT/multi.jsonl"
import json, sys
out, one, many = sys.argv[1:]
def verdicts(d):
    try:
        r = json.load(open(f"{out}/eval-{d}.out"))
    except (OSError, ValueError):
        return {}
    return {t["workload"]["uuid"]: t["evaluation"]["status"] for t in r.get("traces", [])}
a, b = verdicts(one), verdicts(many)
print(json.dumps({"name": "eval_verdicts", "workloads": [len(a), len(b)], "same": bool(a) and a == b,
                  "differ": sorted(k for k in a if a.get(k) != b.get(k))[:20]}))
EOF
fi

if has run; then
  record run "$MANY" "$KDA" run "$RUN_PACK" --writer tuner --reviewer rules --lanes 2 --on "local:$MANY" \
    --run-dir "$OUT/run-lanes"
fi
echo "multi_gpu: total $(($(date +%s) - t0)) s"
