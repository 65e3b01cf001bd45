#!/usr/bin/env bash
# GPU smoke test of the loop's `profile` tool (issue #9 item 5) with the real Nsight Compute: a
# scripted `kda run` on a CUDA pack whose writer profiles the first dev workload and the last
# workload, then asks for a third profile (refused: budget 2), then finishes. Prints the round's
# profile records, what the writer saw, and the wall time. Not part of CI (needs a GPU and ncu).
#
#   scripts/profile_tool_h200.sh [BUILD_DIR] [TASK] [OUT_DIR]
#   defaults: build, tasks/cuda/rmsnorm, ${OUT:-/tmp}/profile-tool
#   ncu: --ncu is taken from $KDA_NCU, else ncu on PATH, else /usr/local/cuda/bin/ncu.
#
# Expect: rounds/001/profiles/<uuid8>.ncu-rep twice (each with .log and .json, "ok": true),
# audit "profile" records with the reports, the writer's first result starting
# "Profiled workload ... report: <abs path>" followed by "### Priorities", the third call
# "profile: no profiles left this round (2 per round)".
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
task=${2:-$here/tasks/cuda/rmsnorm}
out=${3:-${OUT:-/tmp}/profile-tool}
kda=$build/kda
[ -x "$kda" ] || { echo "no kda binary at $kda" >&2; exit 2; }
rm -rf "$out" && mkdir -p "$out"

python3 - "$task" "$out" <<'EOF'
import json, sys, pathlib
task, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
uuids = [json.loads(l)["workload"]["uuid"] for l in (task / "workloads.jsonl").read_text().splitlines() if l.strip()]
last = uuids[-1]
writer = {"sessions": [
    {"role": "writer", "phase": "plan", "index": 1, "steps": [], "final_text": "Plan: profile first."},
    {"role": "writer", "phase": "round", "index": 1, "steps": [
        {"tool": "profile"},
        {"tool": "profile", "arguments": {"workload": last}},
        {"tool": "profile"},
        {"tool": "finish_round", "arguments": {"summary": "profiled only", "claims": []}}],
     "final_text": "done"}]}
reviewer = {"sessions": [
    {"role": "reviewer", "phase": "plan_review", "index": 1, "final_text": "PLAN: APPROVE"},
    {"role": "reviewer", "phase": "review", "index": 1, "final_text": "DECISION: STOP\nPROGRESS: STALLED"}]}
(out / "writer.json").write_text(json.dumps(writer, indent=1))
(out / "reviewer.json").write_text(json.dumps(reviewer, indent=1))
EOF

t0=$(date +%s.%N)
set +e
"$kda" run "$task" --writer "scripted:$out/writer.json" --reviewer "scripted:$out/reviewer.json" \
  --run-dir "$out/run" --max-rounds 1 --eval-trials 1 --max-profiles 2 ${KDA_NCU:+--ncu "$KDA_NCU"} \
  > "$out/run.stdout" 2> "$out/run.stderr"
rc=$?
set -e
t1=$(date +%s.%N)
echo "kda run exit $rc (1 = stopped, expected), $(python3 -c "print(round($t1-$t0,1))") s" | tee "$out/summary.txt"
ls -la "$out/run/rounds/001/profiles" | tee -a "$out/summary.txt" || true
python3 - "$out/run" <<'EOF' | tee -a "$out/summary.txt"
import json, sys, pathlib
run = pathlib.Path(sys.argv[1])
for line in (run / "audit.jsonl").read_text().splitlines():
    r = json.loads(line)
    d = r["data"]
    if r["type"] == "profile":
        print("audit profile:", json.dumps(d))
    elif r["type"] == "agent_event" and d.get("kind") == "tool_call" and d["detail"].get("name") == "profile":
        print("--- writer's profile call, ok =", d["ok"])
        print(d["detail"].get("result", "")[:1500])
v = run / "rounds/001/verify.json"
if v.exists():
    print("verify.json profiles:", json.dumps(json.loads(v.read_text()).get("profiles"), indent=1))
EOF
