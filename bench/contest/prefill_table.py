#!/usr/bin/env python3
"""Per-workload table of kda eval reports recorded by bench/contest/gdn_prefill_h200.sh (prefill.jsonl):
for each evaluation (variant x workload set), every workload's T, N, status, candidate and baseline latency
(ms), speedup, roofline floor (the pack's bytes at 4.8 TB/s) and the worst absolute errors; then the
geomean speedup. Usage: prefill_table.py prefill.jsonl [--markdown]"""
import json
import math
import sys


def floor_ms(axes):
    b = axes["total_seq_len"] * 6176 + axes["num_seqs"] * 1048576 + (axes["num_seqs"] + 1) * 8
    return b / 4.8e12 * 1e3


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    for r in rows:
        rep = r.get("report")
        print(f"\n## {r['variant']} on {r['set']}: rc {r['rc']}, {r['wall_s']} s")
        if not rep:
            print("(no report)")
            continue
        print("| T | N | status | kda ms | baseline ms | speedup | floor ms | out err | state err |")
        print("|---|---|---|---|---|---|---|---|---|")
        sp = []
        for t in sorted(rep["traces"], key=lambda t: (t["workload"]["axes"]["total_seq_len"], t["workload"]["axes"]["num_seqs"])):
            ax, ev = t["workload"]["axes"], t["evaluation"]
            perf = ev.get("performance") or {}
            base = ((ev.get("kda") or {}).get("baseline") or {}).get("latency_ms")
            lat = perf.get("latency_ms")
            errs = {o["name"]: o["max_absolute_error"] for o in ((ev.get("correctness") or {}).get("extra") or {}).get("outputs", [])}
            s = base / lat if base and lat else None
            if s:
                sp.append(s)
            fmt = lambda x, f="%.4f": f % x if isinstance(x, (int, float)) else "-"
            print(f"| {ax['total_seq_len']} | {ax['num_seqs']} | {ev['status']} | {fmt(lat)} | {fmt(base)} | {fmt(s, '%.2f')} | "
                  f"{fmt(floor_ms(ax))} | {fmt(errs.get('output'), '%.1e')} | {fmt(errs.get('new_state'), '%.1e')} |")
        if sp:
            print(f"geomean speedup over the baseline: {math.exp(sum(map(math.log, sp)) / len(sp)):.2f}x over {len(sp)} workloads; "
                  f"score {rep.get('score')}")


if __name__ == "__main__":
    main()
