#!/bin/sh
# scripts/check-layers.py must fail on a wrong include direction and on a cycle in the table: both
# planted in a copy of src/ and docs/architecture.md. Usage: layers_test.sh <project root>
set -u
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs" "$tmp/scripts"
cp -r "$root/src" "$tmp/src"
cp "$root/docs/architecture.md" "$tmp/docs/"
cp "$root/scripts/check-layers.py" "$tmp/scripts/"
fail() { echo "layers_test: $*"; exit 1; }

python3 "$tmp/scripts/check-layers.py" "$tmp" > "$tmp/out" || fail "the unchanged copy does not pass: $(cat "$tmp/out")"

# util is the bottom layer: it may not include the loop.
printf '#include "loop/run_loop.h"\n' >> "$tmp/src/util/fs.h"
python3 "$tmp/scripts/check-layers.py" "$tmp" > "$tmp/out"
[ $? -eq 1 ] || fail "a util -> loop include was not refused"
grep -q "src/util/fs.h:[0-9]*: includes loop/ but util may include no other module" "$tmp/out" ||
  fail "the message does not name the file, line and rule: $(cat "$tmp/out")"
cp "$root/src/util/fs.h" "$tmp/src/util/fs.h"

# A test source may include anything.
printf '#include "loop/run_loop.h"\n' > "$tmp/src/util/planted_test.cc"
python3 "$tmp/scripts/check-layers.py" "$tmp" > "$tmp/out" || fail "a test source was checked: $(cat "$tmp/out")"
rm "$tmp/src/util/planted_test.cc"

# An arrow back down makes a cycle in the table.
sed -i 's/^| `util` | — |$/| `util` | tensor |/' "$tmp/docs/architecture.md"
python3 "$tmp/scripts/check-layers.py" "$tmp" > "$tmp/out"
[ $? -eq 1 ] || fail "a cycle in the table was not refused"
grep -q "the table has a cycle: .*util.*tensor" "$tmp/out" || fail "no cycle message: $(cat "$tmp/out")"

# A module without a row.
mkdir "$tmp/src/newmod"
sed -i 's/^| `util` | tensor |$/| `util` | — |/' "$tmp/docs/architecture.md"
python3 "$tmp/scripts/check-layers.py" "$tmp" > "$tmp/out"
[ $? -eq 1 ] || fail "a module without a row was not refused"
grep -q "src/newmod: no row" "$tmp/out" || fail "no missing-row message: $(cat "$tmp/out")"
echo "layers_test: ok"
