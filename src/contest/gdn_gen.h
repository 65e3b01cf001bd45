// Structured inputs of gdn_decode_qk4_v8_d128_k_last and gdn_prefill_qk4_v8_d128_k_last (spec
// contest-kernels.md §1.3, §1.4, §3.3, §3.4). Every value is drawn fresh from the trial seed (mixed with the
// workload seed, generators.h): q/k/v, gates, A_log/dt_bias, warmed states and prefill's cu_seqlens. What a
// workload fixes is its shapes (batch_size; total_seq_len, num_seqs) and the structure below, which every draw
// has: unit-norm q/k, decays mostly in [0.5, 0.999], one long sequence plus short ones in batches of up to four
// sequences and log-normal lengths in larger ones, empty sequences exactly when total_seq_len < num_seqs. The
// contest captured these tensors from real runs; public captured values would let a candidate precompute its
// answers, so kda draws them like the captures instead.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "contest/seeded_rng.h"
#include "tensor/tensor.h"
#include "util/status.h"

namespace kda::contest {

// Bump when the values a (workload seed, trial seed, axes) triple produces change (packs quote it in their README).
// 2: every value fresh per trial; q/k/v and states drawn in independent parts (several threads).
// 3: prefill batches of more than kGdnOneLongMaxSeqs sequences split by log-normal weights (the contest's T = 8192
//    batches of 20-57 sequences); smaller batches and every decode value as in 2.
inline constexpr int kGdnGeneratorVersion = 3;
inline constexpr int64_t kGdnQkHeads = 4;
inline constexpr int64_t kGdnVHeads = 8;
inline constexpr int64_t kGdnHeadSize = 128;
// Tokens of synthetic prefix run through the recurrence to warm a state (the spec suggests 64-4096; older tokens
// are mostly decayed; the warm-up is the generator's main cost: 1024 states for batch_size 128).
inline constexpr int64_t kGdnWarmupTokens = 48;
// Prefill batches of up to this many sequences have one long sequence; larger ones are many requests of spread
// lengths (gdn_split_sequences). The contest's batches of <= 4 sequences are single prompts or a few; those of
// >= 5 hold 144-605 tokens a sequence on average (its per-sequence lengths are not public: a reconstruction).
inline constexpr int64_t kGdnOneLongMaxSeqs = 4;
// The spread of a many-sequence batch's lengths: log-normal weights exp(sigma z), z ~ N(0,1).
inline constexpr double kGdnManySeqsSigma = 1.0;

// Generator "gdn_decode". Axis batch_size (B >= 1). Fills all eight tensors, every value fresh per trial:
//   q, k  [B,1,4,128] bf16: normal directions scaled to unit L2 norm per (token, head) (randn k would blow the
//         state up by (1 - beta |k|^2) per step: impossible workloads, §1.4);
//   v     [B,1,8,128] bf16 standard normal;   a, b [B,1,8] bf16 standard normal (beta = sigmoid(b));
//   A_log [8] f32 = ln U[1,16] (log-uniform);  dt_bias [8] f32 = softplus^-1(y), y log-uniform in [1e-3, 1e-1],
//         so g = exp(-exp(A_log) softplus(a + dt_bias)) lies in [0.5, 0.999] for ~90% of (token, head);
//   state [B,8,128,128] f32 k-last: zero, then kGdnWarmupTokens steps of the exact recurrence with unit k,
//         normal v and gates drawn as above.
// Errors: bad_input naming the axis when it is missing or < 1.
Status generate_gdn_decode(const std::map<std::string, int64_t>& axes, uint64_t workload_seed, uint64_t trial_seed,
                           std::map<std::string, tensor::Tensor>& out);

// Generator "gdn_prefill". Axes total_seq_len (T >= 1), num_seqs (N >= 1), len_cu_seqlens (= N + 1 when given).
// Same tensors as decode with token-major shapes ([T,4,128], [T,8,128], [T,8]), state [N,8,128,128] (each
// sequence's state warmed with probability 2/3, else zero), and cu_seqlens [N+1] int64 from
// gdn_split_sequences; all fresh per trial (which sequence is long, the lengths, which states are warm).
Status generate_gdn_prefill(const std::map<std::string, int64_t>& axes, uint64_t workload_seed, uint64_t trial_seed,
                            std::map<std::string, tensor::Tensor>& out);

// Sequence lengths of T tokens in N sequences, as cu_seqlens (N+1 values, cu[0] = 0, non-decreasing, cu[N] = T).
// T >= N: every sequence gets >= 1 token, and the T - N extra tokens are shared out:
//   N <= kGdnOneLongMaxSeqs: one sequence at a random position gets 50-90% of them, the others share the rest by
//     weights uniform in [0.05, 1] (one long sequence plus short ones);
//   N > kGdnOneLongMaxSeqs: every sequence by a log-normal weight (sigma kGdnManySeqsSigma), like a batch of
//     independent requests (the longest holds a median ~10-20% of the tokens at N = 20-57, ~44% at N = 5).
// T < N: N - T empty sequences at random positions (the edge case whose new_state must be 0), the others length 1.
std::vector<int64_t> gdn_split_sequences(int64_t total, int64_t num_seqs, SeededRng& rng);

// The gates of one (token, value head), as the definition computes them (double).
double gdn_decay(double a, double A_log, double dt_bias);  // g = exp(-exp(A_log) * softplus(a + dt_bias))
double gdn_beta(double b);                                 // 1 / (1 + exp(-b))

}  // namespace kda::contest
