#!/usr/bin/env bash
# Issue 47, second run: the contract fixtures C1-C4 and the honest twin, the GDN prefill stress fixtures G1/G2,
# the MoE baseline under --graph-contract (after the runner's copy-summary fix), and kda's GDN decode on all
# workloads with the contract's and the stresses' cost per workload. Everything also goes to $OUT/summary.txt.
set -uo pipefail
exec > >(tee $OUT/summary.txt) 2>&1
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv
export CMAKE_INCLUDE_PATH=$PWD/deps/include CPATH=$PWD/deps/include
source bench/gpu/build.sh || { echo BUILD FAILED; exit 1; }
export KDA_CACHE_DIR=$(mktemp -d /tmp/kda-cache.XXXX)
summ() { jq -r '.traces[] | "\(.workload.uuid[0:8]) \(.workload.axes|tostring|.[0:40]) \(.evaluation.status) \(.evaluation.kda.reason // "") x\(.evaluation.kda.speedup_vs_baseline // "-" | tostring | .[0:5]) safe=\(.evaluation.kda.graph_safe) c=\(.evaluation.kda.graph_contract_s // "-" | tostring | .[0:5]) st=\(.evaluation.kda.stress_s // "-" | tostring | .[0:5]) rt=\(.evaluation.kda.host_round_trips.calls // "-")/\(.evaluation.kda.host_round_trips.of_calls // "-") \(.evaluation.kda.message // "" | .[0:330])"' "$1" 2>/dev/null; jq -c '[.score.geomean_speedup, .wall_s]' "$1" 2>/dev/null; }
r() { local n=$1 lim=$2; shift 2; left=$(( 585 - ($(date +%s) - t0) )); [ $left -lt 20 ] && { echo "== $n skipped: no time"; return; }; [ $lim -gt $left ] && lim=$left
  echo "== $n ($(( $(date +%s) - t0 )) s)"; timeout $lim build-gpu/kda eval "$@" --json > /tmp/$n.json 2> /tmp/$n.err; echo "rc $?"; tail -1 /tmp/$n.err | cut -c1-300; summ /tmp/$n.json; }
Q="--workloads dev --graph-contract --trials 1 --iterations 5"
for c in C1_host_read_sync C2_alloc_per_call C3_legacy_stream C4_round_trip_unless_capturing honest_smem_row_plan_cache; do
  r $c 45 tests/fixtures/hacks/cuda/$c --task tasks/cuda/rmsnorm $Q
done
r C4-informational 45 tests/fixtures/hacks/cuda/C4_round_trip_unless_capturing --task tasks/cuda/rmsnorm --workloads dev --trials 1 --iterations 5
for c in G1_gdn_prefill_half_gate G2_gdn_prefill_clamped_beta; do
  r $c 90 tests/fixtures/hacks/cuda/$c --task tasks/contest/gdn_prefill_qk4_v8_d128_k_last --workloads dev --trials 1 --iterations 3
done
P=moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048
r base-moe 150 tasks/contest/$P/baselines/naive --task tasks/contest/$P --workloads dev --graph-contract --trials 1 --iterations 3
r gdn-decode-warp-rows-all 120 solutions/gdn_decode_qk4_v8_d128_k_last/warp_rows --task tasks/contest/gdn_decode_qk4_v8_d128_k_last --workloads all --graph-contract
jq -c '[.traces[] | {u: .workload.uuid[0:8], c: .evaluation.kda.graph_contract_s, s: .evaluation.kda.stress_s}]' /tmp/gdn-decode-warp-rows-all.json > $OUT/decode-costs.json 2>/dev/null
echo "total $(( $(date +%s) - t0 )) s"
