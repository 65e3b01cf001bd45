#!/usr/bin/env python3
"""Checks the include direction between kda's modules against the layer table in
docs/architecture.md (between <!-- layers:begin --> and <!-- layers:end -->).

Usage: scripts/check-layers.py [ROOT]   (ROOT: the project directory, default: this script's parent)

Every `#include "<module>/..."` in src/<module>/ (test sources excepted: *_test.cc, *_test.cu and
test_*.h helpers may include anything) must name the module itself or one in its row; every
module directory must have a row; the table must have no cycle. Exit 0 when all hold, 1 with one
line per violation (file:line), 2 when the table cannot be read.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/')
ROW = re.compile(r'^\|\s*`([a-z0-9_]+)`\s*\|\s*([^|]*)\|\s*$')


def read_table(doc):
    try:
        text = open(doc, encoding="utf-8").read()
    except OSError as e:
        sys.exit(f"check-layers: {doc}: {e.strerror}")
    begin, end = text.find("<!-- layers:begin -->"), text.find("<!-- layers:end -->")
    if begin < 0 or end < begin:
        print(f"check-layers: {doc}: no <!-- layers:begin --> ... <!-- layers:end --> table", file=sys.stderr)
        sys.exit(2)
    allowed = {}
    for line in text[begin:end].splitlines():
        m = ROW.match(line.strip())
        if not m:
            continue
        deps = m.group(2).strip()
        allowed[m.group(1)] = set() if deps in ("—", "-", "") else {d.strip() for d in deps.split(",")}
    return allowed


def cycle(allowed):
    """One cycle of the allowed graph as a list of modules, or None."""
    state = {}
    stack = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(allowed.get(m, ())):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state:
                found = visit(d)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(allowed):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def is_test(name):
    return re.search(r"_test\.(cc|cu)$", name) or name.startswith("test_")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    doc = os.path.join(root, "docs", "architecture.md")
    allowed = read_table(doc)
    problems = []
    for m, deps in sorted(allowed.items()):
        for d in sorted(deps - set(allowed)):
            problems.append(f"{doc}: module {m} may include '{d}', which has no row")
    c = cycle(allowed)
    if c:
        problems.append(f"{doc}: the table has a cycle: {' -> '.join(c)}")
    src = os.path.join(root, "src")
    for module in sorted(os.listdir(src)):
        mdir = os.path.join(src, module)
        if not os.path.isdir(mdir):
            continue
        if module not in allowed:
            problems.append(f"src/{module}: no row in the layer table of docs/architecture.md")
            continue
        for dirpath, _, files in os.walk(mdir):
            for name in sorted(files):
                if not name.endswith((".cc", ".h", ".cu", ".cuh")) or is_test(name):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1)
                        if target == module or target not in allowed or target in allowed[module]:
                            continue
                        rel = os.path.relpath(path, root)
                        may = ", ".join(sorted(allowed[module])) or "no other module"
                        problems.append(f"{rel}:{n}: includes {target}/ but {module} may include {may}")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
