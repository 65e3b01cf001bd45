#include "contest/dsa_sparse_attention_gen.h"

#include <algorithm>
#include <vector>

#include "contest/seeded_rng.h"

namespace kda::contest {
namespace {

constexpr uint64_t kIndicesStream = 3;

Result<int64_t> axis(const std::map<std::string, int64_t>& axes, const std::string& name) {
  auto it = axes.find(name);
  if (it == axes.end()) return Status::bad_input("dsa_sparse_attention generator: axis '" + name + "' is missing");
  if (it->second < 1)
    return Status::bad_input("dsa_sparse_attention generator: axis '" + name + "' = " + std::to_string(it->second) +
                             " is below 1");
  return it->second;
}

}  // namespace

Status generate_dsa_sparse_attention(const std::map<std::string, int64_t>& axes, uint64_t workload_seed,
                                     uint64_t trial_seed, std::map<std::string, tensor::Tensor>& out) {
  KDA_ASSIGN_OR_RETURN(const int64_t tokens, axis(axes, "num_tokens"));
  KDA_ASSIGN_OR_RETURN(const int64_t num_pages, axis(axes, "num_pages"));
  if (num_pages > (int64_t{1} << 24)) return Status::bad_input("dsa_sparse_attention generator: num_pages too large");

  // Contexts, block tables and index sets are all fresh per trial; only the shapes are the workload's.
  SeededRng rng(SeededRng::combine(workload_seed, trial_seed), kIndicesStream);
  const int64_t max_context = std::min(kAttentionMaxContext, kAttentionPageSize * num_pages);
  const int64_t min_context = std::min(kAttentionTopk, max_context);
  const int64_t max_pages_per_token = (kAttentionMaxContext + kAttentionPageSize - 1) / kAttentionPageSize;
  const bool disjoint = tokens * max_pages_per_token <= num_pages;

  tensor::Tensor indices(tensor::DType::kInt32, {tokens, kAttentionTopk});
  int32_t* idx = indices.data_as<int32_t>();
  std::vector<int32_t> pool(static_cast<size_t>(num_pages));
  for (int64_t p = 0; p < num_pages; ++p) pool[p] = static_cast<int32_t>(p);
  int64_t next = 0;
  std::vector<int32_t> pages, positions;
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t context = rng.between(min_context, max_context);
    const int64_t used = (context + kAttentionPageSize - 1) / kAttentionPageSize;
    if (!disjoint) next = 0;
    pages.clear();
    for (int64_t s = 0; s < used; ++s) {
      const int64_t pick = next + static_cast<int64_t>(rng.below(static_cast<uint64_t>(num_pages - next)));
      std::swap(pool[next], pool[pick]);
      pages.push_back(pool[next++]);
    }
    const int64_t k = std::min(kAttentionTopk, context);
    positions.resize(static_cast<size_t>(context));
    for (int64_t j = 0; j < context; ++j) positions[j] = static_cast<int32_t>(j);
    int32_t* row = idx + t * kAttentionTopk;
    for (int64_t i = 0; i < kAttentionTopk; ++i) {
      if (i >= k) {
        row[i] = -1;
        continue;
      }
      const int64_t pick = i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(context - i)));
      std::swap(positions[i], positions[pick]);
      const int32_t j = positions[i];
      row[i] = pages[j / kAttentionPageSize] * static_cast<int32_t>(kAttentionPageSize) + j % kAttentionPageSize;
    }
  }
  out.insert_or_assign("sparse_indices", std::move(indices));
  return Status::ok_status();
}

}  // namespace kda::contest
