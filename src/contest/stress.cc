#include "contest/stress.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "contest/gdn_gen.h"
#include "contest/moe_gen.h"
#include "contest/seeded_rng.h"
#include "tensor/float_convert.h"

namespace kda::contest {
namespace {

using tensor::DType;
using tensor::Tensor;

constexpr uint64_t kStreamStress = 201;

Result<Tensor*> need(std::map<std::string, Tensor>& inputs, const std::string& name, DType dtype) {
  auto it = inputs.find(name);
  if (it == inputs.end() || it->second.dtype() != dtype)
    return Status::internal("stress: the generator gave no " + std::string(tensor::dtype_name(dtype)) + " input '" +
                            name + "'");
  return &it->second;
}

double log_uniform(SeededRng& rng, double lo, double hi) {
  return std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * (1.0 - rng.unit_open0()));
}

// --- GDN (gdn_decode, gdn_prefill): g = exp(-exp(A_log) softplus(a + dt_bias)), beta = sigmoid(b).

// Slow decay: A_log = 0 and dt_bias = ln r, r log-uniform in [1e-5, 1e-3] per head, so that
// softplus(a + dt_bias) ~ r e^a and g = exp(-r e^a) lies in about [0.992, 0.999999] for the drawn a (a
// state remembers thousands of tokens; a half-precision decay rounds these to 1 or to 1 - 2^-11).
Status gdn_decay_near_one(const std::map<std::string, int64_t>&, uint64_t seed, std::map<std::string, Tensor>& in) {
  KDA_ASSIGN_OR_RETURN(Tensor * A_log, need(in, "A_log", DType::kFloat32));
  KDA_ASSIGN_OR_RETURN(Tensor * dt_bias, need(in, "dt_bias", DType::kFloat32));
  SeededRng rng(seed, kStreamStress);
  for (int64_t h = 0; h < A_log->numel(); ++h) {
    A_log->data_as<float>()[h] = 0.0f;
    dt_bias->data_as<float>()[h] = static_cast<float>(std::log(log_uniform(rng, 1e-5, 1e-3)));
  }
  return Status::ok_status();
}

// Fast decay: A_log = ln U[1, 2] and dt_bias = 4, so that softplus(a + 4) ~ 4 + a and the rate
// exp(A_log) softplus(.) lies in about [2, 12]: g in [6e-6, 0.14], a state loses ~400-1000 bits in 64
// tokens (a chunked form's cumulative decay underflows single precision; its ratios overflow).
Status gdn_decay_near_zero(const std::map<std::string, int64_t>&, uint64_t seed, std::map<std::string, Tensor>& in) {
  KDA_ASSIGN_OR_RETURN(Tensor * A_log, need(in, "A_log", DType::kFloat32));
  KDA_ASSIGN_OR_RETURN(Tensor * dt_bias, need(in, "dt_bias", DType::kFloat32));
  SeededRng rng(seed, kStreamStress);
  for (int64_t h = 0; h < A_log->numel(); ++h) {
    A_log->data_as<float>()[h] = static_cast<float>(std::log(1.0 + (1.0 - rng.unit_open0())));
    dt_bias->data_as<float>()[h] = 4.0f;
  }
  return Status::ok_status();
}

// Saturated beta: b = +-U[6, 10] (either sign, per token and head), so beta is within 0.25 % of 0 or 1
// (beta = 1 makes the update a projection: the key's old value is replaced outright).
Status gdn_beta_saturated(const std::map<std::string, int64_t>&, uint64_t seed, std::map<std::string, Tensor>& in) {
  KDA_ASSIGN_OR_RETURN(Tensor * b, need(in, "b", DType::kBFloat16));
  SeededRng rng(seed, kStreamStress);
  uint16_t* d = b->data_as<uint16_t>();
  for (int64_t i = 0; i < b->numel(); ++i) {
    const double mag = 6.0 + 4.0 * rng.unit_open0();
    d[i] = tensor::double_to_bfloat16(rng.below(2) == 0 ? mag : -mag);
  }
  return Status::ok_status();
}

// Near-parallel keys: every token's key of head h is the head's one direction plus noise of 1 % per
// component (renormalised), and one token in four repeats the direction exactly; q stays as drawn. The
// delta rule then rewrites one value slot over and over (k k^T nearly the same every step).
Status gdn_keys_parallel(const std::map<std::string, int64_t>&, uint64_t seed, std::map<std::string, Tensor>& in) {
  KDA_ASSIGN_OR_RETURN(Tensor * k, need(in, "k", DType::kBFloat16));
  if (k->ndim() < 2 || k->shape().back() != kGdnHeadSize)
    return Status::internal("stress keys_parallel: k is not [..., heads, 128]");
  const int64_t heads = k->shape()[k->ndim() - 2];
  const int64_t tokens = k->numel() / (heads * kGdnHeadSize);
  SeededRng rng(seed, kStreamStress);
  std::vector<double> base(static_cast<size_t>(heads * kGdnHeadSize)), row(kGdnHeadSize);
  for (int64_t h = 0; h < heads; ++h) {
    double n2 = 0;
    for (int64_t c = 0; c < kGdnHeadSize; ++c) n2 += std::pow(base[h * kGdnHeadSize + c] = rng.normal(), 2);
    for (int64_t c = 0; c < kGdnHeadSize; ++c) base[h * kGdnHeadSize + c] /= std::sqrt(n2);
  }
  uint16_t* d = k->data_as<uint16_t>();
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      const bool exact = rng.below(4) == 0;
      double n2 = 0;
      for (int64_t c = 0; c < kGdnHeadSize; ++c) {
        row[c] = base[h * kGdnHeadSize + c] + (exact ? 0.0 : 0.01 * rng.normal() / std::sqrt(double(kGdnHeadSize)));
        n2 += row[c] * row[c];
      }
      for (int64_t c = 0; c < kGdnHeadSize; ++c)
        d[(t * heads + h) * kGdnHeadSize + c] = tensor::double_to_bfloat16(row[c] / std::sqrt(n2));
    }
  return Status::ok_status();
}

// Rewrites cu_seqlens from sequence lengths (sum total_seq_len).
Status set_lengths(Tensor& cu, const std::vector<int64_t>& len) {
  if (cu.numel() != static_cast<int64_t>(len.size()) + 1)
    return Status::internal("stress: cu_seqlens has another size");
  int64_t* c = cu.data_as<int64_t>();
  c[0] = 0;
  for (size_t n = 0; n < len.size(); ++n) c[n + 1] = c[n] + len[n];
  return Status::ok_status();
}

// Chunk boundaries: sequence lengths of 64 m - 1, 64 m and 64 m + 1 (m >= 1) wherever the tokens allow,
// the last sequence taking what is left (the edges of a 64-token chunk: a partial last chunk, an exact
// one, one token over).
Status gdn_chunk_boundaries(const std::map<std::string, int64_t>& axes, uint64_t seed,
                            std::map<std::string, Tensor>& in) {
  KDA_ASSIGN_OR_RETURN(Tensor * cu, need(in, "cu_seqlens", DType::kInt64));
  const int64_t T = axes.at("total_seq_len"), N = cu->numel() - 1;
  if (T < N) return Status::ok_status();  // every sequence has at most one token: no chunk to cross
  SeededRng rng(seed, kStreamStress);
  std::vector<int64_t> len(static_cast<size_t>(N), 1);
  int64_t left = T;
  for (int64_t n = 0; n + 1 < N; ++n) {
    const int64_t room = left - (N - 1 - n);  // the most this one may take, the others keeping one token
    const int64_t fair_m = std::max<int64_t>(1, left / (N - n) / 64);  // room for the sequences after it
    const int64_t max_m = std::min<int64_t>({(room - 1) / 64, fair_m, 4});
    len[n] = max_m < 1 ? 1 : 64 * rng.between(1, max_m) + rng.between(-1, 1);
    len[n] = std::clamp<int64_t>(len[n], 1, room);
    left -= len[n];
  }
  len[N - 1] = left;
  return set_lengths(*cu, len);
}

// Empty sequences: a third of the sequences (at least one, never all) hold no token, their tokens given to
// the others; their input state stays as drawn (warm or zero) and their new state must be zero.
Status gdn_empty_sequences(const std::map<std::string, int64_t>&, uint64_t seed, std::map<std::string, Tensor>& in) {
  KDA_ASSIGN_OR_RETURN(Tensor * cu, need(in, "cu_seqlens", DType::kInt64));
  const int64_t N = cu->numel() - 1;
  if (N < 2) return Status::ok_status();
  SeededRng rng(seed, kStreamStress);
  std::vector<int64_t> len(static_cast<size_t>(N));
  const int64_t* c = cu->data_as<int64_t>();
  for (int64_t n = 0; n < N; ++n) len[n] = c[n + 1] - c[n];
  std::vector<int64_t> order(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) order[n] = n;
  const int64_t empty = std::max<int64_t>(1, N / 3);
  for (int64_t i = 0; i < empty; ++i)
    std::swap(order[i], order[i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(N - i)))]);
  int64_t freed = 0;
  for (int64_t i = 0; i < empty; ++i) freed += std::exchange(len[order[i]], 0);
  len[order[empty + static_cast<int64_t>(rng.below(static_cast<uint64_t>(N - empty)))]] += freed;
  return set_lengths(*cu, len);
}

// --- DSA top-k indexer (dsa_topk_indexer).

// Longest rows: every row at seq_len 64 * max_num_pages, its block table M distinct pages of [0, P) (pages
// no draw referenced hold the generator's finite filler): the most work a row can ask for, in every row.
Status dsa_longest_rows(const std::map<std::string, int64_t>& axes, uint64_t seed, std::map<std::string, Tensor>& in) {
  KDA_ASSIGN_OR_RETURN(Tensor * seq_lens, need(in, "seq_lens", DType::kInt32));
  KDA_ASSIGN_OR_RETURN(Tensor * table, need(in, "block_table", DType::kInt32));
  const int64_t B = table->shape()[0], M = table->shape()[1], P = axes.at("num_pages");
  SeededRng rng(seed, kStreamStress);
  std::vector<int32_t> pages(static_cast<size_t>(P));
  for (int64_t p = 0; p < P; ++p) pages[p] = static_cast<int32_t>(p);
  for (int64_t b = 0; b < B; ++b) {
    seq_lens->data_as<int32_t>()[b] = static_cast<int32_t>(64 * M);
    for (int64_t m = 0; m < M; ++m) {  // a partial shuffle: M distinct pages
      std::swap(pages[m], pages[m + static_cast<int64_t>(rng.below(static_cast<uint64_t>(P - m)))]);
      table->data_as<int32_t>()[b * M + m] = pages[m];
    }
  }
  return Status::ok_status();
}

// Tied pages: in every row, half of the other pages it references become byte copies of its first page
// (keys and scales), so the same slot of each scores exactly the same: a top-k full of ties.
Status dsa_tied_pages(const std::map<std::string, int64_t>&, uint64_t seed, std::map<std::string, Tensor>& in) {
  KDA_ASSIGN_OR_RETURN(Tensor * seq_lens, need(in, "seq_lens", DType::kInt32));
  KDA_ASSIGN_OR_RETURN(Tensor * table, need(in, "block_table", DType::kInt32));
  KDA_ASSIGN_OR_RETURN(Tensor * cache, need(in, "k_index_cache_fp8", DType::kInt8));
  const int64_t B = table->shape()[0], M = table->shape()[1], P = cache->shape()[0];
  const int64_t page_bytes = cache->nbytes() / P;
  SeededRng rng(seed, kStreamStress);
  std::byte* bytes = cache->data();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t used = std::min<int64_t>(M, (seq_lens->data_as<int32_t>()[b] + 63) / 64);
    const int32_t* row = table->data_as<int32_t>() + b * M;
    for (int64_t m = 1; m < used; ++m)
      if (rng.below(2) == 0 && row[m] != row[0])
        std::copy_n(bytes + row[0] * page_bytes, page_bytes, bytes + row[m] * page_bytes);
  }
  return Status::ok_status();
}

// --- DSA sparse attention (dsa_sparse_attention): -1 entries are ignored wherever they occur, duplicates count.

// The valid (non -1) entries of row t of sparse_indices.
std::vector<int32_t> valid_entries(const Tensor& idx, int64_t t) {
  const int64_t K = idx.shape()[1];
  std::vector<int32_t> v;
  for (int64_t j = 0; j < K; ++j)
    if (const int32_t x = idx.data_as<int32_t>()[t * K + j]; x != -1) v.push_back(x);
  return v;
}

// Padded rows: each token keeps 1-64 of its entries, at random places of its row, -1 everywhere else (the
// padding not only at the tail): a softmax over a handful of keys, most of the row skipped.
Status dsa_padded_rows(const std::map<std::string, int64_t>&, uint64_t seed, std::map<std::string, Tensor>& in) {
  KDA_ASSIGN_OR_RETURN(Tensor * idx, need(in, "sparse_indices", DType::kInt32));
  const int64_t T = idx->shape()[0], K = idx->shape()[1];
  SeededRng rng(seed, kStreamStress);
  std::vector<int64_t> slots(static_cast<size_t>(K));
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<int32_t> v = valid_entries(*idx, t);
    if (v.empty()) continue;
    const int64_t keep = std::min<int64_t>(static_cast<int64_t>(v.size()), rng.between(1, 64));
    int32_t* row = idx->data_as<int32_t>() + t * K;
    std::fill(row, row + K, -1);
    for (int64_t j = 0; j < K; ++j) slots[j] = j;
    for (int64_t i = 0; i < keep; ++i) {
      std::swap(slots[i], slots[i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(K - i)))]);
      row[slots[i]] = v[i];
    }
  }
  return Status::ok_status();
}

// Duplicate indices: a quarter of each row's valid entries repeat another entry of the row (each copy counts
// in the softmax, as the definition says).
Status dsa_duplicate_indices(const std::map<std::string, int64_t>&, uint64_t seed, std::map<std::string, Tensor>& in) {
  KDA_ASSIGN_OR_RETURN(Tensor * idx, need(in, "sparse_indices", DType::kInt32));
  const int64_t T = idx->shape()[0], K = idx->shape()[1];
  SeededRng rng(seed, kStreamStress);
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<int32_t> v = valid_entries(*idx, t);
    if (v.size() < 2) continue;
    int32_t* row = idx->data_as<int32_t>() + t * K;
    for (int64_t j = 0; j < K; ++j)
      if (row[j] != -1 && rng.below(4) == 0) row[j] = v[rng.below(v.size())];
  }
  return Status::ok_status();
}

// --- MoE (moe_ds_routing).

// Saturated logits: routing logits N(0, 12^2), so that about one expert in twelve has sigmoid(logit) = 1 in
// fp32 and group scores and choices tie (broken by the bias, then by the lower index, as the reference does).
Status moe_saturated_logits(const std::map<std::string, int64_t>&, uint64_t seed, std::map<std::string, Tensor>& in) {
  KDA_ASSIGN_OR_RETURN(Tensor * logits, need(in, "routing_logits", DType::kFloat32));
  SeededRng rng(seed, kStreamStress);
  float* d = logits->data_as<float>();
  for (int64_t i = 0; i < logits->numel(); ++i) d[i] = static_cast<float>(12.0 * rng.normal());
  return Status::ok_status();
}

// Hot experts: routing_bias +1 on eight experts, two in each of four groups drawn from the seed, 0 elsewhere.
// Sigmoid scores stay below 1, so every token picks those eight (group scores and choices included). A shard of
// 32 experts holds two of them, each with every token, or none (all its outputs zero); its other experts get no
// token. The routing weights still come from the unbiased scores.
Status moe_hot_experts(const std::map<std::string, int64_t>&, uint64_t seed, std::map<std::string, Tensor>& in) {
  KDA_ASSIGN_OR_RETURN(Tensor * bias, need(in, "routing_bias", DType::kBFloat16));
  if (bias->numel() != kMoeExperts) return Status::internal("stress hot_experts: routing_bias is not [256]");
  SeededRng rng(seed, kStreamStress);
  const int64_t per_group = kMoeExperts / kMoeGroups;
  std::vector<int64_t> groups(kMoeGroups);
  for (int64_t g = 0; g < kMoeGroups; ++g) groups[g] = g;
  for (int64_t i = 0; i < kMoeGroups - 1; ++i) std::swap(groups[i], groups[i + rng.below(kMoeGroups - i)]);
  for (int64_t e = 0; e < kMoeExperts; ++e) bias->set_from_double(e, 0.0);
  for (int k = 0; k < kMoeTopKGroups; ++k) {
    const int64_t first = static_cast<int64_t>(rng.below(per_group));
    const int64_t second = (first + 1 + static_cast<int64_t>(rng.below(per_group - 1))) % per_group;
    bias->set_from_double(groups[k] * per_group + first, 1.0);
    bias->set_from_double(groups[k] * per_group + second, 1.0);
  }
  return Status::ok_status();
}

// Extreme block scales: every 128-block scale of the hidden states and both weight tensors (generic random N(0,1)
// otherwise) set to 2^u, u uniform in [-10, 10] per block: positive, as a quantiser's amax / 448 is, and
// neighbouring blocks of one dot product up to 2^20 apart, so a kernel that applies a scale per row or tile, or
// sums blocks before scaling them, is off. The scales are drawn here (on the host); the fp8 values stay the
// session's.
Status moe_extreme_scales(const std::map<std::string, int64_t>& axes, uint64_t seed,
                          std::map<std::string, Tensor>& in) {
  const auto t = axes.find("seq_len");
  if (t == axes.end() || t->second < 1) return Status::bad_input("stress extreme_scales: axis seq_len missing or < 1");
  constexpr int64_t kHiddenBlocks = 7168 / 128, kGemm1Blocks = 4096 / 128, kIntermediateBlocks = 2048 / 128;
  const std::pair<const char*, std::vector<int64_t>> scales[] = {
      {"hidden_states_scale", {kHiddenBlocks, t->second}},
      {"gemm1_weights_scale", {kMoeLocalExperts, kGemm1Blocks, kHiddenBlocks}},
      {"gemm2_weights_scale", {kMoeLocalExperts, kHiddenBlocks, kIntermediateBlocks}}};
  SeededRng rng(seed, kStreamStress);
  for (const auto& [name, shape] : scales) {
    Tensor s(DType::kFloat32, shape);
    float* d = s.data_as<float>();
    for (int64_t i = 0; i < s.numel(); ++i) {
      d[i] = static_cast<float>(std::exp2(-10.0 + 20.0 * rng.unit_open0()));
    }
    in[name] = std::move(s);
  }
  return Status::ok_status();
}

constexpr Stress kStresses[] = {
    {"gdn_decode", "decay_near_one", "gates g in ~[0.992, 0.999999]: slow decay, long memory", gdn_decay_near_one},
    {"gdn_decode", "decay_near_zero", "gates g in ~[6e-6, 0.14]: hundreds of bits of decay per 64 tokens",
     gdn_decay_near_zero},
    {"gdn_decode", "beta_saturated", "beta within 0.25 % of 0 or 1 (b = +-6..10)", gdn_beta_saturated},
    {"gdn_prefill", "decay_near_one", "gates g in ~[0.992, 0.999999]: slow decay, long memory", gdn_decay_near_one},
    {"gdn_prefill", "decay_near_zero", "gates g in ~[6e-6, 0.14]: hundreds of bits of decay per 64 tokens",
     gdn_decay_near_zero},
    {"gdn_prefill", "beta_saturated", "beta within 0.25 % of 0 or 1 (b = +-6..10)", gdn_beta_saturated},
    {"gdn_prefill", "keys_parallel", "each head's keys one direction plus 1 % noise, one in four repeated exactly",
     gdn_keys_parallel},
    {"gdn_prefill", "chunk_boundaries", "sequence lengths 64m-1, 64m, 64m+1", gdn_chunk_boundaries},
    {"gdn_prefill", "empty_sequences", "a third of the sequences empty (their new state zero)", gdn_empty_sequences},
    {"dsa_topk_indexer", "longest_rows", "every row at 64 x max_num_pages tokens over distinct pages",
     dsa_longest_rows},
    {"dsa_topk_indexer", "tied_pages", "half of each row's pages byte copies of its first: a top-k full of ties",
     dsa_tied_pages},
    {"dsa_sparse_attention", "padded_rows", "1-64 entries a row at random places, -1 everywhere else", dsa_padded_rows},
    {"dsa_sparse_attention", "duplicate_indices", "a quarter of each row's entries repeat another of the row",
     dsa_duplicate_indices},
    {"moe_ds_routing", "saturated_logits", "routing logits N(0, 12^2): sigmoid scores of 1 and tied choices",
     moe_saturated_logits},
    {"moe_ds_routing", "hot_experts", "every token on the same 8 experts: 2 hot local experts or none, the rest idle",
     moe_hot_experts},
    {"moe_ds_routing", "extreme_scales", "every fp8 block scale 2^u, u in [-10, 10]: blocks up to 2^20 apart",
     moe_extreme_scales},
};

}  // namespace

std::span<const Stress> stresses() { return kStresses; }

const Stress* find_stress(std::string_view generator, std::string_view name) {
  for (const auto& s : kStresses)
    if (s.generator == generator && s.name == name) return &s;
  return nullptr;
}

std::vector<std::string> stress_names(std::string_view generator) {
  std::vector<std::string> out;
  for (const auto& s : kStresses)
    if (s.generator == generator) out.emplace_back(s.name);
  return out;
}

}  // namespace kda::contest
