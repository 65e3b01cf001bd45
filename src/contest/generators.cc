#include "contest/generators.h"

#include <algorithm>
#include <utility>

#include "contest/dsa_sparse_attention_gen.h"
#include "contest/dsa_topk_indexer_gen.h"
#include "contest/gdn_gen.h"
#include "contest/moe_gen.h"
#include "util/sha256.h"

namespace kda::contest {
namespace {

// One line per generator.
const std::vector<std::pair<std::string, Generator>>& registry() {
  static const std::vector<std::pair<std::string, Generator>> kRegistry = {
      {"dsa_topk_indexer", &generate_dsa_topk_indexer},
      {"dsa_sparse_attention", &generate_dsa_sparse_attention},
      {"gdn_decode", &generate_gdn_decode},
      {"gdn_prefill", &generate_gdn_prefill},
      {"moe_ds_routing", &generate_moe_ds_routing},
  };
  return kRegistry;
}

}  // namespace

const Generator* find_generator(std::string_view name) {
  for (const auto& [n, g] : registry())
    if (n == name) return &g;
  return nullptr;
}

std::vector<std::string> generator_names() {
  std::vector<std::string> names;
  for (const auto& entry : registry()) names.push_back(entry.first);
  std::sort(names.begin(), names.end());
  return names;
}

uint64_t workload_seed_from_uuid(std::string_view uuid) {
  Sha256 h;
  h.update("kda-contest-workload:");
  h.update(uuid);
  const auto d = h.digest();
  uint64_t seed = 0;
  for (int i = 0; i < 8; ++i) seed = (seed << 8) | d[i];
  return seed;
}

}  // namespace kda::contest
