#!/usr/bin/env bash
# Next session (issue 47): (1) chunked_wy's decay_near_one failure: state_scan's A operands split into bf16 pairs
# (deps/chunked_wy_split.patch adds SPLIT: 1 Delta, 2 X, 3 both; 0 = today's kernel), each on the prefill pack's
# dev workloads with its stresses; (2) the MoE baseline on the pack with extreme_scales declared too (a copy).
set -uo pipefail
exec > >(tee $OUT/summary.txt) 2>&1
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv
export CMAKE_INCLUDE_PATH=$PWD/deps/include CPATH=$PWD/deps/include
source bench/gpu/build.sh || { echo BUILD FAILED; exit 1; }
export KDA_CACHE_DIR=$(mktemp -d /tmp/kda-cache.XXXX)
T=tasks/contest/gdn_prefill_qk4_v8_d128_k_last
base=/tmp/cw-src; rm -rf $base; cp -r solutions/gdn_prefill_qk4_v8_d128_k_last/chunked_wy $base
(cd $base && patch -p4 < $OLDPWD/deps/chunked_wy_split.patch) || { echo "patch failed"; }
for v in 3 1 0 2; do
  d=/tmp/cw$v; rm -rf $d; cp -r $base $d
  sed -i "s/^#define SPLIT 0 /#define SPLIT $v /" $d/kernel.cu; grep -c "^#define SPLIT $v " $d/kernel.cu
  left=$(( 400 - ($(date +%s) - t0) )); [ $left -lt 30 ] && break
  echo "== SPLIT=$v ($(( $(date +%s) - t0 )) s)"
  timeout $left build-gpu/kda eval $d --task $T --workloads dev --trials 1 --iterations 20 --json > /tmp/s$v.json 2> /tmp/s$v.err; echo "rc $?"
  tail -1 /tmp/s$v.err | cut -c1-200
  jq -r '.traces[] | "\(.workload.uuid[0:8]) T=\(.workload.axes.total_seq_len) n=\(.workload.axes.num_seqs) \(.evaluation.status) \(.evaluation.performance.latency_ms // "-" | tostring | .[0:7]) ms base \(.evaluation.kda.baseline.latency_ms // "-" | tostring | .[0:7]) tol=\(.evaluation.kda.tolerance_used // "-" | tostring | .[0:6]) \(.evaluation.kda.message // "" | .[0:230])"' /tmp/s$v.json
  jq -c '[.score.geomean_speedup, .wall_s]' /tmp/s$v.json
done
P=moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048; M=/tmp/moe-xs; rm -rf $M; cp -r tasks/contest/$P $M
sed -i 's/^stress = \["saturated_logits", "hot_experts"\]/stress = ["saturated_logits", "hot_experts", "extreme_scales"]/' $M/task.toml; grep "^stress" $M/task.toml
left=$(( 570 - ($(date +%s) - t0) ))
if [ $left -gt 40 ]; then
  echo "== MoE baseline with every stress ($(( $(date +%s) - t0 )) s)"
  timeout $left build-gpu/kda eval $M/baselines/naive --task $M --workloads dev --trials 1 --iterations 3 --json > /tmp/moe.json 2> /tmp/moe.err; echo "rc $?"
  jq -r '.traces[] | "\(.workload.uuid[0:8]) T=\(.workload.axes.seq_len) \(.evaluation.status) st=\(.evaluation.kda.stress_s // "-" | tostring | .[0:5]) \(.evaluation.kda.message // "" | .[0:260])"' /tmp/moe.json
fi
echo "total $(( $(date +%s) - t0 )) s"
