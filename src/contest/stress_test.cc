// Stress inputs (contest/stress.h): each stress does what its row says on real generator draws, keeps the
// shapes and the cu_seqlens invariants, and is fresh per seed and the same for the same seed.
#include "contest/stress.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "contest/gdn_gen.h"
#include "contest/generators.h"
#include "contest/moe_gen.h"
#include "tensor/float_convert.h"

namespace kda::contest {
namespace {

using tensor::Tensor;

std::map<std::string, Tensor> draw(const std::string& generator, const std::map<std::string, int64_t>& axes,
                                   uint64_t trial = 7) {
  std::map<std::string, Tensor> out;
  const Generator* g = find_generator(generator);
  EXPECT_NE(g, nullptr);
  EXPECT_TRUE((*g)(axes, 11, trial, out).ok());
  return out;
}

std::map<std::string, Tensor> stressed(const std::string& generator, const std::string& name,
                                       const std::map<std::string, int64_t>& axes, uint64_t seed = 5) {
  auto in = draw(generator, axes);
  const Stress* s = find_stress(generator, name);
  EXPECT_NE(s, nullptr) << generator << " " << name;
  if (s != nullptr) {
    EXPECT_TRUE(s->apply(axes, seed, in).ok());
  }
  return in;
}

const std::map<std::string, int64_t> kPrefill = {{"total_seq_len", 700}, {"num_seqs", 6}, {"len_cu_seqlens", 7}};
const std::map<std::string, int64_t> kDecode = {{"batch_size", 16}};

// Gates of every (token, head) of an input set.
std::vector<double> gates(const std::map<std::string, Tensor>& in) {
  const Tensor& a = in.at("a");
  const int64_t heads = a.shape().back();
  std::vector<double> g;
  for (int64_t i = 0; i < a.numel(); ++i)
    g.push_back(gdn_decay(a.get_as_double(i), in.at("A_log").get_as_double(i % heads),
                          in.at("dt_bias").get_as_double(i % heads)));
  return g;
}

std::vector<int64_t> lengths(const Tensor& cu) {
  std::vector<int64_t> len;
  for (int64_t n = 0; n + 1 < cu.numel(); ++n) len.push_back(cu.get_as_double(n + 1) - cu.get_as_double(n));
  return len;
}

TEST(Stress, EveryRowNamesAKnownGeneratorOnceAndUnknownNamesAreNotFound) {
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (const auto& s : stresses()) {
    EXPECT_NE(find_generator(s.generator), nullptr) << s.generator;
    EXPECT_TRUE(seen.insert({s.generator, s.name}).second) << s.name;
    EXPECT_FALSE(s.what.empty());
  }
  EXPECT_EQ(find_stress("gdn_decode", "chunk_boundaries"), nullptr);  // prefill's only
  EXPECT_EQ(find_stress("gdn_prefill", "no_such"), nullptr);
  EXPECT_EQ(stress_names("gdn_decode"),
            (std::vector<std::string>{"decay_near_one", "decay_near_zero", "beta_saturated"}));
}

TEST(Stress, DecayNearOneKeepsTheStateForThousandsOfTokens) {
  for (const auto& [gen, axes] : {std::pair{"gdn_prefill", kPrefill}, std::pair{"gdn_decode", kDecode}}) {
    const auto g = gates(stressed(gen, "decay_near_one", axes));
    const auto [lo, hi] = std::minmax_element(g.begin(), g.end());
    EXPECT_GT(*lo, 0.98) << gen;
    EXPECT_LT(*hi, 1.0) << gen;
    EXPECT_GT(*hi, 0.9999) << gen;
  }
  // The random draw's gates reach well below: the stress is not the default.
  const auto plain = gates(draw("gdn_prefill", kPrefill));
  EXPECT_LT(*std::min_element(plain.begin(), plain.end()), 0.9);
}

TEST(Stress, DecayNearZeroLosesHundredsOfBitsIn64Tokens) {
  const auto in = stressed("gdn_prefill", "decay_near_zero", kPrefill);
  const auto g = gates(in);
  EXPECT_LT(*std::max_element(g.begin(), g.end()), 0.3);
  const int64_t heads = in.at("a").shape().back();
  for (int64_t h = 0; h < heads; ++h) {
    double bits = 0;
    for (int64_t t = 0; t < 64; ++t) bits -= std::log2(g[t * heads + h]);
    EXPECT_GT(bits, 300) << "head " << h;
  }
}

TEST(Stress, BetaSaturatedSitsAtBothEnds) {
  const auto in = stressed("gdn_decode", "beta_saturated", kDecode);
  int low = 0, high = 0;
  for (int64_t i = 0; i < in.at("b").numel(); ++i) {
    const double beta = gdn_beta(in.at("b").get_as_double(i));
    low += beta < 0.003;
    high += beta > 0.997;
  }
  EXPECT_EQ(low + high, in.at("b").numel());
  EXPECT_GT(low, 0);
  EXPECT_GT(high, 0);
}

TEST(Stress, KeysParallelAreUnitAndAlmostOneDirectionPerHead) {
  const auto in = stressed("gdn_prefill", "keys_parallel", kPrefill);
  const Tensor& k = in.at("k");
  const int64_t T = k.shape()[0], H = k.shape()[1], D = k.shape()[2];
  int exact = 0;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 1; t < T; ++t) {
      double dot = 0, n2 = 0;
      for (int64_t c = 0; c < D; ++c) {
        const double x = k.get_as_double((t * H + h) * D + c), y = k.get_as_double(h * D + c);
        dot += x * y;
        n2 += x * x;
      }
      EXPECT_NEAR(n2, 1.0, 0.02);
      EXPECT_GT(dot, 0.99);
      exact += k.get_bits((t * H + h) * D) == k.get_bits(h * D) && dot > 0.99999;
    }
  EXPECT_GT(exact, 0) << "some keys repeat exactly";
}

TEST(Stress, ChunkBoundariesPutLengthsAtTheEdgesOf64AndCoverEveryToken) {
  for (uint64_t seed : {1, 2, 3}) {
    const auto in = stressed("gdn_prefill", "chunk_boundaries", kPrefill, seed);
    const auto len = lengths(in.at("cu_seqlens"));
    ASSERT_EQ(len.size(), 6u);
    EXPECT_EQ(in.at("cu_seqlens").get_as_double(0), 0);
    EXPECT_EQ(in.at("cu_seqlens").get_as_double(6), 700);
    for (size_t n = 0; n + 1 < len.size(); ++n) {
      EXPECT_GE(len[n], 63);
      EXPECT_TRUE(len[n] % 64 == 63 || len[n] % 64 == 0 || len[n] % 64 == 1) << len[n];
    }
    EXPECT_GE(len.back(), 1);
  }
  // Fewer tokens than 64 per sequence: still a valid split.
  const std::map<std::string, int64_t> tight = {{"total_seq_len", 10}, {"num_seqs", 4}, {"len_cu_seqlens", 5}};
  const auto len = lengths(stressed("gdn_prefill", "chunk_boundaries", tight).at("cu_seqlens"));
  int64_t sum = 0;
  for (int64_t l : len) {
    EXPECT_GE(l, 1);
    sum += l;
  }
  EXPECT_EQ(sum, 10);
}

TEST(Stress, EmptySequencesEmptyAThirdAndKeepEveryToken) {
  const auto len = lengths(stressed("gdn_prefill", "empty_sequences", kPrefill).at("cu_seqlens"));
  int64_t sum = 0, empty = 0;
  for (int64_t l : len) {
    EXPECT_GE(l, 0);
    sum += l;
    empty += l == 0;
  }
  EXPECT_EQ(sum, 700);
  EXPECT_EQ(empty, 2);
}

const std::map<std::string, int64_t> kIndexer = {{"batch_size", 3}, {"max_num_pages", 4}, {"num_pages", 20}};
const std::map<std::string, int64_t> kSparse = {{"num_tokens", 3}, {"num_pages", 100}};
const std::map<std::string, int64_t> kMoe = {{"seq_len", 64}};

TEST(Stress, LongestRowsUseEverySlotWithDistinctPages) {
  const auto in = stressed("dsa_topk_indexer", "longest_rows", kIndexer);
  for (int64_t b = 0; b < 3; ++b) {
    EXPECT_EQ(in.at("seq_lens").data_as<int32_t>()[b], 256);
    std::set<int32_t> pages;
    for (int64_t m = 0; m < 4; ++m) {
      const int32_t p = in.at("block_table").data_as<int32_t>()[b * 4 + m];
      EXPECT_GE(p, 0);
      EXPECT_LT(p, 20);
      pages.insert(p);
    }
    EXPECT_EQ(pages.size(), 4u) << "row " << b;
  }
}

TEST(Stress, TiedPagesCopyARowsFirstPage) {
  const auto before = draw("dsa_topk_indexer", kIndexer);
  const auto in = stressed("dsa_topk_indexer", "tied_pages", kIndexer);
  const Tensor& cache = in.at("k_index_cache_fp8");
  const int64_t page = cache.nbytes() / cache.shape()[0];
  int copies = 0;
  for (int64_t b = 0; b < 3; ++b) {
    const int32_t* row = in.at("block_table").data_as<int32_t>() + b * 4;
    const int64_t used = (in.at("seq_lens").data_as<int32_t>()[b] + 63) / 64;
    for (int64_t m = 1; m < used; ++m)
      copies += row[m] != row[0] && std::equal(cache.data() + row[m] * page, cache.data() + (row[m] + 1) * page,
                                               cache.data() + row[0] * page);
  }
  EXPECT_GT(copies, 0);
  EXPECT_TRUE(in.at("block_table").bitwise_equal(before.at("block_table")));
}

TEST(Stress, PaddedRowsKeepAFewOfTheirEntriesScatteredAmongMinusOnes) {
  const auto before = draw("dsa_sparse_attention", kSparse);
  const auto in = stressed("dsa_sparse_attention", "padded_rows", kSparse);
  const Tensor& idx = in.at("sparse_indices");
  const int64_t K = idx.shape()[1];
  for (int64_t t = 0; t < idx.shape()[0]; ++t) {
    std::set<int32_t> was;
    for (int64_t j = 0; j < K; ++j) was.insert(before.at("sparse_indices").data_as<int32_t>()[t * K + j]);
    int64_t valid = 0, last_valid = -1;
    for (int64_t j = 0; j < K; ++j)
      if (const int32_t x = idx.data_as<int32_t>()[t * K + j]; x != -1) {
        EXPECT_TRUE(was.contains(x));
        ++valid;
        last_valid = j;
      }
    EXPECT_GE(valid, 1);
    EXPECT_LE(valid, 64);
    EXPECT_GT(last_valid, valid - 1) << "the kept entries are not all at the head of the row";
  }
}

TEST(Stress, DuplicateIndicesRepeatEntriesOfTheSameRow) {
  const auto before = draw("dsa_sparse_attention", kSparse);
  const auto in = stressed("dsa_sparse_attention", "duplicate_indices", kSparse);
  const Tensor& idx = in.at("sparse_indices");
  const int64_t K = idx.shape()[1];
  for (int64_t t = 0; t < idx.shape()[0]; ++t) {
    std::set<int32_t> was, now;
    int64_t valid_before = 0, valid_now = 0;
    for (int64_t j = 0; j < K; ++j) {
      const int32_t a = before.at("sparse_indices").data_as<int32_t>()[t * K + j],
                    x = idx.data_as<int32_t>()[t * K + j];
      if (a != -1) was.insert(a), ++valid_before;
      if (x != -1) now.insert(x), ++valid_now;
    }
    EXPECT_EQ(valid_now, valid_before);
    EXPECT_LT(now.size(), was.size()) << "some entries repeat";
    for (int32_t x : now) EXPECT_TRUE(was.contains(x));
  }
}

TEST(Stress, SaturatedLogitsGiveSigmoidScoresOfOne) {
  const auto in = stressed("moe_ds_routing", "saturated_logits", kMoe);
  const Tensor& l = in.at("routing_logits");
  int64_t one = 0;
  for (int64_t i = 0; i < l.numel(); ++i) one += 1.0f / (1.0f + std::exp(-l.data_as<float>()[i])) == 1.0f;
  EXPECT_GT(one, l.numel() / 25);
  EXPECT_LT(one, l.numel() / 6);
}

TEST(Stress, HotExpertsSendEveryTokenToTheSameEightExperts) {
  for (uint64_t seed : {5u, 6u, 7u}) {
    const auto in = stressed("moe_ds_routing", "hot_experts", kMoe, seed);
    const Tensor& l = in.at("routing_logits");
    const Tensor& b = in.at("routing_bias");
    std::vector<float> bias(kMoeExperts);
    for (int64_t e = 0; e < kMoeExperts; ++e) bias[e] = static_cast<float>(b.get_as_double(e));
    const int64_t tokens = l.shape()[0];
    std::vector<int> ids(tokens * kMoeTopK);
    std::vector<float> weights(tokens * kMoeTopK);
    moe_route(l.data_as<float>(), bias.data(), tokens, kMoeExperts, 2.5f, ids.data(), weights.data());
    std::set<int> chosen(ids.begin(), ids.end());
    EXPECT_EQ(chosen.size(), 8u) << seed;  // every token, the same eight
    std::set<int> groups;
    for (int e : chosen) groups.insert(e / (kMoeExperts / kMoeGroups));
    EXPECT_EQ(groups.size(), 4u);
    int64_t shards_with_tokens = 0;  // local_expert_offset 0, 32, ...: a shard has two hot experts or none
    for (int64_t offset = 0; offset < kMoeExperts; offset += kMoeLocalExperts) {
      const MoeLocalLoad load = moe_local_load(ids, offset);
      EXPECT_TRUE(load.experts_touched == 0 || load.experts_touched == 2) << offset;
      shards_with_tokens += load.experts_touched > 0;
    }
    EXPECT_EQ(shards_with_tokens, 4);
  }
}

TEST(Stress, ExtremeScalesSpreadEveryBlockScaleOverTwentyBinades) {
  const auto in = stressed("moe_ds_routing", "extreme_scales", kMoe);
  ASSERT_EQ(in.at("hidden_states_scale").shape(), (std::vector<int64_t>{56, 64}));
  ASSERT_EQ(in.at("gemm1_weights_scale").shape(), (std::vector<int64_t>{32, 32, 56}));
  ASSERT_EQ(in.at("gemm2_weights_scale").shape(), (std::vector<int64_t>{32, 56, 16}));
  for (const char* name : {"hidden_states_scale", "gemm1_weights_scale", "gemm2_weights_scale"}) {
    const Tensor& s = in.at(name);
    double lo = 1e30, hi = 0;
    for (int64_t i = 0; i < s.numel(); ++i) {
      lo = std::min(lo, s.get_as_double(i));
      hi = std::max(hi, s.get_as_double(i));
    }
    EXPECT_GE(lo, std::exp2(-10.0)) << name;  // positive, as a quantiser's scales are
    EXPECT_LE(hi, std::exp2(10.0)) << name;
    EXPECT_GT(hi / lo, std::exp2(16.0)) << name;
  }
}

TEST(Stress, FreshPerSeedAndTheSameForTheSameSeed) {
  const std::map<std::string_view, std::map<std::string, int64_t>> axes_of = {{"gdn_decode", kDecode},
                                                                              {"gdn_prefill", kPrefill},
                                                                              {"dsa_topk_indexer", kIndexer},
                                                                              {"dsa_sparse_attention", kSparse},
                                                                              {"moe_ds_routing", kMoe}};
  for (const auto& s : stresses()) {
    const auto& axes = axes_of.at(s.generator);
    const auto a = stressed(std::string(s.generator), std::string(s.name), axes, 5);
    const auto b = stressed(std::string(s.generator), std::string(s.name), axes, 5);
    const auto c = stressed(std::string(s.generator), std::string(s.name), axes, 6);
    bool differs = false;
    for (const auto& [name, t] : a) {
      EXPECT_TRUE(t.bitwise_equal(b.at(name))) << s.name << " " << name;
      EXPECT_EQ(t.shape(), c.at(name).shape());
      differs = differs || !t.bitwise_equal(c.at(name));
    }
    EXPECT_TRUE(differs) << s.name;
  }
}

}  // namespace
}  // namespace kda::contest
