#!/usr/bin/env bash
# Builds and runs bench/contest/gdn_moe_crosscheck.cc on a GPU machine (CUDA 13, sm_90a): the GDN decode, GDN
# prefill and MoE packs' GPU reference and naive baseline against their CPU reference, plus CUDA-event timings.
# Run from the repo root.
# Usage: bench/contest/gdn_moe_crosscheck.sh [OUT_DIR] [all|gdn_decode|gdn_prefill|moe|sweep|sweep_gdn|sweep_moe]
# (sweep*: every workload line of the packs, naive baseline vs GPU reference, with timings). Extra include dirs
# via KDA_EXTRA_INCLUDE (the GPU machine lacks dlpack headers: point it at a copy).
set -euo pipefail
out=${1:-build-gdn-moe-crosscheck}
which=${2:-all}
mkdir -p "$out"
inc=(-I src -I /usr/include)
[[ -n "${KDA_EXTRA_INCLUDE:-}" ]] && inc+=(-I "$KDA_EXTRA_INCLUDE")
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
cu_flags=(-shared -Xcompiler -fPIC -cudart shared -gencode=arch=compute_90a,code=sm_90a -O3 "${inc[@]}")
dec=tasks/contest/gdn_decode_qk4_v8_d128_k_last
pre=tasks/contest/gdn_prefill_qk4_v8_d128_k_last
moe=tasks/contest/moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048
pids=()
for p in dec pre moe; do
  d=${!p}
  "$nvcc" "${cu_flags[@]}" -o "$out/${p}_ref.so" "$d/reference/kernel.cu" & pids+=($!)
  "$nvcc" "${cu_flags[@]}" -o "$out/${p}_naive.so" "$d/baselines/naive/kernel.cu" & pids+=($!)
  g++ -std=c++17 -O2 -shared -fPIC "${inc[@]}" -o "$out/${p}_cpu.so" "$d/reference_cpu/kernel.cc" & pids+=($!)
done
g++ -std=c++20 -O2 "${inc[@]}" -I /usr/local/cuda/include -o "$out/gdn_moe_crosscheck" \
  bench/contest/gdn_moe_crosscheck.cc src/contest/gdn_gen.cc src/contest/moe_gen.cc src/contest/generators.cc \
  src/contest/dsa_topk_indexer_gen.cc src/contest/dsa_sparse_attention_gen.cc src/tensor/tensor.cc src/tensor/dtype.cc \
  src/util/sha256.cc -L /usr/local/cuda/lib64 -lcudart -ldl -lcrypto & pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done
"$out/gdn_moe_crosscheck" "$out" "$which"
