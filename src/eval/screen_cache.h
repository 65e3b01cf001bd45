// eval::detail::ScreenCache: what a screening session (kda tune's Screener) keeps from one candidate
// to the next. The Screener owns it and lends it to its Session; an official evaluation has none.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "eval/evaluator.h"
#include "eval/inputs.h"
#include "tensor/tensor.h"

namespace kda::eval::detail {

// Reference outputs and input sets kept together up to this many bytes (then computed per candidate):
// the largest CUDA rmsnorm workload's sets take 64 MiB each.
constexpr uint64_t kScreenBytes = uint64_t{8} << 30;

// The master seed is fixed for a screening session, so every candidate meets the same secret input
// sets: the reference's outputs on them, the sets themselves (within one byte budget) and what each
// probe set's transforms were are made once; and the checks a built library passed on which inputs
// are remembered, so a later rung re-timing the same configuration does not repeat them.
class ScreenCache {
 public:
  using Outputs = std::shared_ptr<const std::vector<tensor::Tensor>>;
  enum class SetKind : int { kRaw = 0, kProbe = 1 };
  enum class Check : int { kCorrectness = 0, kDeterminism = 1, kProbe = 2, kStress = 3 };

  explicit ScreenCache(uint64_t byte_budget = kScreenBytes) : budget_(byte_budget) {}

  // What the next candidate is checked on (Screener::evaluate sets it per candidate).
  ScreenChecks checks = ScreenChecks::kAll;
  // The first look at a configuration: correctness only.
  bool first_look() const { return checks == ScreenChecks::kCorrectness; }

  // The reference's outputs on (workload, inputs seed) when kept (counted as reused), else null.
  Outputs reference(const std::string& uuid, uint64_t seed);
  // A computed reference call: counted, and its outputs kept while the budget allows.
  void computed_reference(const std::string& uuid, uint64_t seed, const Outputs& outputs);

  // A copy of the kept set with a new id from *next_id (to the runners, a set like any other).
  std::optional<MaterializedInputs> set(const std::string& uuid, uint64_t seed, SetKind kind, uint64_t* next_id);
  void keep_set(const std::string& uuid, const MaterializedInputs& in, SetKind kind);

  // A probe set's transforms: nullopt when the set was never made here; "" when no probed input applied.
  std::optional<std::string> probe_what(const std::string& uuid, uint64_t seed) const;
  void set_probe_what(const std::string& uuid, uint64_t seed, std::string what);

  bool verified(const std::string& library, const std::string& uuid, uint64_t seed, Check check) const;
  void mark_verified(const std::string& library, const std::string& uuid, uint64_t seed, Check check);

  ScreenStats& stats() { return stats_; }
  const ScreenStats& stats() const { return stats_; }

 private:
  // Takes the tensors' bytes from the budget; false (nothing taken) when they do not fit.
  bool reserve(const std::vector<tensor::Tensor>& tensors);

  uint64_t budget_;
  uint64_t bytes_ = 0;  // held by the references and the sets together
  std::map<std::pair<std::string, uint64_t>, Outputs> references_;
  std::map<std::tuple<std::string, uint64_t, int>, std::shared_ptr<const MaterializedInputs>> sets_;
  std::map<std::pair<std::string, uint64_t>, std::string> probe_what_;
  std::set<std::tuple<std::string, std::string, uint64_t, int>> verified_;
  ScreenStats stats_;
};

}  // namespace kda::eval::detail
