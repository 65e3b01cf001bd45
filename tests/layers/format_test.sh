#!/bin/sh
# scripts/check-format.sh must pass a file formatted by the project's .clang-format and refuse, naming
# it, one that is not. Usage: format_test.sh <project root>
set -u
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "format_test: $*"; exit 1; }
printf 'int f(int x) { return x + 1; }\n' > "$tmp/good.cc"
printf 'int  f( int x ){return x+1;}\n' > "$tmp/bad.cc"
"$root/scripts/check-format.sh" "$root" "$tmp/good.cc" > "$tmp/out" 2>&1 || fail "a formatted file was refused: $(cat "$tmp/out")"
"$root/scripts/check-format.sh" "$root" "$tmp/good.cc" "$tmp/bad.cc" > "$tmp/out" 2>&1
[ $? -eq 1 ] || fail "a misformatted file was not refused: $(cat "$tmp/out")"
grep -q "bad.cc is not formatted" "$tmp/out" || fail "no message naming it: $(cat "$tmp/out")"
grep -q "good.cc" "$tmp/out" && fail "the formatted file was named: $(cat "$tmp/out")"
echo "format_test: ok"
