#include "tensor/generate.h"

#include <algorithm>
#include <cstring>
#include <system_error>
#include <thread>

#include "tensor/random_values.h"

// Built with -ffp-contract=off (see CMakeLists.txt): the FMA-target copy below must not fuse anything that the
// portable copy computes with separate roundings.

namespace kda::tensor {

namespace {

constexpr int64_t kMinElementsPerThread = 1 << 16;

// Writes elements [4*block_begin, min(4*block_end, numel)) of a tensor of dtype D. Inlined into both dispatch
// targets below, with D a constant so that the per-element dtype switch folds away.
template <DType D>
__attribute__((always_inline)) inline void fill_blocks_typed(std::byte* data, int64_t numel, uint64_t seed,
                                                             uint64_t stream, int64_t block_begin, int64_t block_end) {
  constexpr int kBits = random_storage_bits(D);
  for (int64_t b = block_begin; b < block_end; ++b) {
    const Philox4x32 w = philox_block(seed, stream, static_cast<uint64_t>(b));
    float z[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if constexpr (static_cast<uint8_t>(D) <= static_cast<uint8_t>(DType::kFloat4E2M1)) {
      rmath::box_muller(w.v[0], w.v[1], z[0], z[1]);
      rmath::box_muller(w.v[2], w.v[3], z[2], z[3]);
    }
    const int64_t first = 4 * b;
    const int lanes = static_cast<int>(std::min<int64_t>(4, numel - first));
    if constexpr (kBits == 4) {
      // Block b covers bytes 2b and 2b+1 (low nibble first); a short tail leaves the unused nibble zero.
      uint8_t nib[4] = {0, 0, 0, 0};
      for (int l = 0; l < lanes; ++l) nib[l] = static_cast<uint8_t>(random_bits_from(D, w, z, l));
      data[2 * b] = static_cast<std::byte>(nib[0] | (nib[1] << 4));
      if (lanes > 2) data[2 * b + 1] = static_cast<std::byte>(nib[2] | (nib[3] << 4));
    } else {
      using T = typename StorageUInt<kBits / 8>::type;
      for (int l = 0; l < lanes; ++l) {
        const auto v = static_cast<T>(random_bits_from(D, w, z, l));
        std::memcpy(data + (first + l) * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
      }
    }
  }
}

__attribute__((always_inline)) inline void fill_blocks(DType dtype, std::byte* data, int64_t numel, uint64_t seed,
                                                       uint64_t stream, int64_t block_begin, int64_t block_end) {
  switch (dtype) {
#define KDA_FILL_CASE(D) \
  case D: fill_blocks_typed<D>(data, numel, seed, stream, block_begin, block_end); return;
    KDA_FILL_CASE(DType::kFloat32)
    KDA_FILL_CASE(DType::kFloat16)
    KDA_FILL_CASE(DType::kBFloat16)
    KDA_FILL_CASE(DType::kFloat8E4M3FN)
    KDA_FILL_CASE(DType::kFloat8E5M2)
    KDA_FILL_CASE(DType::kFloat4E2M1)
    KDA_FILL_CASE(DType::kInt64)
    KDA_FILL_CASE(DType::kInt32)
    KDA_FILL_CASE(DType::kInt16)
    KDA_FILL_CASE(DType::kInt8)
    KDA_FILL_CASE(DType::kUInt8)
    KDA_FILL_CASE(DType::kBool)
#undef KDA_FILL_CASE
  }
}

__attribute__((target("fma"))) void fill_blocks_fma(DType dtype, std::byte* data, int64_t numel, uint64_t seed,
                                                    uint64_t stream, int64_t block_begin, int64_t block_end) {
  fill_blocks(dtype, data, numel, seed, stream, block_begin, block_end);
}

void fill_blocks_portable(DType dtype, std::byte* data, int64_t numel, uint64_t seed, uint64_t stream,
                          int64_t block_begin, int64_t block_end) {
  fill_blocks(dtype, data, numel, seed, stream, block_begin, block_end);
}

}  // namespace

bool host_has_fma() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

void fill_random(Tensor& t, uint64_t seed, uint64_t stream, const FillOptions& options) {
  const int64_t numel = t.numel();
  if (numel == 0) return;
  const int64_t blocks = (numel + 3) / 4;
  auto* fill = (options.use_fma_unit && host_has_fma()) ? &fill_blocks_fma : &fill_blocks_portable;

  const int64_t wanted = options.threads > 0
                             ? options.threads
                             : std::min<int64_t>(std::thread::hardware_concurrency(), numel / kMinElementsPerThread);
  const int64_t threads = std::clamp<int64_t>(wanted, 1, std::min<int64_t>(blocks, 256));
  // Each thread owns whole blocks, and a block owns whole bytes (even for float4), so no two threads share a byte.
  const int64_t per = (blocks + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (int64_t begin = per; begin < blocks; begin += per) {
    const int64_t end = std::min(blocks, begin + per);
    try {
      pool.emplace_back(fill, t.dtype(), t.data(), numel, seed, stream, begin, end);
    } catch (const std::system_error&) {  // no thread to be had: do the chunk here
      fill(t.dtype(), t.data(), numel, seed, stream, begin, end);
    }
  }
  fill(t.dtype(), t.data(), numel, seed, stream, 0, std::min(blocks, per));
  for (auto& th : pool) th.join();
}

void fill_random(Tensor& t, uint64_t seed, uint64_t stream) { fill_random(t, seed, stream, FillOptions{}); }

Tensor generate_random(DType dtype, std::vector<int64_t> shape, uint64_t seed, uint64_t stream) {
  Tensor t(dtype, std::move(shape));
  fill_random(t, seed, stream);
  return t;
}

}  // namespace kda::tensor
