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

# Geomeans of the latency, baseline and speedup columns of `kda eval`'s table; PASSED count.
summarise() {
  awk '$2 ~ /^[A-Z_]+$/ && $NF ~ /x$/ && NF >= 5 {
         n++; if ($2 == "PASSED") p++;
         lat += log($3); base += log($4); s = $5; sub(/x$/, "", s); sp += log(s)
       }
       END { if (n == 0) { print "0 0 0 0 0"; exit }
             printf "%d %d %.6g %.6g %.4f\n", p, n, exp(base / n), exp(lat / n), exp(sp / n) }'
}
all_out=$(build/kda eval "$run_dir/final" --task "$pack" --workloads all 2>/dev/null)
holdout_out=$(build/kda eval "$run_dir/final" --task "$pack" --holdout 2>/dev/null)
echo "$all_out"
echo "$holdout_out"
read -r all_p all_n all_base all_lat all_speedup <<<"$(echo "$all_out" | summarise)"
read -r ho_p ho_n ho_base ho_lat ho_speedup <<<"$(echo "$holdout_out" | summarise)"

echo
echo "== kda main job: $pack, tuned offline by kda run --writer tuner --reviewer rules ($run_dir)"
printf 'all workloads: %s/%s PASSED; baseline %s ms, tuned %s ms (geomeans); speedup %sx\n' \
  "$all_p" "$all_n" "$all_base" "$all_lat" "$all_speedup"
printf 'holdout:       %s/%s PASSED; baseline %s ms, tuned %s ms (geomeans); speedup %sx\n' \
  "$ho_p" "$ho_n" "$ho_base" "$ho_lat" "$ho_speedup"
if [ "$all_n" -eq 0 ] || [ "$all_p" -ne "$all_n" ] || [ "$ho_p" -ne "$ho_n" ] ||
   ! awk -v s="$all_speedup" 'BEGIN { exit !(s > 1) }'; then
  echo "main job: FAILED (the final solution must pass every workload and the holdout and beat the baseline)" >&2
  exit 1
fi
echo "main job: PASSED"
