#!/bin/sh
# scripts/check-function-length.py must refuse a new function over 120 lines, one that grew past its
# listed length, and a listed one that is gone; --update lists what the tree holds. All planted in a
# small tree of its own. Usage: function_length_test.sh <project root>
set -u
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/scripts" "$tmp/src/m"
cp "$root/scripts/check-function-length.py" "$tmp/scripts/"
check() { python3 "$tmp/scripts/check-function-length.py" "$tmp" > "$tmp/out"; }
fail() { echo "function_length_test: $*"; exit 1; }
body() {  # body <lines>: a function of that many lines in total
  printf 'int f(int x) {\n'
  i=2; while [ $i -lt $(($1 - 1)) ]; do printf '  x += %d;  // {\n' $i; i=$((i + 1)); done
  printf '  return x;\n}\n'
}
printf 'const char* s = R"(\n{{{\n)";\n' > "$tmp/src/m/a.cc"  # braces in a raw string are text
body 100 >> "$tmp/src/m/a.cc"
check || fail "a 100-line function was refused: $(cat "$tmp/out")"

body 130 > "$tmp/src/m/a.cc"
check
[ $? -eq 1 ] || fail "a new 130-line function was not refused"
grep -q "src/m/a.cc: 130 lines, over 120: int f(int x) {" "$tmp/out" || fail "no message naming it: $(cat "$tmp/out")"

python3 "$tmp/scripts/check-function-length.py" "$tmp" --update > /dev/null
check || fail "the updated list is not accepted: $(cat "$tmp/out")"

body 140 > "$tmp/src/m/a.cc"
check
[ $? -eq 1 ] || fail "a listed function that grew was not refused"
grep -q "140 lines, 130 allowed" "$tmp/out" || fail "no growth message: $(cat "$tmp/out")"

body 50 > "$tmp/src/m/a.cc"
check
[ $? -eq 1 ] || fail "a listed function now short enough was not reported"
grep -q "no longer over 120" "$tmp/out" || fail "no stale-entry message: $(cat "$tmp/out")"
echo "function_length_test: ok"
