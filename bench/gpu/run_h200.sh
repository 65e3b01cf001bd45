#!/usr/bin/env bash
# One batched H200 session: build kda on the GPU machine, run the GPU tests, evaluate every CUDA
# pack's baseline on all its workloads, the CUDA fixtures, and the contest baselines on their dev
# workloads. Results: $OUT/results.jsonl (one compact `kda eval --json` report per line, with the
# command that produced it) and $OUT/log.txt. Usage on the device: bench/gpu/run_h200.sh
# (after scripts/device-deps.sh here; carry deps/).
# Stages (each fits one 10-minute device command; the build is reused while the machine is warm):
#   bench/gpu/run_h200.sh core      build, CUDA packs on all workloads, fixtures, hacks, gpu ctest
#   bench/gpu/run_h200.sh contest   the five contest baselines on all their workloads
#   bench/gpu/run_h200.sh fidelity  kda's latency against Nsight Compute's gpu__time_duration for the
#                                   same kernels in the same run (CUDA packs, dev workloads; FID_PACKS)
#   bench/gpu/run_h200.sh final     CUDA rmsnorm on all workloads (evaluator overhead), then contest
#                                   (per-evaluation limit $LIMIT s, default 240)
#   bench/gpu/run_h200.sh profile   kda ncu profile + analyze of the DSA indexer (largest dev workload) and
#                                   CUDA GEMM naive baselines, the native source view's tests; kda sanitize
#                                   (memcheck) of the CUDA rmsnorm baseline (expect clean) and of the oob
#                                   fixture (expect a failure), unless SKIP_SANITIZE is set
#   bench/gpu/run_h200.sh hacks     the CUDA adversarial suite (tests/fixtures/hacks/cuda)
#   bench/gpu/run_h200.sh fixtures  the CUDA evaluator fixtures (tests/fixtures/solutions/cuda_*; FIXTURES
#                                   selects some, FIXTURES_FULL=1 runs them on all workloads + holdout);
#                                   after hacks, fixtures or core, bench/gpu/check_expected.py checks
#                                   every fixture's outcome against its expected.json
#   bench/gpu/run_h200.sh kernels   kda's own solutions: each line of KERNELS (default bench/gpu/kernels.txt),
#                                   "<timeout_s> <kda eval arguments>"; `--workloads all` in chunks of CHUNK
#   bench/gpu/run_h200.sh kprofile  Nsight Compute on kda's own solutions: each line of KPROFILES (default
#                                   bench/gpu/kprofiles.txt), kda ncu profile + analyze (REPORT.md per kernel)
#   bench/gpu/run_h200.sh ctest     the GPU tests alone: every test of ctest label gpu (target gpu-tests)
#   bench/gpu/run_h200.sh quick     GPU tests, CUDA rmsnorm on all workloads (device and host inputs),
#                                   each contest baseline on two dev workloads
#   bench/gpu/run_h200.sh overhead  what each per-call primitive of the CUDA runner costs (call_overhead_bench),
#                                   then each CUDA pack on its dev workloads and rmsnorm on all (phases:
#                                   runner_pre_s, ..., other_s)
#   bench/gpu/run_h200.sh timers    how CUPTI, %globaltimer and ncu read the same short kernels
#                                   (bench/gpu/timer_offset.cu and .py): each timer's own offset
#   bench/gpu/run_h200.sh modes     where a µs kernel's slow calls come from (bench/gpu/latency_modes.cu):
#                                   flush, warmed translations, idle gaps, place in its page; MODES_PROCS runs,
#                                   then two beside a process holding an idle context
#   bench/gpu/run_h200.sh codefetch what a kernel's code size costs after kda eval's L2 flush (bench/gpu/code_fetch.cu):
#                                   unrolled against rolled kernels of 1-64 KiB of code, one warp and a full grid,
#                                   with and without the flush; one JSON line each into $OUT/codefetch.jsonl
#   bench/gpu/run_h200.sh spread    run-to-run spread: each CUDA pack's dev workloads SPREAD_RUNS times
#                                   (default 5, fresh seeds), CV per workload by bench/gpu/spread.py
#   bench/gpu/run_h200.sh all       core and contest (longer than one device command allows)
# Several stages may be named in one command (bench/gpu/run_h200.sh quick hacks): they run in the
# script's order (ctest, quick, overhead, spread, core, hacks, fixtures, codefetch, kernels, kprofile, final, contest, fidelity, timers, modes, profile), sharing one
# build. BUDGET (seconds since the script started, default 570) bounds the whole command: every
# evaluation's timeout is cut to what is left, and nothing starts in the last 20 s, so the archive
# is always written before the device command's 600 s limit.
set -u
STAGES=" ${*:-all} "
STAGE=$(echo ${*:-all} | tr ' ' '_')
BUDGET=${BUDGET:-570}
has() { case "$STAGES" in *" $1 "*) return 0;; esac; return 1; }
left() { echo $(( BUDGET - ($(date +%s) - t0) )); }
cap() { local r; r=$(left); [ "$r" -lt 20 ] && return 1; [ "$1" -lt "$r" ] && r=$1; echo "$r"; }  # cap <s>
# step <name> <expected rc> <timeout_s> <kda args...>: run kda within the budget, keep its stdout as
# $OUT/<name>.json and stderr as .err, one line per step in $OUT/profile.jsonl (profile and kprofile stages).
step() {
  local name=$1 want=$2 limit; limit=$(cap "$3") || { echo "skipped (budget): $name"; return; }
  shift 3
  local start=$(date +%s)
  timeout "$limit" $B/kda "$@" > "$OUT/$name.json" 2> "$OUT/$name.err"
  local rc=$?
  echo "{\"step\": \"$name\", \"rc\": $rc, \"expected_rc\": $want, \"seconds\": $(( $(date +%s) - start )), \"command\": \"kda $*\"}" >> "$OUT/profile.jsonl"
  echo "rc=$rc (expected $want) kda $*"
  [ "$rc" = "$want" ] || tail -20 "$OUT/$name.err"
}
OUT=${OUT:-/tmp/kda-out}
mkdir -p "$OUT"
LOG=$OUT/log.txt
exec > >(tee -a "$LOG") 2>&1
# The device tool brings back only a handful of files: at exit everything except the log and the
# results goes into one archive.
pack_out() {
  (cd "$OUT" && find . -type f ! -name log.txt ! -name results.jsonl ! -name fidelity.jsonl ! -name profile.jsonl ! -name overhead.jsonl ! -name spread.jsonl ! -name timers.jsonl ! -name modes.jsonl ! -name codefetch.jsonl \
     ! -name 'files-*.tgz' ! -name kda-bin.tgz -print0 | tar czf "files-$STAGE.tgz" --null -T - --remove-files) 2> /dev/null || true
}
trap pack_out EXIT
export CC=/usr/bin/gcc CXX=/usr/bin/g++
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
t0=$(date +%s)
source bench/gpu/build.sh  # build-gpu/kda and kda-runner (or prebuilt/kda-bin.tgz unpacked; KEEP_BIN=1 keeps them)
B=build-gpu
SANDBOX=""
record() {  # record <timeout_s> <kda eval args...>: the timeout is cut to the budget left
  local limit; limit=$(cap "$1") || { shift; echo "skipped (budget): kda eval $*"; return 124; }
  shift
  local start=$(date +%s.%N)
  timeout "$limit" $B/kda eval "$@" $SANDBOX --json --quiet > "$OUT/last.json" 2> "$OUT/last_err.txt"
  local rc=$?
  python3 bench/gpu/append_result.py "$OUT" "$rc" "$start" "kda eval $* $SANDBOX" >> "$OUT/results.jsonl"
  echo "rc=$rc kda eval $* $SANDBOX"
  return $rc
}

# Sandbox smoke test: if the sandboxed CUDA runner cannot work here, say so and continue without.
record 120 tasks/cuda/rmsnorm/baselines/naive --task tasks/cuda/rmsnorm --workloads dev --trials 1 --iterations 5
if [ $? -ge 2 ]; then
  echo "FIRST CUDA EVAL FAILED; retrying with the compiler sandbox off (KDA_BUILD_SANDBOX=0)"
  export KDA_BUILD_SANDBOX=0
  record 120 tasks/cuda/rmsnorm/baselines/naive --task tasks/cuda/rmsnorm --workloads dev --trials 1 --iterations 5
  if [ $? -ge 2 ]; then echo "STILL FAILING; continuing with --no-sandbox"; SANDBOX="--no-sandbox"; fi
fi

if has ctest; then
  ( cmake --build --preset gpu -j 16 --target gpu-tests > "$OUT/gpu_tests_build.log" 2>&1 || { grep -m 20 error "$OUT/gpu_tests_build.log"; false; } ) &&
    ctest --test-dir $B -L gpu --output-on-failure --timeout "$(cap 400 || echo 20)" || echo "gpu ctest failed"
fi

if has quick; then
  # GPU tests, then one evaluation of each kind: a CUDA pack on all workloads (overhead), the same
  # with host-generated inputs (the old path, for comparison), and each contest baseline on its
  # first two dev workloads.
  ( cmake --build --preset gpu -j 16 --target gpu-tests > "$OUT/gpu_tests_build.log" 2>&1 && ctest --test-dir $B -L gpu --output-on-failure ) || echo "gpu ctest failed"
  record 100 tasks/cuda/rmsnorm/baselines/naive --task tasks/cuda/rmsnorm --workloads all
  record 100 tasks/cuda/rmsnorm/baselines/naive --task tasks/cuda/rmsnorm --workloads all --host-inputs
  for d in tasks/contest/*/; do
    two=$($B/kda task show "$d" --json | python3 -c "import json,sys; print(','.join(json.load(sys.stdin)['dev_workloads'][:2]))")
    record "${LIMIT:-60}" "$d/baselines/naive" --task "$d" --workloads "$two" --trials 1 --warmup 2 --iterations 10
  done
fi
if has overhead; then
  # The per-call primitives of the CUDA runner on their own (bench/gpu/call_overhead.cu), with the
  # CUDA default sync and with blocking sync (what the runner uses), into $OUT/overhead.jsonl.
  # OVERHEAD_BENCH=0 skips the primitives (evaluations only).
  if [ "${OVERHEAD_BENCH:-1}" != 0 ]; then
    cmake --build --preset gpu -j 16 --target call_overhead_bench > "$OUT/overhead_build.log" 2>&1 || tail -5 "$OUT/overhead_build.log"
    $B/src/runner/call_overhead_bench --reps 300 >> "$OUT/overhead.jsonl"
    $B/src/runner/call_overhead_bench --reps 300 --blocking >> "$OUT/overhead.jsonl"
    cat "$OUT/overhead.jsonl"
  fi
  # The issue's measure: each CUDA pack's dev workloads; then rmsnorm on all (comparable with runs 5-14).
  for p in rmsnorm softmax gemm; do
    record 120 tasks/cuda/$p/baselines/naive --task tasks/cuda/$p --workloads dev
  done
  record 120 tasks/cuda/rmsnorm/baselines/naive --task tasks/cuda/rmsnorm --workloads all
fi
if has spread; then
  # Run-to-run spread: each CUDA pack's baseline on its dev workloads SPREAD_RUNS times (default 5),
  # every run on a fresh secret seed, no baseline timing; bench/gpu/spread.py -> $OUT/spread.jsonl.
  for p in ${SPREAD_PACKS:-rmsnorm softmax gemm}; do
    for r in $(seq "${SPREAD_RUNS:-5}"); do
      record 60 tasks/cuda/$p/baselines/naive --task tasks/cuda/$p --workloads dev --no-baseline
    done
  done
  python3 bench/gpu/spread.py "$OUT/results.jsonl" > "$OUT/spread.jsonl"
  cat "$OUT/spread.jsonl"
fi
if has core || has all; then
for p in rmsnorm softmax gemm; do
  record 120 tasks/cuda/$p/baselines/naive --task tasks/cuda/$p --workloads all
done
for f in tests/fixtures/solutions/cuda_rmsnorm/*/; do
  record 60 "$f" --task tasks/cuda/rmsnorm --workloads dev --trials 1 --iterations 5 --call-timeout 5
done
for h in tests/fixtures/hacks/cuda/*/; do
  task=$(python3 -c "import json;print(json.load(open('$h/expected.json'))['task'])")
  wl=$(python3 -c "import json;print(json.load(open('$h/expected.json')).get('workloads','dev'))")
  args=$(python3 -c "import json;print(' '.join(json.load(open('$h/expected.json')).get('eval_args',['--trials','1','--iterations','5'])))")
  record 60 "$h" --task "$task" --workloads "$wl" $args
done
( cmake --build --preset gpu -j 16 --target gpu-tests > "$OUT/gpu_tests_build.log" 2>&1 && ctest --test-dir $B -L gpu --output-on-failure ) || echo "gpu ctest failed"
fi
if has hacks; then
  # The CUDA adversarial suite alone (every fixture under tests/fixtures/hacks/cuda; HACKS selects a
  # subset by directory name). Fixtures whose expected.json says "workloads": "holdout" run there.
  if [ -n "${HACKS:-}" ]; then dirs=$(for n in $HACKS; do echo "tests/fixtures/hacks/cuda/$n/"; done)
  else dirs=$(ls -d tests/fixtures/hacks/cuda/*/); fi
  for h in $dirs; do
    task=$(python3 -c "import json;print(json.load(open('$h/expected.json'))['task'])")
    wl=$(python3 -c "import json;print(json.load(open('$h/expected.json')).get('workloads','dev'))")
    # eval_args: timing a fixture needs instead of the quick default (the fresh-versus-repeat test
    # needs at least 3 fresh and 3 repeated timed calls).
    args=$(python3 -c "import json;print(' '.join(json.load(open('$h/expected.json')).get('eval_args',['--trials','1','--iterations','5'])))")
    record 120 "$h" --task "$task" --workloads "$wl" $args --call-timeout 5
  done
fi
if has fixtures; then
  # The CUDA evaluator fixtures (tests/fixtures/solutions/cuda_*: fast, wrong, crash, hang, oob,
  # tvm_ffi) on their pack's dev workloads. FIXTURES selects some ("cuda_rmsnorm/tvm_ffi ...");
  # FIXTURES_FULL=1 evaluates each on all workloads and on the holdout at the pack's own timing.
  dirs=""
  [ -n "${FIXTURES:-}" ] && dirs=$(for n in $FIXTURES; do echo "tests/fixtures/solutions/$n/"; done)
  for f in ${dirs:-tests/fixtures/solutions/cuda_*/*/}; do
    task=$(python3 -c "import json;print(json.load(open('$f/expected.json'))['task'])")
    if [ "${FIXTURES_FULL:-0}" = 1 ]; then
      record 120 "$f" --task "$task" --workloads all; cp "$OUT/last.json" "$OUT/$(echo "$f" | tr / _)all.json"
      record 60 "$f" --task "$task" --workloads holdout; cp "$OUT/last.json" "$OUT/$(echo "$f" | tr / _)holdout.json"
    else
      record 60 "$f" --task "$task" --workloads dev --trials 1 --iterations 5 --call-timeout 5
    fi
  done
fi
if has codefetch; then
  # What a kernel's code size costs after kda eval's L2 flush (bench/gpu/code_fetch.cu): one JSON line per
  # (kernel, KiB of code, grid, flush) into $OUT/codefetch.jsonl.
  # Built here with nvcc alone (it needs only the runner's flush), so a prebuilt kda stays usable.
  cuda=$(dirname "$(command -v nvcc)")/..
  nvcc -arch=sm_90a -O3 -std=c++20 -I. -Isrc -Ibench/gpu -Ideps/include bench/gpu/code_fetch.cu src/runner/device_inputs.cu \
    -L"$cuda/lib64" -L"$cuda/extras/CUPTI/lib64" -lcupti -o "$B/code_fetch_bench" > "$OUT/codefetch_build.log" 2>&1 ||
    tail -5 "$OUT/codefetch_build.log"
  lim=$(cap 120) && timeout "$lim" "$B/code_fetch_bench" | tee -a "$OUT/codefetch.jsonl"
fi
if has kernels; then
  # kda's own solutions (solutions/): every line of $KERNELS (default bench/gpu/kernels.txt) is
  # "<timeout_s> <kda eval arguments>", '#' starts a comment. A line with `--workloads all` runs in chunks of
  # CHUNK workloads (default 16), so that what finished is in results.jsonl when the command's time runs out;
  # SKIP_CHUNKS=N skips the first N chunks of every such line, and a line whose limit reads "<timeout_s>/<N>"
  # skips its own first N (to resume in the next command what the last one did not reach).
  while read -r limit args; do
    case "$limit" in '' | \#*) continue ;; esac
    skip=${SKIP_CHUNKS:-0}
    if [[ "$limit" == */* ]]; then skip=${limit#*/}; limit=${limit%%/*}; fi
    if [[ " $args " == *" --workloads all "* ]]; then
      task=$(echo "$args" | sed -E 's/.*--task ([^ ]+).*/\1/')
      $B/kda task show "$task" --json < /dev/null | python3 -c "
import json, sys
uuids = [w['uuid'] for w in json.load(sys.stdin)['workloads']]
n = int('${CHUNK:-16}')
for i in range(0, len(uuids), n): print(','.join(uuids[i:i + n]))" > "$OUT/chunks.txt"
      k=0
      while read -r chunk; do
        k=$((k + 1))
        [ "$k" -le "$skip" ] && continue
        record "$limit" ${args/--workloads all/--workloads $chunk} < /dev/null
      done < "$OUT/chunks.txt"
    else
      record "$limit" $args < /dev/null
    fi
  done < "${KERNELS:-bench/gpu/kernels.txt}"
fi
if has kprofile; then
  # Nsight Compute on kda's own solutions: every line of $KPROFILES (default bench/gpu/kprofiles.txt) is
  # "<timeout_s> <solution> <task> <workload> [kda ncu profile options]"; each is a step (kprofiles/<n>.json, one
  # line in profile.jsonl) and gives kda ncu analyze's REPORT.md and analysis.json in $OUT/kprofiles/<n>/.
  mkdir -p "$OUT/kprofiles"
  n=0
  while read -r limit sol task workload opts; do
    case "$limit" in '' | \#*) continue ;; esac
    n=$((n + 1))
    name="kprofiles/$(basename "$sol")_$n"
    step "$name" 0 "$limit" ncu profile "$sol" --task "$task" --workload "$workload" $opts \
      --out "$OUT/$name.ncu-rep" --json < /dev/null
    [ -f "$OUT/$name.ncu-rep" ] && $B/kda ncu analyze "$OUT/$name.ncu-rep" -o "$OUT/$name" > /dev/null 2>> "$OUT/$name.err"
    # The analysis is what comes back; the report itself (megabytes) only with KEEP_REP=1.
    [ "${KEEP_REP:-0}" = 1 ] || rm -f "$OUT/$name.ncu-rep"
  done < "${KPROFILES:-bench/gpu/kprofiles.txt}"
fi
if has hacks || has fixtures || has core || has all; then
  python3 bench/gpu/check_expected.py "$OUT/results.jsonl" || echo "fixture check: mismatches above"
fi
if has final; then
  record 100 tasks/cuda/rmsnorm/baselines/naive --task tasks/cuda/rmsnorm --workloads all
fi
if has contest || has all || has final; then
# PACKS (space-separated pack directory names, default all five) and CHUNK (workloads per kda eval,
# default all): chunks keep what finished when the device command's time runs out; SKIP_CHUNKS skips
# the first N chunks of every pack (to resume).
for name in ${PACKS:-$(ls tasks/contest)}; do
  d=tasks/contest/$name
  $B/kda task show "$d" --json | python3 -c "
import json, sys
uuids = [w['uuid'] for w in json.load(sys.stdin)['workloads']]
n = int('${CHUNK:-0}') or len(uuids)
for i in range(0, len(uuids), n): print(','.join(uuids[i:i + n]))" > "$OUT/chunks.txt"
  k=0
  while read -r chunk; do
    k=$((k + 1))
    [ "$k" -le "${SKIP_CHUNKS:-0}" ] && continue
    record "${LIMIT:-240}" "$d/baselines/naive" --task "$d" --workloads "$chunk" --trials 1 --warmup 2 --iterations 10
  done < "$OUT/chunks.txt"
done
fi
if has fidelity; then
  # kda's latency against ncu's gpu__time_duration for the same kernel: per CUDA pack and dev workload,
  # `kda ncu profile --metrics gpu__time_duration.sum` (one call under ncu, one pass, clocks not locked)
  # twice: --cache-control all (ncu invalidates its caches before the kernel) and none (the caches as
  # kda's own L2 flush left them, kda eval's conditions); then `kda eval` of the same workload (default
  # timing), all joined by bench/gpu/fidelity.py into $OUT/fidelity.jsonl. (Running ncu over a whole
  # `kda eval` crashed the reference runner at load in run 7.)
  mkdir -p "$OUT/fid"
  for p in ${FID_PACKS:-rmsnorm softmax gemm}; do
    for u in $($B/kda task show tasks/cuda/$p --json | python3 -c "import json,sys; print(' '.join(json.load(sys.stdin)['dev_workloads']))"); do
      profs=()
      for cc in all none; do
        lim=$(cap 120) || break 3
        timeout "$lim" $B/kda ncu profile tasks/cuda/$p/baselines/naive --task tasks/cuda/$p --workload "$u" \
          --metrics gpu__time_duration.sum --cache-control $cc --out "$OUT/fid/$p-${u:0:8}-$cc.ncu-rep" --json \
          > "$OUT/fid/prof-$p-${u:0:8}-$cc.json" 2> "$OUT/fid_prof.err" || { echo "profile $p $u ($cc) failed"; tail -5 "$OUT/fid_prof.err"; }
        profs+=("cache_$cc=$OUT/fid/prof-$p-${u:0:8}-$cc.json")
      done
      lim=$(cap 120) || break
      timeout "$lim" $B/kda eval tasks/cuda/$p/baselines/naive --task tasks/cuda/$p --workloads "$u" --no-baseline \
        --json --quiet > "$OUT/fid_eval.json" 2> "$OUT/fid_eval.err" || true
      python3 bench/gpu/fidelity.py "$OUT/fid_eval.json" "${profs[@]}" >> "$OUT/fidelity.jsonl" || tail -5 "$OUT/fid_eval.err"
    done
  done
  cat "$OUT/fidelity.jsonl"
fi
if has timers; then
  # How CUPTI (kda's latency), %globaltimer (inside the kernel) and ncu's gpu__time_duration read the
  # same short kernels (bench/gpu/timer_offset.cu): an empty kernel and copies of 256 KiB to 256 MiB,
  # each after the runner's L2 read flush. The bench with CUPTI, then twice under ncu (--cache-control
  # all and none; CUPTI off there), joined by bench/gpu/timer_offset.py into $OUT/timers.jsonl.
  cmake --build --preset gpu -j 16 --target timer_offset_bench > "$OUT/timers_build.log" 2>&1 || tail -5 "$OUT/timers_build.log"
  TNCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  mkdir -p "$OUT/timers"
  $B/src/runner/timer_offset_bench --reps 100 > "$OUT/timers/cupti.jsonl"
  cat "$OUT/timers/cupti.jsonl"
  joins=()
  for cc in all none; do
    lim=$(cap 150) || break
    timeout "$lim" "$TNCU" --metrics gpu__time_duration.sum --cache-control $cc --clock-control none -k regex:timed_ \
      --log-file "$OUT/timers/ncu_$cc.log" -o "$OUT/timers/ncu_$cc" -f \
      $B/src/runner/timer_offset_bench --reps 20 --no-cupti > "$OUT/timers/ncu_$cc.jsonl" || { echo "ncu ($cc) failed"; tail -5 "$OUT/timers/ncu_$cc.log"; continue; }
    "$TNCU" --import "$OUT/timers/ncu_$cc.ncu-rep" --csv --page raw --print-units base > "$OUT/timers/ncu_$cc.csv"
    joins+=("cache_$cc=$OUT/timers/ncu_$cc.csv")
  done
  python3 bench/gpu/timer_offset.py "$OUT/timers/cupti.jsonl" "${joins[@]}" | tee "$OUT/timers.jsonl"
fi
if has modes; then
  # Where a µs kernel's slow calls come from (bench/gpu/latency_modes.cu): an rmsnorm-shaped row kernel
  # timed as kda eval times a call, with and without the flush, with its pages' translations warmed,
  # with the GPU idle between calls, and at three places in its 2 MiB page; MODES_PROCS (default 4)
  # processes in a row, one JSON line per variant into $OUT/modes.jsonl.
  cmake --build --preset gpu -j 16 --target latency_modes_bench > "$OUT/modes_build.log" 2>&1 || tail -5 "$OUT/modes_build.log"
  for p in $(seq "${MODES_PROCS:-4}"); do
    lim=$(cap 60) || break
    timeout "$lim" $B/src/runner/latency_modes_bench | sed "s/^{/{\"process\": $p, /" | tee -a "$OUT/modes.jsonl"
  done
  # and twice more beside a process that holds an idle context (as kda eval's other runners do)
  for p in 1 2; do
    lim=$(cap 60) || break
    $B/src/runner/latency_modes_bench --hold 40 & holder=$!
    sleep 2
    timeout "$lim" $B/src/runner/latency_modes_bench | sed "s/^{/{\"process\": \"beside_idle_$p\", /" | tee -a "$OUT/modes.jsonl"
    kill $holder 2> /dev/null; wait $holder 2> /dev/null
  done
fi
if has profile; then
  # Results: $OUT/profiles/<name>.ncu-rep (+ .log), $OUT/profiles/<name>/REPORT.md and analysis.json,
  # $OUT/profile_<name>.json (kda ncu profile --json), $OUT/sanitize_<name>.json, one summary line
  # per step in $OUT/profile.jsonl (step, defined at the top).
  mkdir -p "$OUT/profiles"
  # The dev workload with the largest product of axis values: the one a kernel engineer would profile.
  largest_dev() { $B/kda task show "$1" --json | python3 -c "
import json, math, sys
t = json.load(sys.stdin)
axes = {w['uuid']: w.get('axes', {}) for w in t['workloads']}
print(max(t['dev_workloads'], key=lambda u: math.prod(v for v in axes.get(u, {}).values() if isinstance(v, (int, float)))))"; }
  DSA=tasks/contest/dsa_topk_indexer_fp8_h64_d128_topk2048_ps64
  step profile_dsa_indexer 0 420 ncu profile $DSA/baselines/naive --task $DSA --workload "$(largest_dev $DSA)" \
    --out "$OUT/profiles/dsa_indexer_naive.ncu-rep" --json
  step profile_gemm 0 300 ncu profile tasks/cuda/gemm/baselines/naive --task tasks/cuda/gemm \
    --workload "$(largest_dev tasks/cuda/gemm)" --out "$OUT/profiles/gemm_naive.ncu-rep" --json
  for n in dsa_indexer_naive gemm_naive; do
    [ -f "$OUT/profiles/$n.ncu-rep" ] && $B/kda ncu analyze "$OUT/profiles/$n.ncu-rep" -o "$OUT/profiles/$n" > /dev/null
  done
  # Reading a report: kda's native reader + analysis against ncu's own CSV export of the same report.
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | tail -1)
  for n in dsa_indexer_naive gemm_naive; do
    r="$OUT/profiles/$n.ncu-rep"; [ -f "$r" ] || continue
    t0n=$(date +%s.%N); $B/kda ncu analyze "$r" --json > /dev/null; t1n=$(date +%s.%N)
    [ -n "$NCU" ] && "$NCU" --import "$r" --csv --page raw > "$OUT/profiles/$n.raw.csv" 2> /dev/null; t2n=$(date +%s.%N)
    python3 -c "print('read $n ($(stat -c %s "$r") B): kda ncu analyze %.3f s, ncu --import --csv --page raw %.3f s' % ($t1n - $t0n, $t2n - $t1n))"
  done
  # The native source view against the real nvdisasm (the opcode check skips where it is missing).
  if cmake --build --preset gpu -j 16 --target native_source_test > "$OUT/native_source_build.log" 2>&1; then
    $B/src/ncu/native_source_test --gtest_filter='NativeSource.*' 2>&1 | tail -15
  else tail -5 "$OUT/native_source_build.log"; fi
  for n in dsa_indexer_naive gemm_naive; do
    [ -f "$OUT/profiles/$n.log" ] && grep -H "Failed to import" "$OUT/profiles/$n.log"
  done
  [ -n "${SKIP_SANITIZE:-}" ] && { echo "sanitize steps skipped (SKIP_SANITIZE)"; } || {
  step sanitize_rmsnorm_naive 0 300 sanitize tasks/cuda/rmsnorm/baselines/naive --task tasks/cuda/rmsnorm \
    --tool memcheck --log-dir "$OUT/sanitize_logs/naive" --json
  # Expect 1: memcheck sees the write only if it leaves the runner's arena allocation; the guard
  # bands (VIOLATION_OUT_OF_BOUNDS) catch it otherwise. The verdict says which.
  step sanitize_rmsnorm_oob 1 300 sanitize tests/fixtures/solutions/cuda_rmsnorm/oob --task tasks/cuda/rmsnorm \
    --tool memcheck --log-dir "$OUT/sanitize_logs/oob" --json
  python3 -c "
import json
for n in ('sanitize_rmsnorm_naive', 'sanitize_rmsnorm_oob'):
    try: j = json.load(open('$OUT/' + n + '.json'))
    except Exception as e: print(n, 'no JSON:', e); continue
    for w in j['workloads']: print(n, w['uuid'], w['verdict'], w['errors'], (w['evidence'] or [[w['message']]])[0][0])
"
  }
fi
echo "total: $(( $(date +%s) - t0 )) s"
