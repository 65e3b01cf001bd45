"""Joins timer_offset_bench's own readings with Nsight Compute's for the same launches.

Usage: timer_offset.py <bench.jsonl> LABEL=<ncu raw CSV> [LABEL=<ncu raw CSV> ...]
<bench.jsonl>: timer_offset_bench's output with CUPTI on (one JSON line per configuration).
Each CSV: `ncu --import <report> --csv --page raw --print-units base` of a report taken with
`ncu --metrics gpu__time_duration.sum -k regex:timed_ ... timer_offset_bench --reps R --no-cupti`;
the bench's own output from that run must be in <report>.jsonl beside the CSV's name (for R and the
configuration order). Prints one JSON line per configuration: CUPTI and %globaltimer medians (µs)
from the bench, ncu's median per label, ncu - CUPTI (µs) and CUPTI / ncu.
"""
import csv
import json
import statistics
import sys


def ncu_durations_us(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header = next((r for r in rows if "gpu__time_duration.sum" in r and "Kernel Name" in r), None)
    if header is None:
        sys.exit(f"{path}: no gpu__time_duration.sum column")
    col, name = header.index("gpu__time_duration.sum"), header.index("Kernel Name")
    out = []
    for r in rows[rows.index(header) + 1:]:
        if len(r) <= max(col, name) or "timed_" not in r[name]:
            continue
        try:
            out.append(float(r[col].replace(",", "")) / 1e3)  # base units: ns
        except ValueError:
            continue  # the units row
    return out


def main(argv):
    if len(argv) < 2 or any("=" not in a for a in argv[2:]):
        sys.exit(__doc__)
    bench = [json.loads(l) for l in open(argv[1]) if l.strip().startswith("{")]
    ncu = {}
    for arg in argv[2:]:
        label, path = arg.split("=", 1)
        own = [json.loads(l) for l in open(path.rsplit(".", 1)[0] + ".jsonl") if l.strip().startswith("{")]
        got = ncu_durations_us(path)
        per = []
        at = 0
        for c in own:  # each configuration: its warm-up launches, then its timed ones
            n = c["warmup"] + c["reps"]
            per.append(got[at + c["warmup"]:at + n])
            at += n
        if at != len(got):  # rows cannot be matched to configurations by position: leave the label out
            print(f"{label}: {len(got)} profiled launches, expected {at}; left out", file=sys.stderr)
            continue
        ncu[label] = per
    for i, c in enumerate(bench):
        have_cupti = bool(c.get("cupti_us")) and c["cupti_us"]["n"] > 0
        line = {"kernel": c["kernel"], "bytes": c["bytes"], "cupti_us": c["cupti_us"]["median"] if have_cupti else None,
                "globaltimer_us": c["globaltimer_us"]["median"]}
        for label, per in ncu.items():
            if have_cupti and i < len(per) and per[i]:
                m = statistics.median(per[i])
                line[f"ncu_{label}_us"] = round(m, 3)
                line[f"ncu_{label}_minus_cupti_us"] = round(m - line["cupti_us"], 3)
                line[f"cupti_over_ncu_{label}"] = round(line["cupti_us"] / m, 4) if m else None
        print(json.dumps(line))


if __name__ == "__main__":
    main(sys.argv)
