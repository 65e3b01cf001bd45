"""kda's latency against Nsight Compute's for the same kernels of one evaluation.

Usage: ncu_fidelity.py <kda eval --json report> <ncu --csv log with gpu__time_duration.sum>
Prints one JSON line per workload: kda's median latency of the candidate (CUPTI span), the median
gpu__time_duration.sum ncu measured for the candidate's kernel(s) in that workload, and their ratio.
Kernels are attributed to workloads by launch order: ncu lists launches in order, and every
workload's launches come after the previous workload's. Candidate and baseline are the same
solution here, so every launch of the solution's kernel counts.
"""
import csv
import json
import statistics
import sys

report = json.load(open(sys.argv[1]))
rows = []
with open(sys.argv[2], newline="") as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    unit = r.get("Metric Unit", "ns")
    v = float(r["Metric Value"].replace(",", ""))
    scale = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}.get(unit, 1.0)
    rows.append({"kernel": r.get("Kernel Name", ""), "ns": v * scale, "grid": r.get("Grid Size", ""),
                 "block": r.get("Block Size", "")})

traces = report.get("traces", [])
# Kernel names kda saw for the candidate (mangled); ncu prints demangled names, so match on the
# function's identifier, which both contain.
def ident(mangled):
    import re
    m = re.search(r"\d+([A-Za-z_][A-Za-z0-9_]*?)E", mangled)
    return m.group(1) if m else mangled

names = set()
for t in traces:
    for k in t["evaluation"]["kda"].get("kernels", []):
        names.add(ident(k))
cand = [r for r in rows if any(n in r["kernel"] for n in names)]
# Launch geometry separates workloads of different shapes; group consecutive launches by it.
groups = []
for r in cand:
    key = (r["grid"], r["block"])
    if not groups or groups[-1][0] != key:
        groups.append((key, []))
    groups[-1][1].append(r["ns"])
for i, t in enumerate(traces):
    ev = t["evaluation"]
    kda_ms = ev["performance"]["latency_ms"] if ev.get("performance") else None
    ncu_ns = statistics.median(groups[i][1]) if i < len(groups) else None
    print(json.dumps({"definition": t["definition"], "workload": t["workload"]["uuid"], "axes": t["workload"]["axes"],
                      "status": ev["status"], "kda_latency_ms": kda_ms,
                      "ncu_median_ms": ncu_ns / 1e6 if ncu_ns else None,
                      "ncu_launches": len(groups[i][1]) if i < len(groups) else 0,
                      "kda_over_ncu": (kda_ms / (ncu_ns / 1e6)) if kda_ms and ncu_ns else None}))
