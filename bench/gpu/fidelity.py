"""kda's latency against Nsight Compute's gpu__time_duration for the same kernel and workload.

Usage: fidelity.py <kda eval --json report> LABEL=<kda ncu profile --json output> [LABEL=... ...]
Prints one JSON line per trace: the workload, kda's latency (mean over trials of the median CUPTI
span) and, per labelled profile, the sum of gpu__time_duration.sum over the kernels ncu profiled in
the one profiled call and kda / ncu. The first label is also written as ncu_duration_ms and
kda_over_ncu (the headline comparison). The fidelity stage of run_h200.sh labels its profiles
`cache_all` (--cache-control all: ncu invalidates its caches before the kernel) and `cache_none`
(--cache-control none: the caches as kda's own L2 flush before the call left them), both with
--clock-control none and --metrics gpu__time_duration.sum. Meant for single-kernel solutions,
where the CUPTI span and the kernel's duration measure the same thing.
"""
import json
import sys


def durations(node, out):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "gpu__time_duration.sum" and isinstance(v, (int, float)):
                out.append(float(v))
            else:
                durations(v, out)
    elif isinstance(node, list):
        for v in node:
            durations(v, out)
    return out


def main(argv):
    if len(argv) < 3 or any("=" not in a for a in argv[2:]):
        sys.exit(__doc__)
    report = json.load(open(argv[1]))
    profiles = []
    for arg in argv[2:]:
        label, path = arg.split("=", 1)
        try:
            prof = json.load(open(path))
        except (OSError, ValueError):
            prof = {}
        ns = durations(prof.get("analysis", prof), [])
        profiles.append((label, sum(ns) / 1e6 if ns else None, len(ns)))
    for t in report.get("traces", []):
        ev = t["evaluation"]
        kda_ms = (ev.get("performance") or {}).get("latency_ms")
        line = {"definition": t["definition"], "workload": t["workload"]["uuid"], "axes": t["workload"]["axes"],
                "status": ev["status"], "kda_latency_ms": kda_ms,
                "kda_cv": ((ev.get("kda") or {}).get("candidate") or {}).get("cv")}
        for i, (label, ncu_ms, kernels) in enumerate(profiles):
            ratio = kda_ms / ncu_ms if kda_ms and ncu_ms else None
            line[f"ncu_{label}_ms"] = ncu_ms
            line[f"ncu_{label}_kernels"] = kernels
            line[f"kda_over_ncu_{label}"] = ratio
            if i == 0:
                line.update({"ncu_kernels": kernels, "ncu_duration_ms": ncu_ms, "kda_over_ncu": ratio})
        print(json.dumps(line))


if __name__ == "__main__":
    main(sys.argv)
