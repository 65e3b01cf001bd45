"""Run-to-run spread of kda's reported latency: the same solution evaluated several times, each run
on its own fresh secret seed (kda's default), as a user re-running `kda eval` would see it.

Usage: spread.py <results.jsonl> [--tag TEXT]
Reads the lines of bench/gpu/run_h200.sh's results.jsonl whose command contains TEXT (default
"--no-baseline"), groups every trace by (definition, workload uuid) and prints one JSON line per
workload: the number of runs, the latencies (ms, mean over trials of the median CUPTI span), their
mean, and their coefficient of variation (population standard deviation / mean). A closing line
gives the largest CV over workloads with at least two runs.
"""
import json
import statistics
import sys


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    tag = argv[argv.index("--tag") + 1] if "--tag" in argv else "--no-baseline"
    runs = {}
    with open(argv[1]) as f:
        for line in f:
            rec = json.loads(line)
            report = rec.get("report") or {}
            if tag not in rec.get("command", "") or not report:
                continue
            for t in report.get("traces", []):
                ev = t["evaluation"]
                if ev.get("status") != "PASSED":
                    continue
                key = (t["definition"], t["workload"]["uuid"])
                runs.setdefault(key, {"axes": t["workload"].get("axes", {}), "ms": []})
                runs[key]["ms"].append(ev["performance"]["latency_ms"])
    worst = 0.0
    for (definition, uuid), r in sorted(runs.items()):
        ms = r["ms"]
        mean = statistics.fmean(ms)
        cv = statistics.pstdev(ms) / mean if len(ms) > 1 and mean > 0 else None
        if cv is not None:
            worst = max(worst, cv)
        print(json.dumps({"definition": definition, "workload": uuid, "axes": r["axes"], "runs": len(ms),
                          "latency_ms": ms, "mean_ms": mean, "cv": cv}))
    print(json.dumps({"summary": "max run-to-run cv", "cv": worst, "workloads": len(runs)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
