#!/usr/bin/env bash
# kda's main job: make a built-in kernel faster with no LLM. An offline `kda run` (the tuner writer
# autotunes the pack's tunable solution in three rounds, the rules reviewer judges each round from
# kda's own measurements), then the unchanged official `kda eval` of the final solution on all
# workloads and on the hidden holdout, and the baseline, tuned result and speedup. The CUDA RMSNorm
# pack where a GPU is present, the host RMSNorm pack otherwise. Exit 1 when the final solution does
# not pass everything, is not faster than the baseline, or leaves a workload far slower than it
# (below 0.8x in every trial; below 0.95x it warns).
set -euo pipefail
cd "$(dirname "$0")/.."
pack=tasks/host/rmsnorm
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && [ -x build/kda-runner ]; then
  pack=tasks/cuda/rmsnorm
fi
run_dir=${KDA_MAIN_JOB_RUN_DIR:-build/main-job/run-$(date -u +%Y%m%d-%H%M%S)}
build/kda task validate "$pack"
set +e
build/kda run "$pack" --writer tuner --reviewer rules --run-dir "$run_dir"
rc=$?
set -e
if [ ! -f "$run_dir/final/solution.json" ]; then
  echo "main job: kda run exited $rc without a final solution" >&2
  exit 1
fi

# From `kda eval --json` (its traces are FlashInfer-Bench traces with kda's fields): PASSED count,
# workload count, over the PASSED workloads the geomeans of the baseline latency, the tuned latency
# and the speedup, the speedup's 95 % interval over trials (the spread: how sure the number is), and
# the worst workload's speedup over the baseline, its best trial (baseline trial median / candidate
# trial median, trial by trial: the trials are interleaved call by call) and its shape.
summarise() {
  jq -r '[.traces[].evaluation] as $e | [$e[] | select(.status == "PASSED")] as $p
         | def gm(f): if ($p | length) == 0 then 0 else ([$p[] | f | log] | add / length | exp) end;
         ([.traces[] | select(.evaluation.status == "PASSED")] | min_by(.evaluation.kda.speedup_vs_baseline)) as $w
         | (.score.geomean_ci95 // [0, 0]) as $ci
         | ($w.evaluation.kda.candidate.trials_ms // []) as $ct | ($w.evaluation.kda.baseline.stats.trials_ms // []) as $bt
         | ([range(0; [$ct | length, $bt | length] | min) | $bt[.] / $ct[.]] | max // 0) as $best
         | "\($p | length) \($e | length) \(gm(.kda.baseline.latency_ms)) \(gm(.performance.latency_ms)) \(gm(.kda.speedup_vs_baseline)) \($ci[0]) \($ci[1]) \($w.evaluation.kda.speedup_vs_baseline // 0) \($best) \($w.workload.axes | to_entries | map("\(.key)=\(.value)") | join(","))"'
}
if ! command -v jq >/dev/null 2>&1; then
  echo "main job: needs jq (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
build/kda eval "$run_dir/final" --task "$pack" --workloads all --json --quiet >"$run_dir/main-job-all.json" || true
build/kda eval "$run_dir/final" --task "$pack" --holdout --json --quiet >"$run_dir/main-job-holdout.json" || true
read -r all_p all_n all_base all_lat all_speedup all_lo all_hi all_worst all_best all_worst_at \
  <<<"$(summarise <"$run_dir/main-job-all.json" 2>/dev/null || echo 0 0 0 0 0 0 0 0 0 -)"
read -r ho_p ho_n ho_base ho_lat ho_speedup ho_lo ho_hi ho_worst ho_best ho_worst_at \
  <<<"$(summarise <"$run_dir/main-job-holdout.json" 2>/dev/null || echo 0 0 0 0 0 0 0 0 0 -)"

echo
echo "== kda main job: $pack, tuned offline by kda run --writer tuner --reviewer rules ($run_dir)"
printf 'all workloads: %s/%s PASSED; baseline %.4g ms, tuned %.4g ms (geomeans); speedup %.3fx (95%% interval %.3f-%.3fx); worst workload %.3fx, best trial %.3fx (%s)\n' \
  "$all_p" "$all_n" "$all_base" "$all_lat" "$all_speedup" "$all_lo" "$all_hi" "$all_worst" "$all_best" "$all_worst_at"
printf 'holdout:       %s/%s PASSED; baseline %.4g ms, tuned %.4g ms (geomeans); speedup %.3fx (95%% interval %.3f-%.3fx); worst workload %.3fx, best trial %.3fx (%s)\n' \
  "$ho_p" "$ho_n" "$ho_base" "$ho_lat" "$ho_speedup" "$ho_lo" "$ho_hi" "$ho_worst" "$ho_best" "$ho_worst_at"
if [ "$all_n" -eq 0 ] || [ "$all_p" -ne "$all_n" ] || [ "$ho_p" -ne "$ho_n" ] ||
   ! awk -v s="$all_speedup" 'BEGIN { exit !(s > 1) }'; then
  echo "main job: FAILED (the final solution must pass every workload and the holdout and beat the baseline)" >&2
  exit 1
fi
# A workload far slower than the baseline fails the job: below KDA_MAIN_JOB_FLOOR (0.8x, the loop's
# completion floor, loop/criteria.h) in every trial, the rule of the loop's own completion check
# (no_workload_slower): a mean under the floor with a trial above it is within the noise. Between
# it and 0.95x the job warns: on this 2-core host the same code in two runner processes reads up to
# +-6 % apart at 50-500 us and +-30 % at 0.2 us (the holdout's 1 x 1: the naive baseline against
# itself read 0.88x-1.31x), so a stricter bar would fail on timing noise alone.
floor=${KDA_MAIN_JOB_FLOOR:-0.8}
if ! awk -v a="$all_worst" -v b="$all_best" -v f="$floor" 'BEGIN { exit !(a >= f || b >= f) }'; then
  echo "main job: FAILED (a workload ends far slower than the baseline in every trial: ${all_worst}x, best trial ${all_best}x, at $all_worst_at; floor ${floor}x)" >&2
  exit 1
fi
for w in "all workloads:$all_worst:$all_worst_at" "holdout:$ho_worst:$ho_worst_at"; do
  IFS=: read -r set ratio at <<<"$w"
  if ! awk -v a="$ratio" 'BEGIN { exit !(a >= 0.95) }'; then
    echo "main job: warning: on the $set a workload is below 0.95x of the baseline: ${ratio}x at $at" >&2
  fi
done
echo "main job: PASSED"
