// Structured inputs of dsa_topk_indexer_fp8_h64_d128_topk2048_ps64 (spec contest-kernels.md §1.3, §2.3, §3.1).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "tensor/tensor.h"
#include "util/status.h"

namespace kda::contest {

inline constexpr int64_t kIndexerHeads = 64;
inline constexpr int64_t kIndexerHeadDim = 128;
inline constexpr int64_t kIndexerPageSize = 64;
inline constexpr int64_t kIndexerTopk = 2048;
inline constexpr int64_t kIndexerPageBytes = 8448;    // 64 x 128 fp8 values, then 64 fp32 scales
inline constexpr int64_t kIndexerScaleOffset = 8192;  // byte offset of the scales within a page

// Generator "dsa_topk_indexer". Axes: batch_size (B), max_num_pages (M), num_pages (P). Every value fresh per
// trial (the trial seed mixed with the workload seed, generators.h); the structure holds in every draw:
//   seq_lens [B] int32: L_b uniform in [1, 64*M], except one random row with L in (64*(M-1), 64*M] that needs
//     every table slot;
//   block_table [B, M] int32: the first ceil(L_b/64) slots hold distinct page ids from [0, P), shuffled; rows
//     share no pages when B*M <= P (else pages are distinct within a row only); trailing slots hold page 0
//     (valid, to be ignored by kernels).
// k_index_cache_fp8 [P, 64, 1, 132] int8 in the deep_gemm packing: for every page some row
//   references, keys x ~ bf16(N(0,1)) [64,128], per-token scale = max(amax|x|, 1e-4)/448 (fp32), bytes =
//   e4m3(x/scale) token-major, then the 64 scales as little-endian fp32. Pages no row references hold finite
//   filler (random non-NaN e4m3 codes, scale 1/448) so that generation stays fast for the 11923-page cache.
// Errors: bad_input naming the axis when an axis is missing or out of range (B, M >= 1; P >= M).
Status generate_dsa_topk_indexer(const std::map<std::string, int64_t>& axes, uint64_t workload_seed,
                                 uint64_t trial_seed, std::map<std::string, tensor::Tensor>& out);

// Packs one token's 128 fp32 key values into `page` (8448 bytes) at `slot` with the per-token scale rule above;
// returns the scale. Exposed for tests and for hand-made edge cases.
float pack_indexer_token(const float* keys, int64_t slot, uint8_t* page);

}  // namespace kda::contest
