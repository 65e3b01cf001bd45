#!/usr/bin/env bash
# Cross-checks every contest pack's two references on the GPU: the definition's Python `reference`
# (run by the torch oracle, src/runner/torch_oracle.py) against kda's CUDA reference solution, on
# the first 2 dev workloads, at the pack's own tolerances.
#
# The CUDA reference is evaluated as the candidate with `--reference torch`, so the torch oracle's
# outputs are the expected values and kda's checker (task.toml atol/rtol/matched_ratio, or the
# topk_indices checker) does the comparing. One trial, 3 timed iterations: correctness is the point.
#
# usage: bench/contest/oracle_check.sh [--kda PATH] [--out DIR] [--workloads N] [PACK_DIR...]
#   --kda PATH      the kda binary (default: $KDA or build/kda)
#   --out DIR       where the per-pack JSON reports and logs go (default: bench/contest/results/oracle_check)
#   --workloads N   how many dev workloads per pack (default 2)
#   PACK_DIR...     packs to check (default: tasks/contest/*)
# Needs: a CUDA build of kda (kda-runner and torch_oracle.py beside it), python3 that imports torch with
# CUDA (KDA_PYTHON selects the interpreter). Exit 0 when every workload of every pack PASSED.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
kda=${KDA:-$root/build/kda}
out=$root/bench/contest/results/oracle_check
count=2
packs=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --kda) kda=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --workloads) count=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    -*) echo "oracle_check: unknown option $1" >&2; exit 2 ;;
    *) packs+=("$1"); shift ;;
  esac
done
if [[ ${#packs[@]} -eq 0 ]]; then
  for p in "$root"/tasks/contest/*/; do packs+=("${p%/}"); done
fi

if [[ ! -x $kda ]]; then echo "oracle_check: $kda is not an executable (build kda or pass --kda)" >&2; exit 2; fi
if ! "$kda" eval --help 2>/dev/null | grep -q -- '--reference'; then
  echo "oracle_check: '$kda eval' has no --reference option yet (kda eval --reference torch)" >&2
  exit 2
fi
py=${KDA_PYTHON:-python3}
if ! "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "oracle_check: $py cannot import torch with CUDA (set KDA_PYTHON to an interpreter that can)" >&2
  exit 2
fi
mkdir -p "$out"

# First N dev workloads of a pack: task.toml [evaluation] dev_workloads, else the first lines of workloads.jsonl.
first_workloads() {
  local pack=$1 n=$2
  "$py" - "$pack" "$n" <<'PY'
import json, re, sys
pack, n = sys.argv[1], int(sys.argv[2])
uuids = []
try:
    text = open(pack + "/task.toml", encoding="utf-8").read()
    m = re.search(r"^\s*dev_workloads\s*=\s*\[(.*?)\]", text, re.S | re.M)
    if m:
        uuids = re.findall(r'"([^"]+)"', m.group(1))
except OSError:
    pass
if not uuids:
    with open(pack + "/workloads.jsonl", encoding="utf-8") as f:
        uuids = [json.loads(line)["workload"]["uuid"] for line in f if line.strip()]
print(",".join(uuids[:n]))
PY
}

# The pack's reference solution: task.toml [reference] solution (default "reference"), as <pack>/<name>
# or <pack>/solutions/<name>.
reference_solution() {
  local pack=$1 name
  name=$(sed -n '/^\[reference\]/,/^\[/{s/^solution *= *"\([^"]*\)".*/\1/p}' "$pack/task.toml" 2>/dev/null | head -1)
  name=${name:-reference}
  for d in "$pack/$name" "$pack/solutions/$name"; do
    if [[ -e $d/solution.json ]]; then echo "$d"; return 0; fi
  done
  return 1
}

status=0
summary=$out/summary.txt
: > "$summary"
for pack in "${packs[@]}"; do
  name=$(basename "$pack")
  sol=$(reference_solution "$pack") || { echo "$name: no reference solution" | tee -a "$summary"; status=1; continue; }
  uuids=$(first_workloads "$pack" "$count")
  echo "== $name: $sol vs the Python reference on $uuids" >&2
  set +e
  "$kda" eval "$sol" --task "$pack" --reference torch --workloads "$uuids" --trials 1 --iterations 3 \
    --no-baseline --json > "$out/$name.json" 2> "$out/$name.log"
  rc=$?
  set -e
  "$py" - "$out/$name.json" "$name" "$rc" <<'PY' | tee -a "$summary"
import json, sys
path, name, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    report = json.load(open(path, encoding="utf-8"))
except (OSError, ValueError) as e:
    print("%s: no JSON report (kda exit %d; see %s.log): %s" % (name, rc, path[:-5], e))
    sys.exit(0)
for t in report.get("traces", []):
    ev = t.get("evaluation") or {}
    corr = ev.get("correctness") or {}
    kda = ev.get("kda") or {}
    fmt = lambda v: "-" if v is None else "%.3g" % v
    print("%s %s: %s max_abs=%s max_rel=%s %s" % (
        name, t.get("workload", {}).get("uuid", "?"), kda.get("verdict", ev.get("status", "?")),
        fmt(corr.get("max_absolute_error")), fmt(corr.get("max_relative_error")),
        kda.get("message", "") if ev.get("status") != "PASSED" else ""))
print("%s: kda exit %d, all_passed=%s, wall %.1f s" % (name, rc, report.get("all_passed"), report.get("wall_s", 0)))
PY
  [[ $rc -eq 0 ]] || status=1
done
echo "summary: $summary" >&2
exit $status
