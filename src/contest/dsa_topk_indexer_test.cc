// Tests of the DSA top-k indexer pack: the structured-input generator, the CPU reference (compiled into this
// binary from tasks/contest/.../reference_cpu/kernel.cc) against an independent computation, and the
// topk_indices checker rules.
#include <gtest/gtest.h>

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <numeric>
#include <set>
#include <vector>

#include "contest/dsa_topk_indexer_gen.h"
#include "contest/generator_testing.h"
#include "contest/generators.h"
#include "contest/seeded_rng.h"
#include "contest/topk_indices_check.h"
#include "tensor/float_convert.h"
#include "tensor/safetensors.h"

#include <nlohmann/json.hpp>

extern "C" int run(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs, void* stream);

namespace kda::contest {
namespace {

using tensor::DType;
using tensor::Tensor;

std::map<std::string, int64_t> axes(int64_t batch, int64_t max_pages, int64_t num_pages) {
  return {{"batch_size", batch}, {"max_num_pages", max_pages}, {"num_pages", num_pages}};
}

// A full problem: generator tensors plus plain random q (fp8 N(0,1) clamped to [-2,2]) and weights (N(0,1)).
struct Problem {
  std::map<std::string, Tensor> t;
  int64_t batch = 0, max_pages = 0, num_pages = 0;

  Problem(int64_t b, int64_t m, int64_t p, uint64_t seed) : batch(b), max_pages(m), num_pages(p) {
    EXPECT_TRUE(generate_dsa_topk_indexer(axes(b, m, p), seed, seed + 1, t).ok());
    SeededRng rng(seed, 99);
    Tensor q(DType::kFloat8E4M3FN, {b, kIndexerHeads, kIndexerHeadDim});
    for (int64_t i = 0; i < q.numel(); ++i) q.set_from_double(i, std::clamp(rng.normal(), -2.0, 2.0));
    Tensor w(DType::kFloat32, {b, kIndexerHeads});
    for (int64_t i = 0; i < w.numel(); ++i) w.set_from_double(i, rng.normal());
    t.insert_or_assign("q_index_fp8", std::move(q));
    t.insert_or_assign("weights", std::move(w));
  }

  TopkIndexerProblem view() const {
    TopkIndexerProblem v;
    v.batch_size = batch;
    v.max_num_pages = max_pages;
    v.num_pages = num_pages;
    v.q_index_fp8 = t.at("q_index_fp8").data_as<uint8_t>();
    v.k_index_cache_fp8 = reinterpret_cast<const uint8_t*>(t.at("k_index_cache_fp8").data());
    v.weights = t.at("weights").data_as<float>();
    v.seq_lens = t.at("seq_lens").data_as<int32_t>();
    v.block_table = t.at("block_table").data_as<int32_t>();
    return v;
  }

  int32_t* lens() { return t.at("seq_lens").data_as<int32_t>(); }

  // Overrides the lengths and rebuilds the table: row b uses pages 1 + b*max_pages + s (distinct, never page 0),
  // trailing slots hold page 0. Needs num_pages > batch*max_pages.
  void set_lens(const std::vector<int32_t>& l) {
    EXPECT_GT(num_pages, batch * max_pages);
    int32_t* table = t.at("block_table").data_as<int32_t>();
    for (int64_t b = 0; b < batch; ++b) {
      lens()[b] = l[b];
      for (int64_t s = 0; s < max_pages; ++s)
        table[b * max_pages + s] = s * 64 < l[b] ? static_cast<int32_t>(1 + b * max_pages + s) : 0;
    }
  }

  // Runs the CPU reference; returns its status code.
  int run_reference(Tensor& out) const {
    DLTensor in[5] = {t.at("q_index_fp8").dl_view(), t.at("k_index_cache_fp8").dl_view(), t.at("weights").dl_view(),
                      t.at("seq_lens").dl_view(), t.at("block_table").dl_view()};
    DLTensor o = out.dl_view();
    return run(in, 5, &o, 1, nullptr);
  }
};

// Independent top-k: float scores from a direct formula (tensor::float_convert decoding), std::sort by
// (score desc, token asc).
std::vector<int32_t> independent_topk(const Problem& pr, int64_t b) {
  const auto& cache = pr.t.at("k_index_cache_fp8");
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(cache.data());
  const uint8_t* q = pr.t.at("q_index_fp8").data_as<uint8_t>() + b * kIndexerHeads * kIndexerHeadDim;
  const float* w = pr.t.at("weights").data_as<float>() + b * kIndexerHeads;
  const int32_t* table = pr.t.at("block_table").data_as<int32_t>() + b * pr.max_pages;
  const int64_t len = pr.t.at("seq_lens").data_as<int32_t>()[b];
  std::vector<float> score(len);
  std::vector<int32_t> ids(len);
  for (int64_t j = 0; j < len; ++j) {
    const int64_t page = table[j / 64], slot = j % 64;
    ids[j] = static_cast<int32_t>(page * 64 + slot);
    const uint8_t* pg = bytes + page * kIndexerPageBytes;
    float scale;
    std::memcpy(&scale, pg + kIndexerScaleOffset + 4 * slot, 4);
    float s = 0.0f;
    for (int64_t h = 0; h < kIndexerHeads; ++h) {
      float dot = 0.0f;
      for (int64_t d = 0; d < kIndexerHeadDim; ++d)
        dot += tensor::float8_e4m3fn_to_float(q[h * 128 + d]) *
               (tensor::float8_e4m3fn_to_float(pg[128 * slot + d]) * scale);
      s += w[h] * (dot > 0.0f ? dot : 0.0f);
    }
    score[j] = s;
  }
  std::vector<int64_t> order(len);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return score[a] > score[c]; });
  std::vector<int32_t> out(kIndexerTopk, -1);
  for (int64_t i = 0; i < std::min<int64_t>(len, kIndexerTopk); ++i) out[i] = ids[order[i]];
  return out;
}

TEST(DsaTopkIndexerGenerator, TablesLengthsAndPagesFollowTheSpec) {
  for (uint64_t seed : {1ull, 2ull, 77ull}) {
    std::map<std::string, Tensor> out;
    ASSERT_TRUE(generate_dsa_topk_indexer(axes(7, 40, 400), 5, seed, out).ok());
    const Tensor& lens = out.at("seq_lens");
    const Tensor& table = out.at("block_table");
    ASSERT_EQ(lens.shape(), (std::vector<int64_t>{7}));
    ASSERT_EQ(lens.dtype(), DType::kInt32);
    ASSERT_EQ(table.shape(), (std::vector<int64_t>{7, 40}));
    ASSERT_EQ(out.at("k_index_cache_fp8").shape(), (std::vector<int64_t>{400, 64, 1, 132}));
    ASSERT_EQ(out.at("k_index_cache_fp8").dtype(), DType::kInt8);
    int full_rows = 0;
    std::set<int32_t> all_pages;
    for (int64_t b = 0; b < 7; ++b) {
      const int32_t len = lens.data_as<int32_t>()[b];
      EXPECT_GE(len, 1);
      EXPECT_LE(len, 64 * 40);
      full_rows += len > 64 * 39 ? 1 : 0;
      const int64_t used = (len + 63) / 64;
      std::set<int32_t> row_pages;
      for (int64_t s = 0; s < 40; ++s) {
        const int32_t page = table.data_as<int32_t>()[b * 40 + s];
        EXPECT_GE(page, 0);
        EXPECT_LT(page, 400);
        if (s >= used) {
          EXPECT_EQ(page, 0) << "trailing slots hold the valid page 0";
        } else {
          EXPECT_TRUE(row_pages.insert(page).second) << "distinct pages per row";
          EXPECT_TRUE(all_pages.insert(page).second) << "rows share no pages when they fit";
        }
      }
    }
    EXPECT_GE(full_rows, 1) << "one row needs every page";
  }
}

TEST(DsaTopkIndexerGenerator, PackedCacheDecodesToFiniteKeys) {
  for (uint64_t trial : {12ull, 13ull}) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    std::map<std::string, Tensor> out;
    ASSERT_TRUE(generate_dsa_topk_indexer(axes(4, 33, 200), 11, trial, out).ok());
    const uint8_t* bytes = reinterpret_cast<const uint8_t*>(out.at("k_index_cache_fp8").data());
    const int32_t* lens = out.at("seq_lens").data_as<int32_t>();
    const int32_t* table = out.at("block_table").data_as<int32_t>();
    for (int64_t p = 0; p < 200; ++p) {  // every page, referenced or filler
      const uint8_t* pg = bytes + p * kIndexerPageBytes;
      for (int64_t s = 0; s < 64; ++s) {
        float scale;
        std::memcpy(&scale, pg + kIndexerScaleOffset + 4 * s, 4);
        ASSERT_TRUE(std::isfinite(scale) && scale > 0.0f) << "page " << p << " slot " << s;
        for (int64_t d = 0; d < 128; ++d) ASSERT_TRUE(std::isfinite(tensor::float8_e4m3fn_to_float(pg[128 * s + d])));
      }
    }
    // Referenced tokens: the largest |code| of each token is 448 (amax maps to the e4m3 maximum) and the decoded
    // keys look like bf16 N(0,1) draws.
    double sum = 0, sum2 = 0;
    int64_t n = 0;
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t j = 0; j < lens[b]; ++j) {
        const uint8_t* pg = bytes + table[b * 33 + j / 64] * kIndexerPageBytes;
        float scale;
        std::memcpy(&scale, pg + kIndexerScaleOffset + 4 * (j % 64), 4);
        float amax = 0;
        for (int64_t d = 0; d < 128; ++d) {
          const float v = tensor::float8_e4m3fn_to_float(pg[128 * (j % 64) + d]);
          amax = std::max(amax, std::fabs(v));
          sum += v * scale;
          sum2 += double(v * scale) * (v * scale);
          ++n;
        }
        ASSERT_EQ(amax, 448.0f);
      }
    const double mean = sum / n, var = sum2 / n - mean * mean;
    EXPECT_NEAR(mean, 0.0, 0.02);
    EXPECT_NEAR(var, 1.0, 0.05);
  }
}

TEST(DsaTopkIndexerGenerator, PackingRoundTripsWithinFp8Precision) {
  SeededRng rng(3, 4);
  float keys[128];
  for (float& k : keys) k = static_cast<float>(rng.normal());
  keys[17] = -3.5f;  // the amax
  std::vector<uint8_t> page(kIndexerPageBytes, 0);
  const float scale = pack_indexer_token(keys, 5, page.data());
  EXPECT_FLOAT_EQ(scale, 3.5f / 448.0f);
  EXPECT_EQ(page[128 * 5 + 17], 0xFE);  // -448
  float stored;
  std::memcpy(&stored, page.data() + kIndexerScaleOffset + 20, 4);
  EXPECT_EQ(stored, scale);
  for (int d = 0; d < 128; ++d) {
    const float back = tensor::float8_e4m3fn_to_float(page[128 * 5 + d]) * scale;
    EXPECT_NEAR(back, keys[d], std::fabs(keys[d]) / 16 + scale * 0x1p-9 * 64) << d;  // 3 mantissa bits
  }
  // An all-zero token uses the 1e-4 floor: finite scale, zero codes.
  float zeros[128] = {};
  EXPECT_FLOAT_EQ(pack_indexer_token(zeros, 0, page.data()), 1e-4f / 448.0f);
  EXPECT_EQ(page[0], 0);
}

TEST(DsaTopkIndexerGenerator, EveryTensorIsFreshPerTrialAndDeterministicPerSeeds) {
  // block_table: the trailing slots (page 0) are the same in both draws where both rows are short there. The
  // cache: the 1/448 filler scales repeat on pages no row references.
  testing::expect_fresh_per_trial(&generate_dsa_topk_indexer, axes(5, 20, 300),
                                  {{"seq_lens", 0.6}, {"block_table", 0.3}, {"k_index_cache_fp8", 0.8}});
  // Rows sharing pages (B*M > P) and more than one part of 64 pages.
  testing::expect_fresh_per_trial(&generate_dsa_topk_indexer, axes(6, 30, 150),
                                  {{"seq_lens", 0.6}, {"block_table", 0.3}, {"k_index_cache_fp8", 0.8}});
}

TEST(DsaTopkIndexerGenerator, TheFullRowIsFreshAndAlwaysThere) {
  std::set<int64_t> full_rows;
  for (uint64_t trial = 0; trial < 10; ++trial) {
    std::map<std::string, Tensor> out;
    ASSERT_TRUE(generate_dsa_topk_indexer(axes(6, 34, 400), 3, trial, out).ok());
    const int32_t* lens = out.at("seq_lens").data_as<int32_t>();
    int64_t full = -1;
    for (int64_t b = 0; b < 6; ++b)
      if (lens[b] > 64 * 33) full = b;
    ASSERT_GE(full, 0) << "trial " << trial << ": a row needs every page (the roofline floor relies on it)";
    full_rows.insert(full);
  }
  EXPECT_GE(full_rows.size(), 4u) << "which row is full is drawn per trial";
}

TEST(DsaTopkIndexerGenerator, PinnedGoldenValues) {
  // Cross-machine determinism of the lengths and tables: integer-only arithmetic on mt19937_64 (seeded_rng.h).
  std::map<std::string, Tensor> out;
  ASSERT_TRUE(generate_dsa_topk_indexer(axes(3, 10, 100), 2026, 7, out).ok());
  const int32_t* lens = out.at("seq_lens").data_as<int32_t>();
  const int32_t* table = out.at("block_table").data_as<int32_t>();
  std::vector<int32_t> got = {lens[0], lens[1], lens[2], table[0], table[1], table[10]};
  EXPECT_EQ(got, (std::vector<int32_t>{35, 619, 587, 16, 0, 59}));
}

TEST(DsaTopkIndexerGenerator, RejectsBadAxes) {
  std::map<std::string, Tensor> out;
  Status s = generate_dsa_topk_indexer({{"batch_size", 2}, {"max_num_pages", 4}}, 1, 1, out);
  EXPECT_EQ(s.kind(), ErrorKind::kBadInput);
  EXPECT_NE(s.message().find("num_pages"), std::string::npos);
  EXPECT_EQ(generate_dsa_topk_indexer(axes(0, 4, 10), 1, 1, out).kind(), ErrorKind::kBadInput);
  EXPECT_EQ(generate_dsa_topk_indexer(axes(2, 40, 10), 1, 1, out).kind(), ErrorKind::kBadInput);
}

TEST(DsaTopkIndexerGenerator, LargestContestShapeIsFastEnough) {
  std::map<std::string, Tensor> out;
  ASSERT_TRUE(generate_dsa_topk_indexer(axes(31, 91, 11923), 9, 9, out).ok());
  EXPECT_EQ(out.at("k_index_cache_fp8").nbytes(), int64_t{11923} * 8448);
}

TEST(GeneratorRegistry, FindsTheDsaGenerators) {
  EXPECT_NE(find_generator("dsa_topk_indexer"), nullptr);
  EXPECT_EQ(*find_generator("dsa_topk_indexer"), &generate_dsa_topk_indexer);
  EXPECT_NE(find_generator("dsa_sparse_attention"), nullptr);
  EXPECT_EQ(find_generator("no_such_generator"), nullptr);
  const auto names = generator_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_NE(std::find(names.begin(), names.end(), "dsa_topk_indexer"), names.end());
  EXPECT_EQ(workload_seed_from_uuid("a"), workload_seed_from_uuid("a"));
  EXPECT_NE(workload_seed_from_uuid("a"), workload_seed_from_uuid("b"));
}

TEST(DsaTopkIndexerReferenceCpu, MatchesAnIndependentTopk) {
  Problem pr(3, 40, 300, 5);
  pr.set_lens({40 * 64, 2500, 700});  // selection matters twice; then every token plus padding
  Tensor out(DType::kInt32, {3, kIndexerTopk});
  ASSERT_EQ(pr.run_reference(out), 0);
  for (int64_t b = 0; b < 3; ++b) {
    const auto expect = independent_topk(pr, b);
    std::vector<int32_t> got(out.data_as<int32_t>() + b * kIndexerTopk,
                             out.data_as<int32_t>() + (b + 1) * kIndexerTopk);
    EXPECT_EQ(std::count(got.begin(), got.end(), -1), std::count(expect.begin(), expect.end(), -1)) << b;
    EXPECT_EQ(std::set<int32_t>(got.begin(), got.end()), std::set<int32_t>(expect.begin(), expect.end())) << b;
    // Descending order: the first id scores at least as high as the last non-padding one.
    const auto v = pr.view();
    const int64_t k = std::min<int64_t>(pr.lens()[b], kIndexerTopk);
    for (int64_t i = 1; i < k; ++i)
      ASSERT_GE(topk_indexer_score(v, b, got[i - 1]), topk_indexer_score(v, b, got[i])) << b << " " << i;
  }
  std::vector<int32_t> independent;
  for (int64_t b = 0; b < 3; ++b) {
    const auto e = independent_topk(pr, b);
    independent.insert(independent.end(), e.begin(), e.end());
  }
  EXPECT_TRUE(check_topk_indices(pr.view(), out.data_as<int32_t>(), independent.data()).passed());
}

TEST(DsaTopkIndexerReferenceCpu, EdgeLengths) {
  Problem pr(4, 33, 200, 8);
  pr.set_lens({0, 1, 2048, 2049});
  Tensor out(DType::kInt32, {4, kIndexerTopk});
  ASSERT_EQ(pr.run_reference(out), 0);
  const int32_t* o = out.data_as<int32_t>();
  const int32_t* table = pr.t.at("block_table").data_as<int32_t>();
  EXPECT_EQ(std::count(o, o + kIndexerTopk, -1), kIndexerTopk);  // L = 0
  EXPECT_EQ(o[kIndexerTopk], table[33] * 64);                    // L = 1: the only token, then -1
  EXPECT_EQ(std::count(o + kIndexerTopk, o + 2 * kIndexerTopk, -1), kIndexerTopk - 1);
  EXPECT_EQ(std::count(o + 2 * kIndexerTopk, o + 3 * kIndexerTopk, -1), 0);  // L = 2048: all, no padding
  EXPECT_EQ(std::count(o + 3 * kIndexerTopk, o + 4 * kIndexerTopk, -1), 0);  // L = 2049: one token dropped
  EXPECT_TRUE(check_topk_indices(pr.view(), o, o).passed());
}

TEST(DsaTopkIndexerReferenceCpu, RejectsMalformedCalls) {
  Problem pr(2, 4, 20, 3);
  Tensor out(DType::kInt32, {2, kIndexerTopk});
  DLTensor in[5] = {pr.t.at("q_index_fp8").dl_view(), pr.t.at("k_index_cache_fp8").dl_view(),
                    pr.t.at("weights").dl_view(), pr.t.at("seq_lens").dl_view(), pr.t.at("block_table").dl_view()};
  DLTensor o = out.dl_view();
  EXPECT_NE(run(in, 4, &o, 1, nullptr), 0);
  in[2].dtype.bits = 16;
  EXPECT_NE(run(in, 5, &o, 1, nullptr), 0);
  in[2].dtype.bits = 32;
  pr.lens()[0] = 4 * 64 + 1;  // longer than the table
  EXPECT_NE(run(in, 5, &o, 1, nullptr), 0);
}

class TopkCheckerTest : public ::testing::Test {
 protected:
  TopkCheckerTest() : pr(2, 40, 300, 21), out(DType::kInt32, {2, kIndexerTopk}) {
    pr.set_lens({40 * 64, 1000});
    EXPECT_EQ(pr.run_reference(out), 0);
    ref.assign(out.data_as<int32_t>(), out.data_as<int32_t>() + 2 * kIndexerTopk);
    cand = ref;
  }
  TopkCheckResult check(const TopkCheckOptions& o = {}) {
    return check_topk_indices(pr.view(), cand.data(), ref.data(), o);
  }
  // A token of row 0 that the reference did not select (the lowest-scoring one).
  int32_t unselected_row0() {
    const auto v = pr.view();
    const int32_t* table = pr.t.at("block_table").data_as<int32_t>();
    std::set<int32_t> chosen(ref.begin(), ref.begin() + kIndexerTopk);
    int32_t worst = -1;
    float worst_score = INFINITY;
    for (int64_t j = 0; j < pr.lens()[0]; ++j) {
      const int32_t id = table[j / 64] * 64 + j % 64;
      if (chosen.count(id)) continue;
      const float s = topk_indexer_score(v, 0, id);
      if (s < worst_score) worst_score = s, worst = id;
    }
    return worst;
  }
  Problem pr;
  Tensor out;
  std::vector<int32_t> ref, cand;
};

TEST_F(TopkCheckerTest, AcceptsTheReferenceAndAnyOrder) {
  auto r = check();
  EXPECT_TRUE(r.passed()) << r.message;
  EXPECT_EQ(r.compared, 2 * kIndexerTopk);
  EXPECT_EQ(r.mismatched, 0);
  std::reverse(cand.begin(), cand.begin() + kIndexerTopk);
  std::reverse(cand.begin() + kIndexerTopk, cand.begin() + kIndexerTopk + 1000);
  std::swap(cand[kIndexerTopk + 3], cand[kIndexerTopk + 1500]);  // padding moved into the middle
  EXPECT_TRUE(check().passed());
}

TEST_F(TopkCheckerTest, RejectsDuplicates) {
  cand[10] = cand[11];
  auto r = check();
  EXPECT_EQ(r.verdict, TopkVerdict::kDuplicate);
  EXPECT_NE(r.message.find("row 0, position 11"), std::string::npos) << r.message;
}

TEST_F(TopkCheckerTest, RejectsValuesBelowMinusOne) {
  cand[kIndexerTopk + 2000] = -2;
  EXPECT_EQ(check().verdict, TopkVerdict::kBadValue);
}

TEST_F(TopkCheckerTest, RejectsPagesOutsideTheRow) {
  const int32_t* table = pr.t.at("block_table").data_as<int32_t>();
  cand[kIndexerTopk + 5] = table[0] * 64 + 1;  // row 0's first page is not in row 1's table
  EXPECT_EQ(check().verdict, TopkVerdict::kUnreachable);
}

TEST_F(TopkCheckerTest, RejectsTokensAtOrBeyondTheLength) {
  const int32_t* table = pr.t.at("block_table").data_as<int32_t>() + 40;
  // Row 1: L = 1000 = 15 pages + 40 tokens; slot 40 of its 16th page is token 1000, not below L.
  cand[kIndexerTopk + 1999] = table[15] * 64 + 40;
  auto r = check();
  EXPECT_EQ(r.verdict, TopkVerdict::kUnreachable);
  EXPECT_NE(r.message.find("L = 1000"), std::string::npos) << r.message;
  // A page reachable only through a trailing slot (page 0 there; set_lens never uses page 0 for real slots).
  cand = ref;
  ASSERT_EQ(table[16], 0);
  cand[kIndexerTopk + 1999] = 0 * 64 + 3;
  EXPECT_EQ(check().verdict, TopkVerdict::kUnreachable);
}

TEST_F(TopkCheckerTest, RejectsAWrongPaddingCount) {
  cand[kIndexerTopk + 7] = -1;  // one selected token dropped
  auto r = check();
  EXPECT_EQ(r.verdict, TopkVerdict::kScoreMismatch);
  EXPECT_GE(r.mismatched, 1);
}

TEST_F(TopkCheckerTest, RejectsALowScoringTokenUnlessTheRatioAllowsIt) {
  // Swap the reference's best token of row 0 for its worst unselected one.
  const auto v = pr.view();
  int64_t best = 0;
  for (int64_t i = 1; i < kIndexerTopk; ++i)
    if (topk_indexer_score(v, 0, ref[i]) > topk_indexer_score(v, 0, ref[best])) best = i;
  cand[best] = unselected_row0();
  auto r = check();
  EXPECT_EQ(r.verdict, TopkVerdict::kScoreMismatch) << r.message;
  EXPECT_GT(r.max_absolute_error, 1e-2);
  TopkCheckOptions loose;
  loose.matched_ratio = 0.5;
  EXPECT_TRUE(check(loose).passed());
}

TEST_F(TopkCheckerTest, TensorOverloadChecksShapesAndAgrees) {
  std::vector<const Tensor*> in = {&pr.t.at("q_index_fp8"), &pr.t.at("k_index_cache_fp8"), &pr.t.at("weights"),
                                   &pr.t.at("seq_lens"), &pr.t.at("block_table")};
  Tensor cand_t(DType::kInt32, {2, kIndexerTopk});
  std::copy(cand.begin(), cand.end(), cand_t.data_as<int32_t>());
  cand_t.data_as<int32_t>()[3] = cand_t.data_as<int32_t>()[4];
  EXPECT_EQ(check_topk_indices(in, cand_t, out).verdict, TopkVerdict::kDuplicate);
  EXPECT_TRUE(check_topk_indices(in, out, out).passed());
  Tensor wrong(DType::kInt32, {2, 2047});
  EXPECT_EQ(check_topk_indices(in, wrong, out).verdict, TopkVerdict::kBadInput);
  std::swap(in[3], in[4]);
  auto bad = topk_indexer_problem(in);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("seq_lens"), std::string::npos);
}

TEST_F(TopkCheckerTest, RejectsOutOfRangeInputs) {
  pr.lens()[1] = 40 * 64 + 1;
  EXPECT_EQ(check().verdict, TopkVerdict::kBadInput);
}

// ---- The pack's files: contest distribution, dev subset, holdout blobs.

const std::string kIndexerPack =
    std::string(KDA_SOURCE_DIR) + "/tasks/contest/dsa_topk_indexer_fp8_h64_d128_topk2048_ps64";

std::vector<nlohmann::json> read_workloads(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line)["workload"]);
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(DsaTopkIndexerPack, WorkloadsFollowTheContestDistribution) {
  const auto ws = read_workloads(kIndexerPack + "/workloads.jsonl");
  ASSERT_EQ(ws.size(), 128u);
  std::map<int64_t, int> batch_counts;
  std::set<std::string> uuids;
  int64_t min_pages = 1000, max_pages = 0;
  for (const auto& w : ws) {
    EXPECT_TRUE(uuids.insert(w["uuid"].get<std::string>()).second);
    batch_counts[w["axes"]["batch_size"].get<int64_t>()]++;
    EXPECT_EQ(w["axes"]["num_pages"], 11923);
    min_pages = std::min<int64_t>(min_pages, w["axes"]["max_num_pages"]);
    max_pages = std::max<int64_t>(max_pages, w["axes"]["max_num_pages"]);
    for (const char* name : {"q_index_fp8", "k_index_cache_fp8", "weights", "seq_lens", "block_table"})
      EXPECT_EQ(w["inputs"][name]["type"], "random");
  }
  const std::map<int64_t, int> expect = {{1, 3},  {2, 8},  {3, 1},  {4, 17},  {6, 4},   {7, 3},
                                         {8, 22}, {11, 1}, {12, 1}, {14, 6},  {15, 21}, {16, 4},
                                         {25, 1}, {26, 1}, {27, 3}, {29, 12}, {30, 18}, {31, 2}};
  EXPECT_EQ(batch_counts, expect);
  EXPECT_EQ(min_pages, 1);
  EXPECT_EQ(max_pages, 91);
  // dev_workloads: 8 uuids of the main set.
  const std::string toml = read_text(kIndexerPack + "/task.toml");
  const auto start = toml.find("dev_workloads = [");
  ASSERT_NE(start, std::string::npos);
  const std::string list = toml.substr(start, toml.find(']', start) - start);
  int dev = 0;
  for (size_t q = list.find('"'); q != std::string::npos; q = list.find('"', list.find('"', q + 1) + 1)) {
    const std::string u = list.substr(q + 1, list.find('"', q + 1) - q - 1);
    EXPECT_TRUE(uuids.count(u)) << u;
    ++dev;
  }
  EXPECT_EQ(dev, 8);
}

TEST(DsaTopkIndexerPack, HoldoutBlobsAreConsistentAndIncludeTheSpecEdgeCases) {
  const auto ws = read_workloads(kIndexerPack + "/holdout.jsonl");
  ASSERT_GE(ws.size(), 5u);
  ASSERT_LE(ws.size(), 10u);
  std::set<int32_t> lengths_seen;
  for (const auto& w : ws) {
    const int64_t batch = w["axes"]["batch_size"], pages = w["axes"]["max_num_pages"];
    if (w["inputs"]["seq_lens"]["type"] != "safetensors") continue;
    const std::string blob = kIndexerPack + "/" + w["inputs"]["seq_lens"]["path"].get<std::string>();
    auto lens = tensor::read_safetensors_tensor(blob, "seq_lens");
    auto table = tensor::read_safetensors_tensor(blob, "block_table");
    ASSERT_TRUE(lens.ok() && table.ok()) << blob;
    ASSERT_EQ(lens->shape(), (std::vector<int64_t>{batch}));
    ASSERT_EQ(table->shape(), (std::vector<int64_t>{batch, pages}));
    bool needs_every_page = false;
    for (int64_t b = 0; b < batch; ++b) {
      const int32_t len = lens->data_as<int32_t>()[b];
      lengths_seen.insert(len);
      ASSERT_GE(len, 0);
      ASSERT_LE(len, 64 * pages);
      needs_every_page |= len > 64 * (pages - 1);
      std::set<int32_t> row;
      for (int64_t s = 0; s * 64 < len; ++s) {
        const int32_t page = table->data_as<int32_t>()[b * pages + s];
        ASSERT_GE(page, 0);
        ASSERT_LT(page, 11923);
        EXPECT_TRUE(row.insert(page).second);
      }
    }
    EXPECT_TRUE(needs_every_page || pages <= 32) << "the roofline floor assumes a full row";
  }
  for (int32_t edge : {0, 1, 2048, 2049, 5824}) EXPECT_TRUE(lengths_seen.count(edge)) << edge;
}

}  // namespace
}  // namespace kda::contest
