#!/usr/bin/env python3
"""Joins recorded H200 `kda eval` results of the contest baselines with the PyTorch eager times of the same
workloads, per pack: workloads evaluated, PASSED, baseline latency and eager latency (median over workloads),
and the median of eager / baseline per workload (> 1: the naive CUDA baseline is faster than eager PyTorch).

Usage: python3 bench/contest/baseline_vs_eager.py RESULTS.jsonl[.gz] ... --eager EAGER.jsonl ...
RESULTS are run_h200.sh results files (one `kda eval --json` report per line, under "report"); where a
workload appears in several, the last one counts. Prints a Markdown table.
"""
import argparse
import gzip
import json
import statistics


def lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    ap.add_argument("--eager", nargs="+", required=True)
    args = ap.parse_args()
    eager = {}
    for path in args.eager:
        for j in lines(path):
            eager[(j["definition"], j["uuid"])] = j["torch_eager_ms"]
    got = {}  # (definition, uuid) -> (status, latency_ms)
    for path in args.results:
        for j in lines(path):
            report = j.get("report") or {}
            for t in report.get("traces", []):
                if t["definition"] not in {d for d, _ in eager}:
                    continue
                perf = t["evaluation"].get("performance") or {}
                got[(t["definition"], t["workload"]["uuid"])] = (t["evaluation"]["status"], perf.get("latency_ms"))
    print("| pack | workloads | PASSED | baseline ms (median) | eager ms (median) | eager / baseline (median, min-max) |")
    print("|---|---|---|---|---|---|")
    for d in sorted({d for d, _ in got}):
        rows = [(u, s, lat) for (dd, u), (s, lat) in got.items() if dd == d]
        passed = sum(1 for _, s, _ in rows if s == "PASSED")
        lat = [l for _, s, l in rows if s == "PASSED" and l]
        pairs = [(eager[(d, u)], l) for u, s, l in rows if s == "PASSED" and l and (d, u) in eager]
        ratios = [e / l for e, l in pairs]
        print(f"| {d} | {len(rows)} | {passed} | {statistics.median(lat):.4g} | "
              f"{statistics.median([e for e, _ in pairs]):.4g} | "
              f"{statistics.median(ratios):.3g} ({min(ratios):.3g}-{max(ratios):.3g}) |")


if __name__ == "__main__":
    main()
