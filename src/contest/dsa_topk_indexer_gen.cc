#include "contest/dsa_topk_indexer_gen.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "contest/seeded_rng.h"
#include "tensor/float_convert.h"

namespace kda::contest {
namespace {

constexpr uint64_t kTableStream = 1;
constexpr uint64_t kCacheStream = 2;
constexpr int64_t kPagesPerPart = 64;

Result<int64_t> axis(const std::map<std::string, int64_t>& axes, const std::string& name, int64_t min_value) {
  auto it = axes.find(name);
  if (it == axes.end()) return Status::bad_input("dsa_topk_indexer generator: axis '" + name + "' is missing");
  if (it->second < min_value)
    return Status::bad_input("dsa_topk_indexer generator: axis '" + name + "' = " + std::to_string(it->second) +
                             " is below " + std::to_string(min_value));
  return it->second;
}

}  // namespace

float pack_indexer_token(const float* keys, int64_t slot, uint8_t* page) {
  float amax = 0.0f;
  for (int64_t d = 0; d < kIndexerHeadDim; ++d) amax = std::max(amax, std::fabs(keys[d]));
  const float scale = std::max(amax, 1e-4f) / 448.0f;
  for (int64_t d = 0; d < kIndexerHeadDim; ++d)
    page[kIndexerHeadDim * slot + d] = tensor::float_to_float8_e4m3fn(keys[d] / scale);
  std::memcpy(page + kIndexerScaleOffset + 4 * slot, &scale, sizeof scale);  // little-endian hosts
  return scale;
}

Status generate_dsa_topk_indexer(const std::map<std::string, int64_t>& axes, uint64_t workload_seed,
                                 uint64_t trial_seed, std::map<std::string, tensor::Tensor>& out) {
  KDA_ASSIGN_OR_RETURN(const int64_t batch, axis(axes, "batch_size", 1));
  KDA_ASSIGN_OR_RETURN(const int64_t max_pages, axis(axes, "max_num_pages", 1));
  KDA_ASSIGN_OR_RETURN(const int64_t num_pages, axis(axes, "num_pages", max_pages));
  if (max_pages * kIndexerPageSize > (int64_t{1} << 30) || num_pages > (int64_t{1} << 24))
    return Status::bad_input("dsa_topk_indexer generator: max_num_pages or num_pages too large");

  // Every value is fresh per trial: lengths, tables and the cache; only the shapes are the workload's (a workload
  // that pins seq_lens and block_table does so with a blob, which takes precedence over these).
  const uint64_t seed = SeededRng::combine(workload_seed, trial_seed);
  SeededRng table_rng(seed, kTableStream);
  tensor::Tensor seq_lens(tensor::DType::kInt32, {batch});
  tensor::Tensor table(tensor::DType::kInt32, {batch, max_pages});
  int32_t* lens = seq_lens.data_as<int32_t>();
  int32_t* slots = table.data_as<int32_t>();
  const int64_t full_row = static_cast<int64_t>(table_rng.below(static_cast<uint64_t>(batch)));
  for (int64_t b = 0; b < batch; ++b)
    lens[b] = static_cast<int32_t>(
        b == full_row ? table_rng.between(kIndexerPageSize * (max_pages - 1) + 1, kIndexerPageSize * max_pages)
                      : table_rng.between(1, kIndexerPageSize * max_pages));
  const bool disjoint = batch * max_pages <= num_pages;
  std::vector<int32_t> pool(static_cast<size_t>(num_pages));
  for (int64_t p = 0; p < num_pages; ++p) pool[p] = static_cast<int32_t>(p);
  int64_t next = 0;  // partial Fisher-Yates: pool[0, next) are drawn
  for (int64_t b = 0; b < batch; ++b) {
    if (!disjoint) next = 0;  // distinct within the row only
    const int64_t used = (lens[b] + kIndexerPageSize - 1) / kIndexerPageSize;
    for (int64_t s = 0; s < max_pages; ++s) {
      if (s >= used) {
        slots[b * max_pages + s] = 0;
        continue;
      }
      const int64_t pick = next + static_cast<int64_t>(table_rng.below(static_cast<uint64_t>(num_pages - next)));
      std::swap(pool[next], pool[pick]);
      slots[b * max_pages + s] = pool[next++];
    }
  }

  // The packed K cache, in parts of kPagesPerPart pages (several threads; part p draws from its own stream).
  std::vector<uint8_t> referenced(static_cast<size_t>(num_pages), 0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s * kIndexerPageSize < lens[b]; ++s) referenced[slots[b * max_pages + s]] = 1;
  tensor::Tensor cache(tensor::DType::kInt8, {num_pages, kIndexerPageSize, 1, 132}, tensor::kUninitialized);
  uint8_t* bytes = reinterpret_cast<uint8_t*>(cache.data());
  for_each_part((num_pages + kPagesPerPart - 1) / kPagesPerPart, 2, [&](int64_t part) {
    SeededRng cache_rng(seed, kCacheStream, static_cast<uint64_t>(part));
    float keys[kIndexerHeadDim];
    const float filler_scale = 1.0f / 448.0f;
    for (int64_t p = part * kPagesPerPart; p < std::min(num_pages, (part + 1) * kPagesPerPart); ++p) {
      uint8_t* page = bytes + p * kIndexerPageBytes;
      if (referenced[p]) {
        for (int64_t s = 0; s < kIndexerPageSize; ++s) {
          for (int64_t d = 0; d < kIndexerHeadDim; ++d)
            keys[d] = tensor::bfloat16_to_float(tensor::double_to_bfloat16(cache_rng.normal()));
          pack_indexer_token(keys, s, page);
        }
      } else {
        for (int64_t i = 0; i < kIndexerScaleOffset; i += 8) {
          uint64_t r = cache_rng.next_u64();
          for (int k = 0; k < 8; ++k, r >>= 8) page[i + k] = (r & 0x7F) == 0x7F ? 0 : static_cast<uint8_t>(r);
        }
        for (int64_t s = 0; s < kIndexerPageSize; ++s)
          std::memcpy(page + kIndexerScaleOffset + 4 * s, &filler_scale, sizeof filler_scale);
      }
    }
  });

  out.insert_or_assign("seq_lens", std::move(seq_lens));
  out.insert_or_assign("block_table", std::move(table));
  out.insert_or_assign("k_index_cache_fp8", std::move(cache));
  return Status::ok_status();
}

}  // namespace kda::contest
