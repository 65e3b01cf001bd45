#include "contest/moe_gen.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "contest/seeded_rng.h"
#include "tensor/float_convert.h"

namespace kda::contest {
namespace {

// Streams of one (workload, trial) seed. The logits are drawn in parts of kMoeTokensPerPart tokens (several threads);
// sigma comes from its own stream.
constexpr uint64_t kStreamLogits = 201, kStreamBias = 202, kStreamSigma = 203;
constexpr int64_t kMoeTokensPerPart = 256;

}  // namespace

Status generate_moe_ds_routing(const std::map<std::string, int64_t>& axes, uint64_t workload_seed, uint64_t trial_seed,
                               std::map<std::string, tensor::Tensor>& out) {
  auto it = axes.find("seq_len");
  if (it == axes.end()) return Status::bad_input("moe_ds_routing generator: axis 'seq_len' is missing");
  const int64_t T = it->second;
  if (T < 1)
    return Status::bad_input("moe_ds_routing generator: axis 'seq_len' = " + std::to_string(T) + " is below 1");
  if (T > (int64_t{1} << 22)) return Status::bad_input("moe_ds_routing generator: axis 'seq_len' too large");

  // Every value is fresh per trial (sigma included); only seq_len is the workload's.
  const uint64_t seed = SeededRng::combine(workload_seed, trial_seed);
  SeededRng rs(seed, kStreamSigma), rb(seed, kStreamBias);
  const double sigma = 1.0 + (1.0 - rs.unit_open0());  // [1, 2)
  tensor::Tensor logits(tensor::DType::kFloat32, {T, kMoeExperts}, tensor::kUninitialized);
  float* lp = logits.data_as<float>();
  for_each_part((T + kMoeTokensPerPart - 1) / kMoeTokensPerPart, 2, [&](int64_t part) {
    SeededRng rl(seed, kStreamLogits, static_cast<uint64_t>(part));
    const int64_t end = std::min(T, (part + 1) * kMoeTokensPerPart) * kMoeExperts;
    for (int64_t i = part * kMoeTokensPerPart * kMoeExperts; i < end; ++i)
      lp[i] = static_cast<float>(sigma * rl.normal());
  });
  tensor::Tensor bias(tensor::DType::kBFloat16, {kMoeExperts});
  uint16_t* bp = bias.data_as<uint16_t>();
  for (int64_t e = 0; e < kMoeExperts; ++e) bp[e] = tensor::double_to_bfloat16(-0.02 + 0.04 * (1.0 - rb.unit_open0()));

  out.insert_or_assign("routing_logits", std::move(logits));
  out.insert_or_assign("routing_bias", std::move(bias));
  return Status::ok_status();
}

void moe_route(const float* logits, const float* bias, int64_t tokens, int experts, float scaling, int* ids,
               float* weights) {
  const int gs = experts / kMoeGroups;
  std::vector<float> s(static_cast<size_t>(experts)), sb(static_cast<size_t>(experts));
  std::vector<char> taken(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* l = logits + t * experts;
    for (int e = 0; e < experts; ++e) {
      s[e] = 1.0f / (1.0f + std::exp(-l[e]));
      sb[e] = s[e] + bias[e];
    }
    float gscore[kMoeGroups];
    for (int gi = 0; gi < kMoeGroups; ++gi) {
      int best = -1, second = -1;
      for (int j = gi * gs; j < (gi + 1) * gs; ++j) {
        if (best < 0 || sb[j] > sb[best]) {
          second = best;
          best = j;
        } else if (second < 0 || sb[j] > sb[second]) {
          second = j;
        }
      }
      gscore[gi] = sb[best] + (second >= 0 ? sb[second] : 0.0f);
    }
    bool keep[kMoeGroups] = {};
    for (int n = 0; n < kMoeTopKGroups; ++n) {
      int best = -1;
      for (int gi = 0; gi < kMoeGroups; ++gi)
        if (!keep[gi] && (best < 0 || gscore[gi] > gscore[best])) best = gi;
      keep[best] = true;
    }
    std::fill(taken.begin(), taken.end(), 0);
    float sum = 0.0f;
    for (int n = 0; n < kMoeTopK; ++n) {
      int best = -1;
      for (int e = 0; e < experts; ++e)
        if (keep[e / gs] && !taken[e] && (best < 0 || sb[e] > sb[best])) best = e;
      taken[best] = 1;
      ids[t * kMoeTopK + n] = best;
      sum += s[best];
    }
    for (int n = 0; n < kMoeTopK; ++n) weights[t * kMoeTopK + n] = s[ids[t * kMoeTopK + n]] / (sum + 1e-20f) * scaling;
  }
}

MoeLocalLoad moe_local_load(const std::vector<int>& ids, int64_t offset) {
  MoeLocalLoad load;
  std::vector<bool> touched(kMoeLocalExperts, false);
  const int64_t tokens = static_cast<int64_t>(ids.size()) / kMoeTopK;
  for (int64_t t = 0; t < tokens; ++t) {
    bool any = false;
    for (int n = 0; n < kMoeTopK; ++n) {
      const int64_t le = ids[t * kMoeTopK + n] - offset;
      if (le < 0 || le >= kMoeLocalExperts) continue;
      ++load.pairs;
      touched[le] = true;
      any = true;
    }
    if (!any) ++load.tokens_without_local;
  }
  load.experts_touched = std::count(touched.begin(), touched.end(), true);
  return load;
}

int64_t moe_floor_experts(int64_t seq_len) {
  const int64_t rise = (std::max<int64_t>(seq_len - 20, 0) + 5) / 6;
  const int64_t late = (std::max<int64_t>(seq_len - 240, 0) + 19) / 20;
  return std::min<int64_t>(rise, 16) + std::min<int64_t>(late, 8);
}

}  // namespace kda::contest
