#!/usr/bin/env python3
"""Fails when a class or struct is defined in more than one file under the same namespace: two
definitions of one name are an ODR violation (the linker keeps one of the two destructors for both;
kda::loop::RoundEvidence was once defined twice with different layouts).

Usage: scripts/check-odr.py [ROOT]   (ROOT: the project directory, default: this script's parent)

Reads src/**/*.h and src/**/*.cc. A definition is a line at column 0 (namespace scope, as
.clang-format lays it out) opening `struct NAME` or `class NAME` with a body; its namespace is the
stack of `namespace a::b {` lines above it, closed by `}  // namespace`. Anonymous namespaces give
internal linkage and are skipped. Exit 0 when every name is defined once, 1 with one line per name
defined twice (each file:line), 2 when ROOT has no src/.
"""
import os
import re
import sys

NAMESPACE_OPEN = re.compile(r"^\s*(?:inline\s+)?namespace\s*([A-Za-z0-9_:]*)\s*\{")
NAMESPACE_CLOSE = re.compile(r"^\s*\}\s*//\s*namespace\b")
DEFINITION = re.compile(r"^(?:template\s*<[^>]*>\s*)?(struct|class)\s+(?:\[\[[^\]]*\]\]\s*)?([A-Za-z_][A-Za-z0-9_]*)"
                        r"(?!\s*::)(?:\s+final)?\s*(?::[^:;{][^;{]*)?\{")


def definitions(path):
    """(namespace, name, line) of every namespace-scope class or struct with a body in `path`."""
    stack = []
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = NAMESPACE_OPEN.match(line)
            if m:
                stack.append(m.group(1))
                continue
            if NAMESPACE_CLOSE.match(line):
                if stack:
                    stack.pop()
                continue
            m = DEFINITION.match(line)
            if m and "" not in stack:  # an anonymous namespace: internal linkage
                out.append(("::".join(stack), m.group(2), n))
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = os.path.join(root, "src")
    if not os.path.isdir(src):
        print(f"check-odr: {src}: no such directory", file=sys.stderr)
        return 2
    seen = {}
    for dirpath, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".h", ".cc")):
                continue
            path = os.path.join(dirpath, name)
            for ns, cls, line in definitions(path):
                seen.setdefault((ns, cls), []).append(f"{os.path.relpath(path, root)}:{line}")
    bad = 0
    for (ns, cls), where in sorted(seen.items()):
        files = {w.rsplit(":", 1)[0] for w in where}
        if len(files) > 1:
            bad += 1
            print(f"{ns}::{cls} is defined in {len(files)} files: {', '.join(where)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
