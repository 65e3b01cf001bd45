#!/bin/sh
# scripts/check-odr.py must fail on a class defined in two files under one namespace (an ODR
# violation: kda::loop::RoundEvidence once had two layouts), naming both places, and must not count
# one inside an anonymous namespace. Planted in a copy of src/. Usage: odr_test.sh <project root>
set -u
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/scripts"
cp -r "$root/src" "$tmp/src"
cp "$root/scripts/check-odr.py" "$tmp/scripts/"
fail() { echo "odr_test: $*"; exit 1; }

python3 "$tmp/scripts/check-odr.py" "$tmp" > "$tmp/out" || fail "the unchanged copy does not pass: $(cat "$tmp/out")"

# The same struct, two layouts, two headers of one namespace.
printf 'namespace kda::loop {\n\nstruct Planted {\n  int a = 0;\n};\n\n}  // namespace kda::loop\n' > "$tmp/src/loop/planted_a.h"
printf 'namespace kda::loop {\n\nstruct Planted {\n  double b = 0;\n};\n\n}  // namespace kda::loop\n' > "$tmp/src/loop/planted_b.h"
python3 "$tmp/scripts/check-odr.py" "$tmp" > "$tmp/out"
[ $? -eq 1 ] || fail "a struct defined twice was not refused"
grep -q "kda::loop::Planted is defined in 2 files: src/loop/planted_a.h:3, src/loop/planted_b.h:3" "$tmp/out" ||
  fail "the message does not name the namespace and both places: $(cat "$tmp/out")"

# In an anonymous namespace of a .cc it has internal linkage: not a violation.
rm "$tmp/src/loop/planted_b.h"
printf 'namespace kda::loop {\nnamespace {\n\nstruct Planted {\n  double b = 0;\n};\n\n}  // namespace\n}  // namespace kda::loop\n' > "$tmp/src/loop/planted_b.cc"
python3 "$tmp/scripts/check-odr.py" "$tmp" > "$tmp/out" || fail "an anonymous-namespace struct was counted: $(cat "$tmp/out")"
echo "odr_test: ok"
