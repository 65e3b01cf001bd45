"""kda's latency against Nsight Compute's gpu__time_duration for the same kernel and workload.

Usage: fidelity.py <kda ncu profile --json output> <kda eval --json report>
Prints one JSON line: the workload, kda's latency (mean over trials of the median CUPTI span), the sum of
gpu__time_duration.sum over the kernels ncu profiled in the one profiled call (cold caches:
--cache-control all, clocks not locked: --clock-control none, as kda times), and their ratio. Meant for
single-kernel solutions, where the CUPTI span and the kernel's duration measure the same thing.
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


profile = json.load(open(sys.argv[1]))
report = json.load(open(sys.argv[2]))
ns = durations(profile.get("analysis", profile), [])
for t in report.get("traces", []):
    ev = t["evaluation"]
    kda_ms = (ev.get("performance") or {}).get("latency_ms")
    ncu_ms = sum(ns) / 1e6 if ns else None
    print(json.dumps({"definition": t["definition"], "workload": t["workload"]["uuid"], "axes": t["workload"]["axes"],
                      "status": ev["status"], "kda_latency_ms": kda_ms, "kda_cv": ((ev.get("kda") or {}).get("candidate") or {}).get("cv"),
                      "ncu_kernels": len(ns), "ncu_duration_ms": ncu_ms,
                      "kda_over_ncu": kda_ms / ncu_ms if kda_ms and ncu_ms else None}))
