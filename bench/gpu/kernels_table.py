#!/usr/bin/env python3
"""Markdown tables of the `kda eval` reports in a run_h200.sh results.jsonl: one table per command, a row per
workload (verdict, shape, kda latency, baseline, speedup, the median idle time between launches, the median time
in each kernel), and the report's geomean and seed. Usage: bench/gpu/kernels_table.py results.jsonl [--skip SUBSTRING]..."""
import argparse
import gzip
import json
import re

SHAPE_AXES = ("batch_size", "max_num_pages", "num_tokens", "seq_len", "total_seq_len", "num_seqs")


def kernel_label(mangled):
    """`..._run12split_attendENS_4ArgsE` -> split_attend (the name after the anonymous namespace's `run`)."""
    m = re.search(r"_run(\d+)([A-Za-z_]\w*)", mangled)
    if m:
        n = int(m.group(1))
        rest = m.group(2)[n:]  # template arguments follow the name: I...E (bool and int ones spelled out)
        args = re.match(r"I((?:L[bi]\d+E)+)E", rest)
        if args:
            vals = re.findall(r"L([bi])(\d+)E", args.group(1))
            return m.group(2)[:n] + "<" + ",".join(
                ("true" if v == "1" else "false") if t == "b" else v for t, v in vals) + ">"
        return m.group(2)[:n]
    m = re.search(r"(\d+)([A-Za-z_]\w*)", mangled)
    return m.group(2)[: int(m.group(1))] if m else mangled


def rows(report):
    for t in report.get("traces", []):
        w, e = t["workload"], t["evaluation"]
        k = e.get("kda", {})
        lat = e.get("performance", {}).get("latency_ms") or k.get("candidate", {}).get("median_ms", 0)
        base = k.get("baseline", {}).get("latency_ms", 0)
        idle = k.get("idle_ms_median")
        kernels = ", ".join(f"{kernel_label(n)} {v.get('median_ms', 0) * 1000:.1f}"
                            for n, v in sorted(k.get("kernel_ms_by_name", {}).items(),
                                               key=lambda kv: -kv[1].get("median_ms", 0)))
        shape = " ".join(f"{a}={w['axes'][a]}" for a in SHAPE_AXES if a in w.get("axes", {}))
        yield (w["uuid"][:8], e.get("status", "?"), shape, lat * 1000, base * 1000, base / lat if lat else 0,
               "" if idle is None else f"{idle * 1000:.1f}", kernels)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("results")
    ap.add_argument("--skip", action="append", default=[], help="leave out commands containing this")
    a = ap.parse_args()
    opener = gzip.open if a.results.endswith(".gz") else open
    with opener(a.results, "rt") as f:
        for line in f:
            r = json.loads(line)
            cmd = r.get("command", "")
            if any(s in cmd for s in a.skip) or "report" not in r:
                continue
            rep = r["report"]
            # The seed: two lines compare only on the same inputs (docs/evaluator.md, "Comparing two evaluations").
            print(f"\n`{cmd.strip()}`: all PASSED {rep.get('all_passed')}, geomean "
                  f"{rep.get('score', {}).get('geomean_speedup', 0):.2f}x, seed {rep.get('seed', '?')}\n")
            print("| workload | verdict | shape | kda µs | baseline µs | speedup | idle µs | kernels (µs) |")
            print("|---|---|---|---|---|---|---|---|")
            for u, st, shape, lat, base, sp, idle, kern in rows(rep):
                print(f"| {u} | {st} | {shape} | {lat:.1f} | {base:.1f} | {sp:.2f}x | {idle} | {kern} |")


if __name__ == "__main__":
    main()
