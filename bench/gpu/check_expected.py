"""Checks each fixture evaluation in a results.jsonl against the fixture's expected.json.

Usage: check_expected.py <results.jsonl>
For every line whose command evaluates a directory that holds an expected.json: a solution fixture
(tests/fixtures/solutions, `expect` a FlashInfer-Bench status) must have that status on every
workload and, when `reasons` is not empty, one of them on some workload; a hack (tests/fixtures/
hacks, `expect` pass or reject) must pass every workload, or be rejected with one of its `reasons`
on some workload (a hack may misbehave on some shapes only). kda's exit code must be 0 for a pass
and 1 otherwise.
Prints one line per fixture (ok / MISMATCH with what was seen) and a summary; exits 1 on any mismatch.
"""
import json
import os
import sys


def main(path):
    checked = bad = 0
    for line in open(path):
        run = json.loads(line)
        words = run.get("command", "").split()
        target = next((w for w in words[2:3] if os.path.isfile(os.path.join(w, "expected.json"))), None)
        if target is None:
            continue
        exp = json.load(open(os.path.join(target, "expected.json")))
        traces = (run.get("report") or {}).get("traces", [])
        statuses = {t["evaluation"]["status"] for t in traces}
        reasons = {(t["evaluation"].get("kda") or {}).get("reason") for t in traces} - {None, ""}
        passes = exp["expect"] in ("PASSED", "pass")
        ok = bool(traces) and run.get("rc") == (0 if passes else 1)
        if passes:
            ok = ok and statuses == {"PASSED"}
        elif exp["expect"] == "reject":  # a hack: rejected, for one of its reasons on some workload
            ok = ok and bool(reasons & set(exp.get("reasons", [])))
        else:  # a solution fixture: this status on every workload
            ok = ok and statuses == {exp["expect"]} and (not exp.get("reasons") or bool(reasons & set(exp["reasons"])))
        checked += 1
        bad += not ok
        name = os.path.normpath(target).split(os.sep)[-2:]
        print(f"{'ok' if ok else 'MISMATCH'} {'/'.join(name)}: expect {exp['expect']} {exp.get('reasons', [])}, "
              f"rc {run.get('rc')}, saw {sorted(statuses)} {sorted(reasons)}")
    print(f"{checked - bad} of {checked} fixtures as expected")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
