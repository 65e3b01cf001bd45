// Structured inputs of moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048 (spec contest-kernels.md
// §1.3, §1.4, §3.5), and the DeepSeek-V3 routing used to record what a workload's routing implies.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "util/status.h"

namespace kda::contest {

// Bump when the values a (workload seed, trial seed, axes) triple produces change.
// 2: every value fresh per trial; logits drawn in independent parts of 256 tokens (several threads).
inline constexpr int kMoeGeneratorVersion = 2;
inline constexpr int64_t kMoeExperts = 256;
inline constexpr int64_t kMoeLocalExperts = 32;
inline constexpr int kMoeTopK = 8;
inline constexpr int kMoeGroups = 8;
inline constexpr int kMoeTopKGroups = 4;

// Generator "moe_ds_routing". Axis seq_len (T >= 1). Every value fresh per trial (the trial seed mixed with the
// workload seed, generators.h); the contest captured its routing inputs, kda draws them like the captures so that
// no public value decides a trial's routing. Hidden states, weights and scales stay generic random (new every
// trial, as in the contest); local_expert_offset and routed_scaling_factor are the workload's scalars.
//   routing_logits [T,256] f32: N(0, sigma^2) with sigma uniform in [1, 2] per draw, so each token has its
//                  own spread of expert scores (§1.4: without it every token picks the same experts);
//   routing_bias   [256] bf16: uniform in [-0.02, 0.02]. Small on purpose: the chosen experts sit in sigmoid's
//                  saturated tail (logits ~ +2 sigma), where scores differ by ~0.01, so even a +-0.1 bias decides
//                  the choice by itself (measured: at sigma = 2 a +-0.1 bias left 71 of 256 experts unused over
//                  1500 tokens; +-0.02 keeps every expert loaded and the max load ~2x the median).
// Errors: bad_input naming the axis when it is missing or < 1.
Status generate_moe_ds_routing(const std::map<std::string, int64_t>& axes, uint64_t workload_seed, uint64_t trial_seed,
                               std::map<std::string, tensor::Tensor>& out);

// DeepSeek-V3 no-aux routing of T tokens over E experts in fp32, exactly as the pack's references compute it
// (sigmoid; + bias; group score = sum of the group's top-2; best 4 of 8 groups; top 8 experts; ties to the lower
// index; weight = s / (sum of the chosen s + 1e-20) * scaling with the unbiased s). ids and weights: [T * 8].
void moe_route(const float* logits, const float* bias, int64_t tokens, int experts, float scaling, int* ids,
               float* weights);

// What one workload's routing means for the local shard [offset, offset + 32).
struct MoeLocalLoad {
  int64_t pairs = 0;                 // (token, local expert) pairs: the GEMM rows
  int64_t experts_touched = 0;       // distinct local experts with >= 1 token: weight bytes streamed
  int64_t tokens_without_local = 0;  // tokens whose output is all zero
};
MoeLocalLoad moe_local_load(const std::vector<int>& ids, int64_t offset);

// The roofline floor's count of touched local experts for seq_len T (task.toml [roofline]):
// min(ceil_div(max(T - 20, 0), 6), 16) + min(ceil_div(max(T - 240, 0), 20), 8), at most 24. The routing is fresh per
// trial, so this bounds a distribution, not one workload's fixed routing. Measured (20,000 seeds x 8 offsets per T
// for 45 values of T in 8..256; 2,000-4,000 seeds for T = 144..513, 1,000 for 1024): every draw touched
// more than this except where it is 0, by >= 1 expert up to T = 31 and >= 2 beyond (the closest: T = 111, 18 vs
// 16, once; typical margins 5-8). The tail is heavy (the shared bias and sigma move whole groups), which is why the
// old per-workload floor min(ceil_div(max(T - 7, 0), 3), 24) failed in 0.1-1% of draws (T = 80: 1.1%). moe_test
// checks it over sample trial seeds for a grid of T and for every pack workload.
int64_t moe_floor_experts(int64_t seq_len);

}  // namespace kda::contest
