#!/usr/bin/env python3
"""A ratchet on function length (issue 19: no function over 120 lines).

Usage: scripts/check-function-length.py [ROOT] [--update]

Scans ROOT/src, ROOT/tests and ROOT/bench (*.cc, *.h, *.cu) for function bodies longer than LIMIT
lines. Each one must be listed in ROOT/scripts/function-length-baseline.txt (its length, path and
the first line of its definition) and be no longer than listed there; a listed function that is
gone or now short enough is reported too, so the list only shrinks. --update rewrites the list from
the tree. Exit 0 when all hold, 1 with one line per finding.

Functions are found by matching braces outside comments and string literals: a `{` whose text
before it on the line (or the line before) ends a parameter list opens a function, unless it is a
control statement, a lambda or an initializer; nested functions (lambdas, local classes) count
towards the function that holds them. Raw string literals and comments are skipped. A heuristic, kept simple: it reads this code base's style.
"""
import os
import re
import sys

LIMIT = 120
KEYWORD = re.compile(r'^\s*(if|for|while|switch|else|do|namespace|class|struct|enum|union|try|catch)\b')
BASELINE = os.path.join("scripts", "function-length-baseline.txt")


def strip(line):
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return re.sub(r'//.*', '', line)


def opens_function(text, previous):
    head = text.split('{')[0]
    ends_params = (')' in head or previous.rstrip().endswith(')') or
                   re.search(r'\)\s*(const|override|noexcept|final|->[^{]*)*\s*$', head))
    return bool(ends_params) and not KEYWORD.match(text) and '[' not in head.split('(')[0] and '=' not in head.split('(')[0]


def long_functions(path):
    lines = open(path, encoding="utf-8", errors="replace").read().split('\n')
    stack, out, in_comment, raw_end = [], [], False, None
    for i, raw in enumerate(lines):
        text = raw
        if raw_end is not None:  # inside a raw string literal R"delim( ... )delim"
            if raw_end not in text:
                continue
            text, raw_end = text.split(raw_end, 1)[1], None
        while True:  # raw string literals: their braces are text
            m = re.search(r'R"([^(\s]*)\(', text)
            if not m:
                break
            end = ')' + m.group(1) + '"'
            rest = text[m.end():]
            if end in rest:
                text = text[:m.start()] + '""' + rest.split(end, 1)[1]
            else:
                text, raw_end = text[:m.start()], end
                break
        if in_comment:
            if '*/' not in text:
                continue
            text, in_comment = text.split('*/', 1)[1], False
        text = re.sub(r'/\*.*?\*/', '', strip(text))
        if '/*' in text:
            text, in_comment = text.split('/*', 1)[0], True
        for pos, ch in enumerate(text):
            if ch == '{':
                inside = any(fn for _, fn in stack)
                fn = not inside and opens_function(text[:pos + 1], lines[i - 1] if i else '')
                stack.append((i, fn))
            elif ch == '}' and stack:
                start, fn = stack.pop()
                if fn and i - start + 1 > LIMIT:
                    out.append((i - start + 1, lines[start].strip()))
    return out


def scan(root):
    found = {}
    for top in ("src", "tests", "bench"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith((".cc", ".h", ".cu")):
                    p = os.path.join(d, f)
                    for n, head in long_functions(p):
                        found[(os.path.relpath(p, root), head)] = n
    return found


def read_baseline(path):
    out = {}
    if not os.path.exists(path):
        return out
    for line in open(path, encoding="utf-8"):
        if line.startswith('#') or not line.strip():
            continue
        n, rel, head = line.rstrip('\n').split('\t', 2)
        out[(rel, head)] = int(n)
    return out


def main():
    args = [a for a in sys.argv[1:] if a != "--update"]
    root = args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = scan(root)
    baseline_path = os.path.join(root, BASELINE)
    if "--update" in sys.argv:
        with open(baseline_path, "w", encoding="utf-8") as f:
            f.write(f"# Functions over {LIMIT} lines, allowed until split (scripts/check-function-length.py --update).\n")
            f.write("# lines<TAB>path<TAB>first line of the definition\n")
            for (rel, head), n in sorted(found.items(), key=lambda kv: (-kv[1], kv[0])):
                f.write(f"{n}\t{rel}\t{head}\n")
        print(f"check-function-length: {len(found)} function(s) over {LIMIT} lines written to {BASELINE}")
        return 0
    baseline = read_baseline(baseline_path)
    problems = []
    for (rel, head), n in sorted(found.items()):
        allowed = baseline.get((rel, head))
        if allowed is None:
            problems.append(f"{rel}: {n} lines, over {LIMIT}: {head}")
        elif n > allowed:
            problems.append(f"{rel}: {n} lines, {allowed} allowed by {BASELINE} (it grew): {head}")
    for (rel, head), n in sorted(baseline.items()):
        if (rel, head) not in found:
            problems.append(f"{rel}: listed in {BASELINE} ({n} lines) but no longer over {LIMIT} or gone "
                            f"(run scripts/check-function-length.py --update): {head}")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
