#!/usr/bin/env bash
# kda's main job: make a built-in kernel faster with no LLM. An offline `kda run` (the tuner writer
# autotunes the pack's tunable solution in three rounds, the rules reviewer judges each round from
# kda's own measurements), then the unchanged official `kda eval` of the final solution on all
# workloads and on the hidden holdout, and the baseline, tuned result and speedup. The CUDA RMSNorm
# pack where a GPU is present, the host RMSNorm pack otherwise. Exit 1 when the final solution does
# not pass everything or is not faster than the baseline.
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

# From the FlashInfer-Bench traces `kda eval --traces` writes (JSON lines): PASSED count, workload
# count and, over the PASSED workloads, the geomeans of the baseline latency, the tuned latency and
# the speedup.
summarise() {
  jq -rs '[.[].evaluation] as $e | [$e[] | select(.status == "PASSED")] as $p
         | def gm(f): if ($p | length) == 0 then 0 else ([$p[] | f | log] | add / length | exp) end;
         "\($p | length) \($e | length) \(gm(.kda.baseline.latency_ms)) \(gm(.performance.latency_ms)) \(gm(.kda.speedup_vs_baseline))"'
}
if ! command -v jq >/dev/null 2>&1; then
  echo "main job: needs jq (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
build/kda eval "$run_dir/final" --task "$pack" --workloads all --traces "$run_dir/main-job-all.jsonl" --quiet || true
build/kda eval "$run_dir/final" --task "$pack" --holdout --traces "$run_dir/main-job-holdout.jsonl" --quiet || true
read -r all_p all_n all_base all_lat all_speedup <<<"$(summarise <"$run_dir/main-job-all.jsonl" 2>/dev/null || echo 0 0 0 0 0)"
read -r ho_p ho_n ho_base ho_lat ho_speedup <<<"$(summarise <"$run_dir/main-job-holdout.jsonl" 2>/dev/null || echo 0 0 0 0 0)"

echo
echo "== kda main job: $pack, tuned offline by kda run --writer tuner --reviewer rules ($run_dir)"
printf 'all workloads: %s/%s PASSED; baseline %.4g ms, tuned %.4g ms (geomeans); speedup %.3fx\n' \
  "$all_p" "$all_n" "$all_base" "$all_lat" "$all_speedup"
printf 'holdout:       %s/%s PASSED; baseline %.4g ms, tuned %.4g ms (geomeans); speedup %.3fx\n' \
  "$ho_p" "$ho_n" "$ho_base" "$ho_lat" "$ho_speedup"
if [ "$all_n" -eq 0 ] || [ "$all_p" -ne "$all_n" ] || [ "$ho_p" -ne "$ho_n" ] ||
   ! awk -v s="$all_speedup" 'BEGIN { exit !(s > 1) }'; then
  echo "main job: FAILED (the final solution must pass every workload and the holdout and beat the baseline)" >&2
  exit 1
fi
echo "main job: PASSED"
