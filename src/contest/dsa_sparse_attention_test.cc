// Tests of the DSA sparse attention pack: the sparse_indices generator and the CPU reference (compiled into this
// binary from tasks/contest/.../reference_cpu/kernel.cc) against an independent base-2 computation.
#include <gtest/gtest.h>

#include <dlpack/dlpack.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <vector>

#include "contest/dsa_sparse_attention_gen.h"
#include "contest/generator_testing.h"
#include "contest/generators.h"
#include "contest/seeded_rng.h"
#include "tensor/float_convert.h"
#include "tensor/safetensors.h"

#include <nlohmann/json.hpp>

extern "C" int run(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs, void* stream);

namespace kda::contest {
namespace {

using tensor::DType;
using tensor::Tensor;

constexpr int64_t kHeads = 16, kCkv = 512, kKpe = 64;
constexpr float kSmScale = 0.1352337788608801f;

std::map<std::string, int64_t> axes(int64_t tokens, int64_t pages) {
  return {{"num_tokens", tokens}, {"num_pages", pages}};
}

TEST(DsaSparseAttentionGenerator, ContestShapeRowsAreFullDistinctAndDisjoint) {
  for (uint64_t trial : {0ull, 1ull, 2ull}) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    std::map<std::string, Tensor> out;
    ASSERT_TRUE(generate_dsa_sparse_attention(axes(8, 8462), 17, trial, out).ok());
    const Tensor& idx = out.at("sparse_indices");
    ASSERT_EQ(idx.dtype(), DType::kInt32);
    ASSERT_EQ(idx.shape(), (std::vector<int64_t>{8, kAttentionTopk}));
    std::set<int32_t> pages_seen;
    for (int64_t t = 0; t < 8; ++t) {
      std::set<int32_t> row, pages;
      for (int64_t i = 0; i < kAttentionTopk; ++i) {
        const int32_t r = idx.data_as<int32_t>()[t * kAttentionTopk + i];
        ASSERT_GE(r, 0) << "contest-size contexts are >= 2048: no padding";
        ASSERT_LT(r, 8462 * 64);
        EXPECT_TRUE(row.insert(r).second) << "distinct indices";
        pages.insert(r / 64);
      }
      for (int32_t p : pages) EXPECT_TRUE(pages_seen.insert(p).second) << "tokens share no pages";
    }
  }
}

TEST(DsaSparseAttentionGenerator, SmallCachesPadAtTheTailAndNeverLeaveARowEmpty) {
  for (uint64_t seed : {1ull, 2ull, 3ull, 4ull}) {
    std::map<std::string, Tensor> out;
    ASSERT_TRUE(generate_dsa_sparse_attention(axes(5, 20), 1, seed, out).ok());  // contexts <= 1280
    const int32_t* idx = out.at("sparse_indices").data_as<int32_t>();
    for (int64_t t = 0; t < 5; ++t) {
      const int32_t* row = idx + t * kAttentionTopk;
      int64_t valid = 0;
      while (valid < kAttentionTopk && row[valid] != -1) ++valid;
      EXPECT_GE(valid, 1);
      EXPECT_LT(valid, kAttentionTopk);
      std::set<int32_t> distinct(row, row + valid);
      EXPECT_EQ(static_cast<int64_t>(distinct.size()), valid);
      for (int64_t i = valid; i < kAttentionTopk; ++i) ASSERT_EQ(row[i], -1) << "padding only at the tail";
      for (int64_t i = 0; i < valid; ++i) ASSERT_LT(row[i], 20 * 64);
    }
  }
}

TEST(DsaSparseAttentionGenerator, IndicesAreFreshPerTrialAndDeterministicPerSeeds) {
  testing::expect_fresh_per_trial(&generate_dsa_sparse_attention, axes(3, 8462), {{"sparse_indices", 0.9}});
  // Small cache (tail padding, pages shared across tokens): the valid entries are fresh too.
  testing::expect_fresh_per_trial(&generate_dsa_sparse_attention, axes(4, 20), {{"sparse_indices", 0.3}});
  // Fresh down to the pages: over a few trials, a token's pages are new ones each time (a request's block table
  // and context length are free; the contest's captured ones are not reused).
  std::set<int32_t> first_pages;
  for (uint64_t trial = 0; trial < 4; ++trial) {
    std::map<std::string, Tensor> out;
    ASSERT_TRUE(generate_dsa_sparse_attention(axes(1, 8462), 5, trial, out).ok());
    first_pages.insert(out.at("sparse_indices").data_as<int32_t>()[0] / 64);
  }
  EXPECT_EQ(first_pages.size(), 4u);
}

TEST(DsaSparseAttentionGenerator, PinnedGoldenValues) {
  // Cross-machine determinism: integer-only arithmetic on mt19937_64 (seeded_rng.h).
  std::map<std::string, Tensor> a;
  ASSERT_TRUE(generate_dsa_sparse_attention(axes(3, 8462), 5, 1, a).ok());
  const int32_t* v = a.at("sparse_indices").data_as<int32_t>();
  EXPECT_EQ((std::vector<int32_t>{v[0], v[1], v[2048]}), (std::vector<int32_t>{231848, 393820, 413286}));
}

TEST(DsaSparseAttentionGenerator, RejectsBadAxes) {
  std::map<std::string, Tensor> out;
  EXPECT_EQ(generate_dsa_sparse_attention({{"num_tokens", 2}}, 1, 1, out).kind(), ErrorKind::kBadInput);
  EXPECT_EQ(generate_dsa_sparse_attention(axes(0, 10), 1, 1, out).kind(), ErrorKind::kBadInput);
  EXPECT_NE(find_generator("dsa_sparse_attention"), nullptr);
}

// A small problem with random bf16 inputs (not the contest's cache size, so the test stays fast).
struct AttentionProblem {
  int64_t tokens, pages;
  Tensor q_nope, q_pe, ckv, kpe, indices, scale, out, lse;
  AttentionProblem(int64_t t, int64_t p, uint64_t seed)
      : tokens(t),
        pages(p),
        q_nope(DType::kBFloat16, {t, kHeads, kCkv}),
        q_pe(DType::kBFloat16, {t, kHeads, kKpe}),
        ckv(DType::kBFloat16, {p, 64, kCkv}),
        kpe(DType::kBFloat16, {p, 64, kKpe}),
        indices(DType::kInt32, {t, kAttentionTopk}),
        scale(DType::kFloat32, {}),
        out(DType::kBFloat16, {t, kHeads, kCkv}),
        lse(DType::kFloat32, {t, kHeads}) {
    SeededRng rng(seed, 7);
    for (Tensor* x : {&q_nope, &q_pe, &ckv, &kpe})
      for (int64_t i = 0; i < x->numel(); ++i) x->set_from_double(i, rng.normal());
    scale.set_from_double(0, kSmScale);
    for (int64_t i = 0; i < out.numel(); ++i) out.set_from_double(i, NAN);  // poisoned like the harness
    for (int64_t i = 0; i < lse.numel(); ++i) lse.set_from_double(i, NAN);
  }
  int call() {
    DLTensor in[6] = {q_nope.dl_view(), q_pe.dl_view(),    ckv.dl_view(),
                      kpe.dl_view(),    indices.dl_view(), scale.dl_view()};
    DLTensor o[2] = {out.dl_view(), lse.dl_view()};
    return run(in, 6, o, 2, nullptr);
  }
};

// Independent form: base-2 logits, max-shifted 2^x weights, float accumulation per output element.
void independent(const AttentionProblem& p, int64_t t, int64_t h, std::vector<float>& o, float& lse2) {
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < kAttentionTopk; ++i) {
    const int32_t r = p.indices.data_as<int32_t>()[t * kAttentionTopk + i];
    if (r != -1) rows.push_back(r);
  }
  o.assign(kCkv, 0.0f);
  if (rows.empty()) {
    lse2 = -INFINITY;
    return;
  }
  std::vector<float> s2(rows.size());
  float m2 = -INFINITY;
  for (size_t j = 0; j < rows.size(); ++j) {
    float dot = 0.0f;
    for (int64_t d = 0; d < kCkv; ++d)
      dot += static_cast<float>(p.q_nope.get_as_double((t * kHeads + h) * kCkv + d) *
                                p.ckv.get_as_double(rows[j] * kCkv + d));
    for (int64_t d = 0; d < kKpe; ++d)
      dot += static_cast<float>(p.q_pe.get_as_double((t * kHeads + h) * kKpe + d) *
                                p.kpe.get_as_double(rows[j] * kKpe + d));
    s2[j] = dot * kSmScale * 1.4426950408889634f;
    m2 = std::max(m2, s2[j]);
  }
  float z = 0.0f;
  for (size_t j = 0; j < rows.size(); ++j) z += std::exp2(s2[j] - m2);
  for (size_t j = 0; j < rows.size(); ++j) {
    const float w = std::exp2(s2[j] - m2) / z;
    for (int64_t d = 0; d < kCkv; ++d) o[d] += w * static_cast<float>(p.ckv.get_as_double(rows[j] * kCkv + d));
  }
  lse2 = m2 + std::log2(z);
}

TEST(DsaSparseAttentionReferenceCpu, MatchesAnIndependentBase2Computation) {
  AttentionProblem p(3, 8, 11);  // 512 cache rows
  int32_t* idx = p.indices.data_as<int32_t>();
  SeededRng rng(12, 13);
  for (int64_t i = 0; i < kAttentionTopk; ++i) {
    idx[i] = i < 300 ? static_cast<int32_t>(rng.below(512)) : -1;  // token 0: tail padding, duplicates counted
    idx[kAttentionTopk + i] = i % 3 == 0 ? static_cast<int32_t>(rng.below(512)) : -1;  // token 1: -1 interleaved
    idx[2 * kAttentionTopk + i] = static_cast<int32_t>(rng.below(512));                // token 2: full row
  }
  ASSERT_EQ(p.call(), 0);
  std::vector<float> o;
  float lse2;
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t h = 0; h < kHeads; h += 5) {
      independent(p, t, h, o, lse2);
      EXPECT_NEAR(p.lse.get_as_double(t * kHeads + h), lse2, 1e-4 * std::fabs(lse2) + 1e-4) << t << " " << h;
      for (int64_t d = 0; d < kCkv; ++d) {
        const double got = p.out.get_as_double((t * kHeads + h) * kCkv + d);
        ASSERT_NEAR(got, o[d], 1e-2 * std::fabs(o[d]) + 1e-3) << t << " " << h << " " << d;
      }
    }
}

TEST(DsaSparseAttentionReferenceCpu, DuplicatesCountAndEmptyRowsGiveZeroAndMinusInf) {
  AttentionProblem p(2, 2, 21);
  int32_t* idx = p.indices.data_as<int32_t>();
  for (int64_t i = 0; i < 2 * kAttentionTopk; ++i) idx[i] = -1;
  idx[0] = 5;  // token 0: rows 5, 5, 9 -> row 5 weighs twice
  idx[700] = 5;
  idx[2047] = 9;  // token 1 stays empty
  ASSERT_EQ(p.call(), 0);
  for (int64_t h = 0; h < kHeads; ++h) {
    // Two-row closed form with the duplicate: lse2 = log2(2*2^a + 2^b).
    std::vector<float> o;
    float lse2;
    independent(p, 0, h, o, lse2);
    EXPECT_NEAR(p.lse.get_as_double(h), lse2, 1e-4 * std::fabs(lse2) + 1e-4);
    EXPECT_EQ(p.lse.get_as_double(kHeads + h), -std::numeric_limits<double>::infinity());
    for (int64_t d = 0; d < kCkv; ++d) ASSERT_EQ(p.out.get_as_double((kHeads + h) * kCkv + d), 0.0);
  }
  // Dropping the duplicate changes the result: duplicates are not deduplicated.
  const double with_dup = p.lse.get_as_double(0);
  idx[700] = -1;
  ASSERT_EQ(p.call(), 0);
  EXPECT_LT(p.lse.get_as_double(0), with_dup);
}

TEST(DsaSparseAttentionReferenceCpu, RejectsMalformedCalls) {
  AttentionProblem p(1, 2, 3);
  int32_t* idx = p.indices.data_as<int32_t>();
  for (int64_t i = 0; i < kAttentionTopk; ++i) idx[i] = i % 128;
  EXPECT_EQ(p.call(), 0);
  idx[3] = 2 * 64;  // one past the cache
  EXPECT_NE(p.call(), 0);
  idx[3] = -2;
  EXPECT_NE(p.call(), 0);
  idx[3] = 1;
  DLTensor in[6] = {p.q_nope.dl_view(), p.q_pe.dl_view(),    p.ckv.dl_view(),
                    p.kpe.dl_view(),    p.indices.dl_view(), p.scale.dl_view()};
  DLTensor o[2] = {p.out.dl_view(), p.lse.dl_view()};
  EXPECT_NE(run(in, 5, o, 2, nullptr), 0);
  in[0].dtype.code = kDLFloat;
  EXPECT_NE(run(in, 6, o, 2, nullptr), 0);
}

// ---- The pack's files: contest distribution and holdout blobs.

const std::string kAttentionPack =
    std::string(KDA_SOURCE_DIR) + "/tasks/contest/dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64";

std::vector<nlohmann::json> read_workloads(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line)["workload"]);
  return out;
}

TEST(DsaSparseAttentionPack, WorkloadsFollowTheContestDistribution) {
  const auto ws = read_workloads(kAttentionPack + "/workloads.jsonl");
  ASSERT_EQ(ws.size(), 23u);
  std::map<int64_t, int> counts;
  for (const auto& w : ws) {
    counts[w["axes"]["num_tokens"].get<int64_t>()]++;
    EXPECT_EQ(w["axes"]["num_pages"], 8462);
    EXPECT_EQ(w["inputs"]["sm_scale"]["type"], "scalar");
    EXPECT_DOUBLE_EQ(w["inputs"]["sm_scale"]["value"].get<double>(), 0.1352337788608801);
    EXPECT_EQ(w["inputs"]["sparse_indices"]["type"], "random");
  }
  EXPECT_EQ(counts, (std::map<int64_t, int>{{1, 1}, {2, 8}, {6, 3}, {7, 3}, {8, 8}}));
}

TEST(DsaSparseAttentionPack, HoldoutBlobsHaveValidDistinctRowsAndTheEdgeCases) {
  const auto ws = read_workloads(kAttentionPack + "/holdout.jsonl");
  ASSERT_GE(ws.size(), 5u);
  bool single = false, padded = false, interleaved = false;
  for (const auto& w : ws) {
    if (w["inputs"]["sparse_indices"]["type"] != "safetensors") continue;
    const int64_t tokens = w["axes"]["num_tokens"];
    auto idx =
        tensor::read_safetensors_tensor(kAttentionPack + "/" + w["inputs"]["sparse_indices"]["path"].get<std::string>(),
                                        w["inputs"]["sparse_indices"]["tensor_key"]);
    ASSERT_TRUE(idx.ok()) << idx.status().message();
    ASSERT_EQ(idx->shape(), (std::vector<int64_t>{tokens, kAttentionTopk}));
    for (int64_t t = 0; t < tokens; ++t) {
      const int32_t* row = idx->data_as<int32_t>() + t * kAttentionTopk;
      std::set<int32_t> valid;
      bool seen_pad = false, valid_after_pad = false;
      for (int64_t i = 0; i < kAttentionTopk; ++i) {
        ASSERT_GE(row[i], -1);
        ASSERT_LT(row[i], 8462 * 64);
        if (row[i] == -1) {
          seen_pad = true;
          continue;
        }
        valid_after_pad |= seen_pad;
        EXPECT_TRUE(valid.insert(row[i]).second) << "distinct";
      }
      ASSERT_FALSE(valid.empty()) << "no empty rows (unpassable, spec §1.4)";
      single |= valid.size() == 1;
      padded |= seen_pad && !valid_after_pad;
      interleaved |= valid_after_pad;
    }
  }
  EXPECT_TRUE(single);
  EXPECT_TRUE(padded);
  EXPECT_TRUE(interleaved);
}

}  // namespace
}  // namespace kda::contest
