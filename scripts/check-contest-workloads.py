#!/usr/bin/env python3
"""Checks that the contest packs' workloads are the contest's own (issue 44); exits 1 naming every difference.

- tasks/contest_axes/README.md's table names every TSV there with its data-row count and sha256, and both hold.
- Each TSV is one pack's workloads.jsonl row for row: same uuids in the same order (none missing, none extra), each
  column's value equal to the workload's axis or scalar input of that name; the workload has no other axis than
  those and the derived ones (GDN prefill's len_cu_seqlens = num_seqs + 1), and its other scalar inputs are the
  definition's constants (GDN scale, DSA sm_scale).
- Every pack under tasks/contest has a TSV and every TSV a pack; no holdout uuid is a workload's, and no holdout
  workload is a copy of one (same axes and same inputs); dev_workloads in task.toml are workload uuids.

Usage: scripts/check-contest-workloads.py [REPO_ROOT]
"""
import csv
import hashlib
import json
import math
import pathlib
import re
import sys
import tomllib

# Scalar inputs the TSVs do not list: the definition's constants.
CONSTANT_SCALARS = {
    "gdn_decode_qk4_v8_d128_k_last": {"scale": 1.0 / math.sqrt(128.0)},
    "gdn_prefill_qk4_v8_d128_k_last": {"scale": 1.0 / math.sqrt(128.0)},
    "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64": {"sm_scale": 0.1352337788608801},
}
# Axes the TSVs do not list, as a function of the TSV row.
DERIVED_AXES = {
    "gdn_prefill_qk4_v8_d128_k_last": {"len_cu_seqlens": lambda row: row["num_seqs"] + 1},
}


def number(text):
    try:
        return int(text)
    except ValueError:
        return float(text)


def read_table(readme, problems):
    """{file: (rows, sha256)} from the README's table rows `| `file` | rows | `sha` | source |`."""
    table = {}
    for line in readme.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\|\s*`([^`]+\.tsv)`\s*\|\s*(\d+)\s*\|\s*`([0-9a-f]{64})`\s*\|", line)
        if m:
            if m.group(1) in table:
                problems.append(f"{readme}: {m.group(1)} is listed twice")
            table[m.group(1)] = (int(m.group(2)), m.group(3))
    if not table:
        problems.append(f"{readme}: no table rows `| file | rows | sha256 | source |`")
    return table


def read_tsv(path, problems):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    if not rows or rows[0][:1] != ["uuid"]:
        problems.append(f"{path}: the header does not start with uuid")
        return []
    header, out, seen = rows[0], [], set()
    for i, r in enumerate(rows[1:], start=2):
        if len(r) != len(header):
            problems.append(f"{path}:{i}: {len(r)} fields, the header has {len(header)}")
            continue
        if r[0] in seen:
            problems.append(f"{path}:{i}: uuid {r[0]} repeats")
        seen.add(r[0])
        try:
            out.append((r[0], {k: number(v) for k, v in zip(header[1:], r[1:])}))
        except ValueError:
            problems.append(f"{path}:{i}: a value is not a number: {r[1:]}")
    return out


def check_axes_copy(axes_dir, problems):
    """The README's claims about each TSV hold; returns {definition: rows}."""
    table = read_table(axes_dir / "README.md", problems)
    present = {p.name for p in axes_dir.glob("*.tsv")}
    for name in sorted(present - set(table)):
        problems.append(f"{axes_dir / name}: not listed in {axes_dir / 'README.md'}")
    out = {}
    for name, (rows, sha) in sorted(table.items()):
        path = axes_dir / name
        if not path.is_file():
            problems.append(f"{axes_dir / 'README.md'}: lists {name}, which is missing")
            continue
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        if actual != sha:
            problems.append(f"{path}: sha256 {actual}, README says {sha}")
        parsed = read_tsv(path, problems)
        if len(parsed) != rows:
            problems.append(f"{path}: {len(parsed)} data rows, README says {rows}")
        out[name[:-4]] = parsed
    return out


def read_jsonl(path, problems):
    out = []
    if not path.is_file():
        problems.append(f"{path}: missing")
        return out
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            problems.append(f"{path}:{i}: not JSON ({e})")
    return out


def same(a, b):
    """Equal numbers of the same kind (an integer is not a float: 2 and 2.0 differ in a JSON file)."""
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return False
    return isinstance(a, float) == isinstance(b, float) and a == b


def check_workload(where, definition, line, row, problems):
    w = line.get("workload", {})
    if line.get("definition") != definition:
        problems.append(f"{where}: definition {line.get('definition')!r}, expected {definition!r}")
    axes, inputs = w.get("axes", {}), w.get("inputs", {})
    derived = DERIVED_AXES.get(definition, {})
    for column, value in row.items():
        if column in axes:
            got = axes[column]
        elif inputs.get(column, {}).get("type") == "scalar":
            got = inputs[column].get("value")
        else:
            problems.append(f"{where}: no axis or scalar input {column!r} (the contest's is {value})")
            continue
        if not same(got, value):
            problems.append(f"{where}: {column} = {got!r}, the contest's is {value!r}")
    for name, rule in derived.items():
        if axes.get(name) != rule(row):
            problems.append(f"{where}: axis {name} = {axes.get(name)!r}, expected {rule(row)!r}")
    for name in sorted(set(axes) - set(row) - set(derived)):
        problems.append(f"{where}: axis {name} is not the contest's")
    for name, spec in sorted(inputs.items()):
        if spec.get("type") != "scalar" or name in row:
            continue
        expected = CONSTANT_SCALARS.get(definition, {}).get(name)
        if expected is None or not same(spec.get("value"), expected):
            problems.append(f"{where}: scalar {name} = {spec.get('value')!r}, expected the constant {expected!r}")


def check_pack(pack, definition, rows, problems):
    lines = read_jsonl(pack / "workloads.jsonl", problems)
    by_uuid = {l.get("workload", {}).get("uuid"): l for l in lines}
    if len(by_uuid) != len(lines):
        problems.append(f"{pack}/workloads.jsonl: a uuid repeats")
    contest = [u for u, _ in rows]
    for u in contest:
        if u not in by_uuid:
            problems.append(f"{pack}/workloads.jsonl: the contest's workload {u} is missing")
    for u in by_uuid:
        if u not in set(contest):
            problems.append(f"{pack}/workloads.jsonl: workload {u} is not the contest's")
    if [l.get("workload", {}).get("uuid") for l in lines] != contest and set(by_uuid) == set(contest):
        problems.append(f"{pack}/workloads.jsonl: not in the TSV's row order")
    for u, row in rows:
        if u in by_uuid:
            check_workload(f"{pack}/workloads.jsonl [{u}]", definition, by_uuid[u], row, problems)
    shapes = {json.dumps([l["workload"].get("axes"), l["workload"].get("inputs")], sort_keys=True) for l in lines}
    for h in read_jsonl(pack / "holdout.jsonl", problems):
        hw = h.get("workload", {})
        if hw.get("uuid") in by_uuid:
            problems.append(f"{pack}/holdout.jsonl: uuid {hw.get('uuid')} is also a workload's")
        if json.dumps([hw.get("axes"), hw.get("inputs")], sort_keys=True) in shapes:
            problems.append(f"{pack}/holdout.jsonl [{hw.get('uuid')}]: same axes and inputs as a contest workload")
    toml = pack / "task.toml"
    dev = tomllib.loads(toml.read_text(encoding="utf-8")).get("evaluation", {}).get("dev_workloads", [])
    for u in dev:
        if u not in by_uuid:
            problems.append(f"{toml}: dev workload {u} is not in workloads.jsonl")


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    problems = []
    tables = check_axes_copy(root / "tasks/contest_axes", problems)
    packs = {p.name: p for p in (root / "tasks/contest").iterdir() if (p / "definition.json").is_file()}
    for name in sorted(set(packs) - set(tables)):
        problems.append(f"{packs[name]}: no tasks/contest_axes/{name}.tsv")
    for name in sorted(set(tables) - set(packs)):
        problems.append(f"tasks/contest_axes/{name}.tsv: no pack tasks/contest/{name}")
    checked = 0
    for name in sorted(set(packs) & set(tables)):
        check_pack(packs[name], name, tables[name], problems)
        checked += len(tables[name])
    for p in problems:
        print(p)
    if problems:
        print(f"check-contest-workloads: {len(problems)} problem(s)")
        return 1
    print(f"check-contest-workloads: {len(packs)} packs, {checked} workloads as the contest's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
