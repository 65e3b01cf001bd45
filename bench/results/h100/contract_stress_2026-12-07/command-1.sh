#!/usr/bin/env bash
# Issue 47: the CUDA graph contract with CUPTI's host side (C1-C4, the honest twin), kda's contest solutions
# and the contest baselines under --graph-contract, with the contract's cost per workload (kda.graph_contract_s).
set -uo pipefail
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv
export CMAKE_INCLUDE_PATH=$PWD/deps/include CPATH=$PWD/deps/include
source bench/gpu/build.sh || { echo BUILD FAILED; exit 1; }
export KDA_CACHE_DIR=$(mktemp -d /tmp/kda-cache.XXXX)
summ() { jq -r '.traces[] | "\(.workload.axes|tostring|.[0:48]) \(.evaluation.status) \(.evaluation.kda.reason // "") \(.evaluation.performance.latency_ms // "-") x\(.evaluation.kda.speedup_vs_baseline // "-") safe=\(.evaluation.kda.graph_safe) c=\(.evaluation.kda.graph_contract_s // "-" | tostring | .[0:5])s st=\(.evaluation.kda.stress_s // "-" | tostring | .[0:5])s rt=\(.evaluation.kda.host_round_trips.calls // "-")/\(.evaluation.kda.host_round_trips.of_calls // "-") \(.evaluation.kda.message // "" | .[0:260])"' "$1" 2>/dev/null; jq -c '[.score, .wall_s]' "$1" 2>/dev/null; }
r() { local n=$1 lim=$2; shift 2; left=$(( 585 - ($(date +%s) - t0) )); [ $left -lt 20 ] && { echo "== $n skipped: no time"; return; }; [ $lim -gt $left ] && lim=$left
  echo "== $n ($(( $(date +%s) - t0 )) s)"; timeout $lim build-gpu/kda eval "$@" --json > /tmp/$n.json 2> /tmp/$n.err; echo "rc $?"; tail -1 /tmp/$n.err | cut -c1-300; summ /tmp/$n.json; }
Q="--workloads dev --graph-contract --trials 1 --iterations 5"
for c in C1_host_read_sync C2_alloc_per_call C3_legacy_stream C4_round_trip_unless_capturing honest_smem_row_plan_cache; do
  r $c 45 tests/fixtures/hacks/cuda/$c --task tasks/cuda/rmsnorm $Q
done
r C4-informational 45 tests/fixtures/hacks/cuda/C4_round_trip_unless_capturing --task tasks/cuda/rmsnorm --workloads dev --trials 1 --iterations 5
r gdn-decode-warp-rows 150 solutions/gdn_decode_qk4_v8_d128_k_last/warp_rows --task tasks/contest/gdn_decode_qk4_v8_d128_k_last --workloads all --graph-contract
# chunked_wy fails decay_near_one (its README): its contract is read on a copy of the pack without stresses.
P=/tmp/prefill-nostress; cp -r tasks/contest/gdn_prefill_qk4_v8_d128_k_last $P; sed -i '/^stress *=/d' $P/task.toml
r gdn-prefill-chunked-wy 150 solutions/gdn_prefill_qk4_v8_d128_k_last/chunked_wy --task $P --workloads dev --graph-contract
for p in gdn_decode_qk4_v8_d128_k_last gdn_prefill_qk4_v8_d128_k_last dsa_topk_indexer_fp8_h64_d128_topk2048_ps64 dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64 moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048; do
  r base-$p 70 tasks/contest/$p/baselines/naive --task tasks/contest/$p --workloads dev --graph-contract --trials 1 --iterations 3
done
r public-gdn-decode 60 deps/public/gdn_decode_kuangjux --task tasks/contest/gdn_decode_qk4_v8_d128_k_last --workloads dev --graph-contract --trials 1 --iterations 5
echo "total $(( $(date +%s) - t0 )) s"
