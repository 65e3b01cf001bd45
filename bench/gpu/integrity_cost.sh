#!/usr/bin/env bash
# What an evaluator change costs on the H200: the same evaluations with the code before it and with
# the working tree, built side by side in one device command, then run alternately (before, after,
# before, after) so that the machine's state favours neither. Records $OUT/cost.jsonl (one compact
# report per evaluation, with the command and which side ran it) and $OUT/log.txt.
#
#   git archive -o deps/before-src.tgz <commit>    # here, before the device command (deps/ is carried)
#   git archive -o deps/after-src.tgz HEAD         # optional: the side after from a commit, not the tree
#   bench/gpu/integrity_cost.sh                    # on the device
#
# CUDA packs: each pack's dev workloads at the pack's own timing, REPS (default 2) times per side.
# Contest packs: dev workloads at the contest stage's timing (1 trial, 2 warm-up, 10 iterations), once
# per side. Then, unless SKIP_HACKS is set, the remembered-output hacks (tests/fixtures/hacks/cuda/S12[def]_*)
# with the working tree's kda, at the timing their expected.json names. CUDA_PACKS (default
# "rmsnorm softmax gemm") and CONTEST (a glob under tasks/contest, default *) narrow the packs when
# device time is short.
set -u
OUT=${OUT:-/tmp/kda-out}
BUDGET=${BUDGET:-570}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
t0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - t0) )); }
export CC=/usr/bin/gcc CXX=/usr/bin/g++
[ -f deps/before-src.tgz ] || { echo "deps/before-src.tgz missing (git archive -o deps/before-src.tgz <commit>)"; exit 2; }
AFTER=$PWD
for side in before after; do
  [ -f deps/$side-src.tgz ] || continue
  rm -rf build-$side-src && mkdir -p build-$side-src && tar xzf deps/$side-src.tgz -C build-$side-src
  ln -sfn "$PWD/deps" build-$side-src/deps
done
[ -d build-after-src ] && AFTER=$PWD/build-after-src
build() {  # build <source dir> <log>
  (cd "$1" && cmake --preset gpu -DKDA_BUILD_BENCH=OFF > "$2" 2>&1 && cmake --build --preset gpu -j 8 --target kda kda-runner >> "$2" 2>&1)
}
build "$AFTER" "$OUT/build_after.log" & a=$!
build "$PWD/build-before-src" "$OUT/build_before.log" & b=$!
wait $a || { grep -m 20 error "$OUT/build_after.log"; exit 1; }
wait $b || { grep -m 20 error "$OUT/build_before.log"; exit 1; }
echo "builds: $(( $(date +%s) - t0 )) s"
declare -A KDA=([before]=build-before-src/build-gpu/kda [after]=$AFTER/build-gpu/kda)
record() {  # record <side> <timeout> <kda eval args...>
  local side=$1 limit=$2; shift 2
  local r; r=$(left); [ "$r" -lt 30 ] && { echo "skipped (budget): $side $*"; return; }
  [ "$limit" -gt "$r" ] && limit=$r
  local start=$(date +%s.%N)
  # The pack paths are the working tree's for both sides: the packs did not change between them.
  timeout "$limit" ${KDA[$side]} eval "$@" --json --quiet > "$OUT/last.json" 2> "$OUT/last_err.txt"
  local rc=$?
  python3 bench/gpu/append_result.py "$OUT" "$rc" "$start" "[$side] kda eval $*" >> "$OUT/cost.jsonl"
  echo "rc=$rc [$side] kda eval $*"
}
for p in ${CUDA_PACKS:-rmsnorm softmax gemm}; do
  for rep in $(seq "${REPS:-2}"); do
    for side in before after; do record $side 120 tasks/cuda/$p/baselines/naive --task tasks/cuda/$p --workloads dev; done
  done
done
for d in tasks/contest/${CONTEST:-*}/; do
  for side in before after; do
    record $side 150 "$d/baselines/naive" --task "$d" --workloads dev --trials 1 --warmup 2 --iterations 10
  done
done
if [ -z "${SKIP_HACKS:-}" ]; then
  for h in tests/fixtures/hacks/cuda/S12[def]_*/; do
    task=$(python3 -c "import json;print(json.load(open('$h/expected.json'))['task'])")
    args=$(python3 -c "import json;print(' '.join(json.load(open('$h/expected.json')).get('eval_args',[])))")
    record after 150 "$h" --task "$task" --workloads dev $args
  done
fi
python3 - "$OUT/cost.jsonl" <<'EOF'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(lambda: collections.defaultdict(list))
for r in rows:
    side, cmd = r["command"].split("] ", 1)
    by[cmd][side[1:]].append(r["report"]["wall_s"] if r["report"] else None)
for cmd, sides in by.items():
    print(cmd[:110], {k: v for k, v in sides.items()})
EOF
echo "total: $(( $(date +%s) - t0 )) s"
