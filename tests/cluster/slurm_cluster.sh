#!/usr/bin/env bash
# kda on a real Slurm cluster (scripts/slurm-single-node.sh brings one up on this machine; CI does):
#   1. kda cluster up: one sbatch --requeue job, two kda serve job steps of two host workers each;
#   2. kda eval --on DIR/servers, for a passing and a failing solution, gives the verdicts one kda eval
#      process gives, every device of the pool used;
#   3. a server killed with kill -9 mid-run (its job step's process) has its tasks requeued to the
#      other and finished, each counted once;
#   4. kda cluster down (scancel) stops the job and every server in it.
# Skips (exit 77) when no Slurm answers here, unless KDA_REQUIRE_SLURM=1.
# Usage: slurm_cluster.sh KDA SOURCE_DIR
set -euo pipefail
KDA=$1
SRC=$2
for tool in jq curl; do
  command -v "$tool" > /dev/null || { echo "FAIL: $tool is needed (scripts/install-deps.sh installs it)"; exit 1; }
done
if ! sinfo -h > /dev/null 2>&1; then
  if [ "${KDA_REQUIRE_SLURM:-0}" = 1 ]; then
    echo "FAIL: KDA_REQUIRE_SLURM=1 but no Slurm answers (sinfo; SLURM_CONF=${SLURM_CONF:-unset})"
    exit 1
  fi
  echo "SKIP: no Slurm here (scripts/slurm-single-node.sh up, then SLURM_CONF=...)"
  exit 77
fi
tmp=$(mktemp -d)
dir=$tmp/cluster
cleanup() {
  "$KDA" cluster down --dir "$dir" > /dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
pack=$SRC/tasks/host/rmsnorm
fixtures=$SRC/tests/fixtures/solutions/host_rmsnorm

# 1. The cluster.
"$KDA" cluster up --dir "$dir" --task "$pack" --servers-per-node 2 --devices cpu:2 --time 10 \
  --num-trials 1 --warmup-runs 1 --iterations 5 --wait 120 --json > "$tmp/up.json"
servers=$(jq '[.servers[] | select(.health.status == "ok")] | length' "$tmp/up.json")
[ "$servers" = 2 ] || { echo "FAIL: $servers of 2 servers up"; cat "$tmp/up.json"; exit 1; }
job=$(jq -r .job_id "$tmp/up.json")
grep -q -- "--requeue" "$dir/job.sh" || { echo "FAIL: the job is not requeueable"; exit 1; }

# 2. The same verdicts as one process.
for sol in fast wrong; do
  "$KDA" eval "$fixtures/$sol" --task "$pack" --workloads all --warmup 1 --iterations 5 --trials 1 --json --quiet \
    > "$tmp/one-$sol.json" || true
  "$KDA" eval "$fixtures/$sol" --task "$pack" --workloads all --on "$dir/servers" --json \
    > "$tmp/on-$sol.json" 2> "$tmp/on-$sol.err" || true
  one=$(jq -c '[.traces[] | {(.workload.uuid): .evaluation.status}] | add' "$tmp/one-$sol.json")
  on=$(jq -c '[.traces[] | {(.workload.uuid): .evaluation.status}] | add' "$tmp/on-$sol.json")
  if [ "$one" != "$on" ] || [ "$one" = null ]; then
    echo "FAIL: $sol: one process $one, the pool $on"
    cat "$tmp/on-$sol.err"
    exit 1
  fi
  grep -q "4/4 device(s) busy" "$tmp/on-$sol.err" || { echo "FAIL: the pool never had its 4 devices busy"; cat "$tmp/on-$sol.err"; exit 1; }
done
echo "verdicts: the pool's equal one process's (fast: all PASSED, wrong: $(jq -r '.traces[0].evaluation.status' "$tmp/on-wrong.json"))"

# 3. kill -9 of one job step's server mid-run.
"$KDA" eval "$fixtures/fast" --task "$pack" --workloads all --on "$dir/servers" --queue "$tmp/queue.sqlite" --json \
  > "$tmp/kill.json" 2> "$tmp/kill.err" &
eval_pid=$!
victim=$(ls "$dir/servers" | head -1)
victim_url=$(jq -r .url "$dir/servers/$victim")
for _ in $(seq 100); do
  busy=$(curl -s -H "Authorization: Bearer $(cat "$dir/token")" "$victim_url/health" | jq -r '.active_tasks // 0')
  [ "$busy" -gt 0 ] && break
  sleep 0.05
done
kill -9 "$(jq -r .pid "$dir/servers/$victim")"
wait "$eval_pid" || { echo "FAIL: kda eval --on after the kill"; cat "$tmp/kill.err"; exit 1; }
retries=$(jq .dispatch.retries "$tmp/kill.json")
done_n=$(jq .dispatch.done "$tmp/kill.json")
traces=$(jq '.traces | length' "$tmp/kill.json")
uniq=$(jq '[.traces[].workload.uuid] | unique | length' "$tmp/kill.json")
passed=$(jq '[.traces[] | select(.evaluation.status == "PASSED")] | length' "$tmp/kill.json")
if [ "$retries" -lt 1 ] || [ "$done_n" != 11 ] || [ "$traces" != 11 ] || [ "$uniq" != 11 ] || [ "$passed" != 11 ]; then
  echo "FAIL: after kill -9: retries $retries, done $done_n, traces $traces ($uniq distinct), PASSED $passed"
  cat "$tmp/kill.err"
  exit 1
fi
grep -q "$victim_url is down" "$tmp/kill.err" || { echo "FAIL: the dispatcher did not see $victim_url go down"; cat "$tmp/kill.err"; exit 1; }
state=$(squeue -h -j "$job" -o %T)
[ "$state" = RUNNING ] || { echo "FAIL: the job is $state after one step died (expected RUNNING)"; exit 1; }
echo "kill -9: $retries task(s) requeued, 11 done once each, the job still RUNNING"

# 4. scancel stops everything.
other_url=$(jq -r .url "$dir/servers/$(ls "$dir/servers" | grep -v "^$victim\$" | head -1)")
"$KDA" cluster down --dir "$dir"
[ -z "$(squeue -h -j "$job" 2> /dev/null)" ] || { echo "FAIL: job $job still queued after kda cluster down"; exit 1; }
if curl -s -m 2 "$other_url/health" > /dev/null; then
  echo "FAIL: $other_url still answers after kda cluster down"
  exit 1
fi
[ -z "$(ls "$dir/servers")" ] || { echo "FAIL: address files left in $dir/servers"; exit 1; }
echo "PASS: kda cluster up/down on Slurm, kda eval --on the job's servers"
