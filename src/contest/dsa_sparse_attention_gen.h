// Structured inputs of dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64 (spec contest-kernels.md §1.3, §3.2).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "tensor/tensor.h"
#include "util/status.h"

namespace kda::contest {

inline constexpr int64_t kAttentionPageSize = 64;
inline constexpr int64_t kAttentionTopk = 2048;
inline constexpr int64_t kAttentionMaxContext = 32768;

// Generator "dsa_sparse_attention". Axes: num_tokens (T), num_pages (P). Every value fresh per trial (the trial
// seed mixed with the workload seed, generators.h; the contest captured its sparse_indices, kda draws them like the
// captures so that no public value decides them): each token is its own request (decode) with context length
// L_t uniform in [min(2048, C), C], C = min(32768, 64*P), and its own block table of ceil(L_t/64) distinct pages
// from [0, P); tokens share no pages when they fit (T*512 <= P; the contest's 8462 pages fit T <= 16), else pages
// are distinct within a token only. Cross-token overlap is therefore none in every draw (pack README, roofline).
// sparse_indices [T, 2048] int32: min(2048, L_t) distinct positions of [0, L_t) in scattered order (a partial
// shuffle, as the order of a top-k of random scores), each mapped to page*64+slot, then -1 padding at the tail.
// Errors: bad_input naming the axis when an axis is missing or < 1.
Status generate_dsa_sparse_attention(const std::map<std::string, int64_t>& axes, uint64_t workload_seed,
                                     uint64_t trial_seed, std::map<std::string, tensor::Tensor>& out);

}  // namespace kda::contest
