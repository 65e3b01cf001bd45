#!/bin/sh
# Fails when a C++/CUDA source of kda's own (src/, tests/ but its fixtures, bench/) differs from what
# clang-format makes of it with the project's .clang-format (house width 120; comments and include
# order left as written). With FILE arguments, checks those instead.
#   scripts/check-format.sh [ROOT [FILE...]]     fix with: clang-format -i FILE...
set -eu
root=${1:-$(dirname "$0")/..}
[ $# -gt 0 ] && shift
command -v clang-format > /dev/null || { echo "check-format: clang-format is not installed (apt-get install clang-format)" >&2; exit 2; }
cd "$root"
if [ $# -eq 0 ]; then
  set -- $(find src tests bench -path tests/fixtures -prune -o \( -name '*.cc' -o -name '*.h' -o -name '*.cu' \) -print | sort)
fi
# One clang-format for all; each file it flags is named once.
out=$(clang-format --style=file:"$root/.clang-format" --dry-run -Werror "$@" 2>&1) && rc=0 || rc=$?
if [ "$rc" -ne 0 ]; then
  flagged=$(printf '%s\n' "$out" | sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
  [ -n "$flagged" ] || { printf '%s\n' "$out" >&2; exit 2; }  # clang-format itself failed
  for f in $flagged; do echo "check-format: $f is not formatted (clang-format -i $f)" >&2; done
  echo "check-format: $(printf '%s\n' "$flagged" | wc -l) of $# file(s) not formatted" >&2
  exit 1
fi
echo "check-format: $# file(s) formatted"
