#include "eval/screen_cache.h"

namespace kda::eval::detail {

ScreenCache::Outputs ScreenCache::reference(const std::string& uuid, uint64_t seed) {
  auto it = references_.find({uuid, seed});
  if (it == references_.end()) return nullptr;
  ++stats_.reference_reused;
  return it->second;
}

void ScreenCache::computed_reference(const std::string& uuid, uint64_t seed, const Outputs& outputs) {
  ++stats_.reference_calls;
  if (reserve(*outputs)) references_.emplace(std::make_pair(uuid, seed), outputs);
}

std::optional<MaterializedInputs> ScreenCache::set(const std::string& uuid, uint64_t seed, SetKind kind,
                                                   uint64_t* next_id) {
  auto it = sets_.find({uuid, seed, static_cast<int>(kind)});
  if (it == sets_.end()) return std::nullopt;
  ++stats_.input_sets_reused;
  MaterializedInputs copy = *it->second;
  copy.id = ++*next_id;
  return copy;
}

void ScreenCache::keep_set(const std::string& uuid, const MaterializedInputs& in, SetKind kind) {
  if (!reserve(in.tensors)) return;
  sets_.emplace(std::make_tuple(uuid, in.seed, static_cast<int>(kind)), std::make_shared<const MaterializedInputs>(in));
}

std::optional<std::string> ScreenCache::probe_what(const std::string& uuid, uint64_t seed) const {
  auto it = probe_what_.find({uuid, seed});
  if (it == probe_what_.end()) return std::nullopt;
  return it->second;
}

void ScreenCache::set_probe_what(const std::string& uuid, uint64_t seed, std::string what) {
  probe_what_[{uuid, seed}] = std::move(what);
}

bool ScreenCache::verified(const std::string& library, const std::string& uuid, uint64_t seed, Check check) const {
  return verified_.contains({library, uuid, seed, static_cast<int>(check)});
}

void ScreenCache::mark_verified(const std::string& library, const std::string& uuid, uint64_t seed, Check check) {
  verified_.insert({library, uuid, seed, static_cast<int>(check)});
}

bool ScreenCache::reserve(const std::vector<tensor::Tensor>& tensors) {
  uint64_t bytes = 0;
  for (const auto& t : tensors) bytes += static_cast<uint64_t>(t.nbytes());
  if (bytes_ + bytes > budget_) return false;
  bytes_ += bytes;
  return true;
}

}  // namespace kda::eval::detail
