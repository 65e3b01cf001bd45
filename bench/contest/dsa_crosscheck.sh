#!/usr/bin/env bash
# Builds and runs bench/contest/dsa_crosscheck.cc on a GPU machine (CUDA 13, sm_90a): the DSA packs' GPU
# reference and naive baseline against their CPU reference, plus CUDA-event timings. Run from the repo root.
# Usage: bench/contest/dsa_crosscheck.sh [OUT_DIR] [all|indexer|attention|sweep]  (sweep: every workload line of
# both packs, GPU reference vs naive baseline); extra include dirs via KDA_EXTRA_INCLUDE
# (the GPU machine lacks dlpack headers: point it at a copy).
set -euo pipefail
out=${1:-build-dsa-crosscheck}
which=${2:-all}
mkdir -p "$out"
inc=(-I src -I /usr/include)
[[ -n "${KDA_EXTRA_INCLUDE:-}" ]] && inc+=(-I "$KDA_EXTRA_INCLUDE")
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
cu_flags=(-shared -Xcompiler -fPIC -cudart shared -gencode=arch=compute_90a,code=sm_90a -O3 "${inc[@]}")
idx=tasks/contest/dsa_topk_indexer_fp8_h64_d128_topk2048_ps64
attn=tasks/contest/dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64
pids=()
"$nvcc" "${cu_flags[@]}" -o "$out/idx_ref.so" "$idx/reference/kernel.cu" & pids+=($!)
"$nvcc" "${cu_flags[@]}" -o "$out/idx_naive.so" "$idx/baselines/naive/kernel.cu" & pids+=($!)
"$nvcc" "${cu_flags[@]}" -o "$out/attn_ref.so" "$attn/reference/kernel.cu" & pids+=($!)
"$nvcc" "${cu_flags[@]}" -o "$out/attn_naive.so" "$attn/baselines/naive/kernel.cu" & pids+=($!)
g++ -std=c++17 -O2 -shared -fPIC "${inc[@]}" -o "$out/idx_cpu.so" "$idx/reference_cpu/kernel.cc" & pids+=($!)
g++ -std=c++17 -O2 -shared -fPIC "${inc[@]}" -o "$out/attn_cpu.so" "$attn/reference_cpu/kernel.cc" & pids+=($!)
g++ -std=c++20 -O2 "${inc[@]}" -I /usr/local/cuda/include -o "$out/dsa_crosscheck" bench/contest/dsa_crosscheck.cc \
  src/contest/dsa_topk_indexer_gen.cc src/contest/dsa_sparse_attention_gen.cc src/contest/topk_indices_check.cc \
  src/contest/generators.cc src/contest/gdn_gen.cc src/contest/moe_gen.cc src/tensor/tensor.cc src/tensor/dtype.cc \
  src/tensor/safetensors.cc src/util/fs.cc src/util/sha256.cc -L /usr/local/cuda/lib64 -lcudart -ldl -lcrypto & pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done
"$out/dsa_crosscheck" "$out" "$which"
