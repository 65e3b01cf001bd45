#!/usr/bin/env bash
# Evaluator overhead on the host backend: each built-in host pack's baseline on its dev workloads
# (the same measure as the H200's `overhead` stage): wall time of `kda eval`, time inside calls,
# their ratio, and the largest phases. Usage: bench/host/overhead.sh [build dir, default build] [runs, default 3]
set -eu
B=${1:-build}
RUNS=${2:-3}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for p in rmsnorm softmax gemm; do
  for r in $(seq "$RUNS"); do
    "$B/kda" eval "tasks/host/$p/baselines/naive" --task "tasks/host/$p" --workloads dev --json --quiet > "$OUT/$p-$r.json" || true
  done
done
python3 - "$OUT" "$RUNS" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
print("| pack | runs | wall s (median) | in calls s | wall / in calls | largest phases (s, median run) |")
print("|---|---|---|---|---|---|")
for p in ("rmsnorm", "softmax", "gemm"):
    reps = [json.load(open(f"{out}/{p}-{r}.json")) for r in range(1, runs + 1)]
    reps.sort(key=lambda r: r["wall_s"])
    mid = reps[len(reps) // 2]
    ph = {k: v for k, v in mid["phases"].items() if k.endswith("_s")}
    top = ", ".join(f"{k[:-2]} {v:.2f}" for k, v in sorted(ph.items(), key=lambda kv: -kv[1])[:4])
    print(f"| {p} | {runs} | {mid['wall_s']:.2f} | {mid['in_call_s']:.2f} | {mid['overhead']:.2f} | {top} |")
PY
