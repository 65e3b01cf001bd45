// gdn_prefill_qk4_v8_d128_k_last: the generator's invariants (cu_seqlens, unit-norm q/k, zero and warmed states),
// and the CPU reference (compiled into this test) against an independent matrix-form recurrence, including the
// empty-sequence quirk (new_state = 0).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "contest/gdn_gen.h"
#include "contest/generator_testing.h"
#include "contest/generators.h"
#include "tensor/float_convert.h"

extern "C" int run(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs, void* stream);

namespace kda::contest {
namespace {

using tensor::DType;
using tensor::Tensor;

constexpr int64_t K = kGdnHeadSize;

std::map<std::string, int64_t> axes(int64_t T, int64_t N) {
  return {{"total_seq_len", T}, {"num_seqs", N}, {"len_cu_seqlens", N + 1}};
}

constexpr uint64_t kWorkloadSeed = 5;

// The inputs of one trial: the trial seed is what varies in an evaluation.
std::map<std::string, Tensor> generate(int64_t T, int64_t N, uint64_t trial_seed) {
  return testing::run_generator(&generate_gdn_prefill, axes(T, N), kWorkloadSeed, trial_seed);
}

// Sequence lengths from cu_seqlens.
std::vector<int64_t> lengths(const Tensor& cu_seqlens) {
  std::vector<int64_t> len;
  const int64_t* cu = cu_seqlens.data_as<int64_t>();
  for (int64_t n = 0; n + 1 < cu_seqlens.numel(); ++n) len.push_back(cu[n + 1] - cu[n]);
  return len;
}

double bf(const Tensor& t, int64_t i) { return tensor::bfloat16_to_float(t.data_as<uint16_t>()[i]); }

TEST(GdnPrefillGen, RegisteredUnderItsTaskTomlName) {
  ASSERT_NE(find_generator("gdn_prefill"), nullptr);
  EXPECT_EQ(*find_generator("gdn_prefill"), &generate_gdn_prefill);
}

TEST(GdnPrefillGen, SplitSequencesKeepsTheCuSeqlensInvariants) {
  for (int64_t T : {1, 2, 3, 6, 57, 100, 8192})
    for (int64_t N : {1, 2, 3, 4, 5, 20, 57}) {
      SeededRng rng(T * 1000 + N, 1);
      const std::vector<int64_t> cu = gdn_split_sequences(T, N, rng);
      ASSERT_EQ(static_cast<int64_t>(cu.size()), N + 1);
      EXPECT_EQ(cu.front(), 0);
      EXPECT_EQ(cu.back(), T) << "T=" << T << " N=" << N;
      int64_t empty = 0, longest = 0;
      for (int64_t n = 0; n < N; ++n) {
        ASSERT_LE(cu[n], cu[n + 1]);
        empty += cu[n + 1] == cu[n];
        longest = std::max(longest, cu[n + 1] - cu[n]);
      }
      EXPECT_EQ(empty, std::max<int64_t>(N - T, 0)) << "empty sequences only when T < N; T=" << T << " N=" << N;
      if (T >= N && N > 1 && N <= kGdnOneLongMaxSeqs) {
        EXPECT_GE(longest - 1, (T - N) / 2) << "one long sequence; T=" << T << " N=" << N;
      }
    }
}

TEST(GdnPrefillGen, ShapesDtypesAndCuSeqlensMatchTheAxes) {
  for (uint64_t trial : {1ull, 2ull, 3ull}) {
    auto in = generate(40, 3, trial);
    EXPECT_EQ(in.at("q").shape(), (std::vector<int64_t>{40, 4, 128}));
    EXPECT_EQ(in.at("k").shape(), (std::vector<int64_t>{40, 4, 128}));
    EXPECT_EQ(in.at("v").shape(), (std::vector<int64_t>{40, 8, 128}));
    EXPECT_EQ(in.at("state").shape(), (std::vector<int64_t>{3, 8, 128, 128}));
    EXPECT_EQ(in.at("a").shape(), (std::vector<int64_t>{40, 8}));
    EXPECT_EQ(in.at("b").shape(), (std::vector<int64_t>{40, 8}));
    EXPECT_EQ(in.at("A_log").shape(), (std::vector<int64_t>{8}));
    EXPECT_EQ(in.at("dt_bias").shape(), (std::vector<int64_t>{8}));
    ASSERT_EQ(in.at("cu_seqlens").dtype(), DType::kInt64);
    ASSERT_EQ(in.at("cu_seqlens").shape(), (std::vector<int64_t>{4}));
    const int64_t* cu = in.at("cu_seqlens").data_as<int64_t>();
    EXPECT_EQ(cu[0], 0);
    EXPECT_EQ(cu[3], 40);
    EXPECT_TRUE(std::is_sorted(cu, cu + 4));
    for (const char* name : {"q", "k"})
      for (int64_t row = 0; row < 40 * 4; ++row) {
        double n2 = 0.0;
        for (int64_t c = 0; c < K; ++c) n2 += bf(in.at(name), row * K + c) * bf(in.at(name), row * K + c);
        ASSERT_NEAR(std::sqrt(n2), 1.0, 0.01) << name << " row " << row << " trial " << trial;
      }
  }
}

TEST(GdnPrefillGen, EveryTensorIsFreshPerTrialAndDeterministicPerSeeds) {
  // 600 tokens: q, k and v span three parts of 256 tokens. cu_seqlens: the two ends are the axes' (0 and T), the
  // four inner values are fresh. state: a sequence whose state is zero in both draws (1/9 each) stays equal.
  testing::expect_fresh_per_trial(&generate_gdn_prefill, axes(600, 5),
                                  {{"q", 0.9},
                                   {"k", 0.9},
                                   {"v", 0.9},
                                   {"a", 0.9},
                                   {"b", 0.9},
                                   {"A_log", 0.9},
                                   {"dt_bias", 0.9},
                                   {"state", 0.2},
                                   {"cu_seqlens", 0.5}});
}

// The split of total_seq_len into num_seqs is free: which sequence is long, and every length, change per trial,
// while the structure (up to four sequences: one with >= half the extra tokens; no empty sequence when T >= N)
// holds in each.
TEST(GdnPrefillGen, SequenceSplitIsFreshPerTrialWithTheSameStructure) {
  std::set<int64_t> long_positions;
  std::set<std::vector<int64_t>> splits;
  for (uint64_t trial = 0; trial < 24; ++trial) {
    const auto len = lengths(generate(100, 4, trial).at("cu_seqlens"));
    const auto longest = std::max_element(len.begin(), len.end());
    long_positions.insert(longest - len.begin());
    splits.insert(len);
    EXPECT_GE(*longest - 1, (100 - 4) / 2) << "trial " << trial;
    EXPECT_GE(*std::min_element(len.begin(), len.end()), 1) << "trial " << trial;
  }
  EXPECT_GE(long_positions.size(), 3u) << "the long sequence's position must vary";
  EXPECT_EQ(splits.size(), 24u) << "every trial its own split";
  // T < N: exactly N - T empty sequences, at positions that vary.
  std::set<std::vector<int64_t>> short_splits;
  for (uint64_t trial = 0; trial < 12; ++trial) {
    const auto len = lengths(generate(3, 5, trial).at("cu_seqlens"));
    EXPECT_EQ(std::count(len.begin(), len.end(), 0), 2) << "trial " << trial;
    short_splits.insert(len);
  }
  EXPECT_GE(short_splits.size(), 4u);
}

// The contest's T = 8192 batches hold 20-57 sequences: there no sequence dominates. Lengths spread like
// independent requests (log-normal weights), every one >= 1, the longest a minority of the tokens; drawn fresh
// per trial, and the split of <= 4 sequences (one long) is unchanged by it.
TEST(GdnPrefillGen, ManySequenceBatchesSpreadTheirTokens) {
  for (int64_t N : {20, 38, 57}) {
    std::vector<double> longest_share;
    std::set<std::vector<int64_t>> splits;
    for (uint64_t trial = 0; trial < 16; ++trial) {
      SeededRng rng(trial * 131 + N, 7);
      const std::vector<int64_t> cu = gdn_split_sequences(8192, N, rng);
      std::vector<int64_t> len;
      for (int64_t n = 0; n < N; ++n) len.push_back(cu[n + 1] - cu[n]);
      EXPECT_GE(*std::min_element(len.begin(), len.end()), 1) << "N=" << N;
      longest_share.push_back(static_cast<double>(*std::max_element(len.begin(), len.end())) / 8192.0);
      std::set<int64_t> distinct(len.begin(), len.end());
      EXPECT_GE(distinct.size(), static_cast<size_t>(N / 2)) << "lengths spread; N=" << N;
      splits.insert(len);
    }
    std::sort(longest_share.begin(), longest_share.end());
    EXPECT_LT(longest_share[8], 0.35) << "median share of the longest sequence; N=" << N;
    EXPECT_GT(longest_share[8], 1.5 / static_cast<double>(N)) << "not an even split; N=" << N;
    EXPECT_EQ(splits.size(), 16u);
  }
}

TEST(GdnPrefillGen, MixesZeroAndWarmedStates) {
  int zero = 0, warmed = 0;
  for (uint64_t trial = 0; trial < 30; ++trial) {
    auto in = generate(16, 4, trial);
    const float* s = in.at("state").data_as<float>();
    for (int64_t n = 0; n < 4; ++n) {
      bool all_zero = true;
      for (int64_t i = 0; i < 8 * K * K; ++i) {
        ASSERT_TRUE(std::isfinite(s[n * 8 * K * K + i]));
        all_zero &= s[n * 8 * K * K + i] == 0.0f;
      }
      (all_zero ? zero : warmed)++;
    }
  }
  // 2/3 warmed: 80 of 120 expected (binomial sd ~5).
  EXPECT_GE(warmed, 65) << warmed << " warmed, " << zero << " zero";
  EXPECT_LE(warmed, 95) << warmed << " warmed, " << zero << " zero";
}

TEST(GdnPrefillGen, RejectsInconsistentAxes) {
  std::map<std::string, Tensor> out;
  Status st = generate_gdn_prefill({{"total_seq_len", 4}, {"num_seqs", 2}, {"len_cu_seqlens", 4}}, 1, 1, out);
  EXPECT_EQ(st.kind(), ErrorKind::kBadInput);
  EXPECT_NE(st.message().find("len_cu_seqlens"), std::string::npos);
  EXPECT_EQ(generate_gdn_prefill({{"num_seqs", 2}}, 1, 1, out).kind(), ErrorKind::kBadInput);
}

// Independent recurrence in matrix form (S is K x V, S[c][r] = state[r][c]), in double.
void matrix_form(std::map<std::string, Tensor>& in, double scale, std::vector<double>& output,
                 std::vector<double>& new_state) {
  const int64_t T = in.at("q").shape()[0], N = in.at("cu_seqlens").numel() - 1;
  const int64_t* cu = in.at("cu_seqlens").data_as<int64_t>();
  output.assign(T * 8 * K, 0.0);
  new_state.assign(N * 8 * K * K, 0.0);
  std::vector<double> S(K * K), u(K);
  for (int64_t n = 0; n < N; ++n) {
    if (cu[n + 1] <= cu[n]) continue;  // stays zero
    for (int64_t h = 0; h < 8; ++h) {
      const int64_t i = h / 2;
      const float* st = in.at("state").data_as<float>() + (n * 8 + h) * K * K;
      for (int64_t c = 0; c < K; ++c)
        for (int64_t r = 0; r < K; ++r) S[c * K + r] = st[r * K + c];
      for (int64_t t = cu[n]; t < cu[n + 1]; ++t) {
        const double g = gdn_decay(bf(in.at("a"), t * 8 + h), in.at("A_log").data_as<float>()[h],
                                   in.at("dt_bias").data_as<float>()[h]);
        const double beta = gdn_beta(bf(in.at("b"), t * 8 + h));
        for (auto& x : S) x *= g;
        for (int64_t r = 0; r < K; ++r) {
          u[r] = 0.0;
          for (int64_t c = 0; c < K; ++c) u[r] += bf(in.at("k"), (t * 4 + i) * K + c) * S[c * K + r];
        }
        for (int64_t c = 0; c < K; ++c)
          for (int64_t r = 0; r < K; ++r)
            S[c * K + r] += beta * bf(in.at("k"), (t * 4 + i) * K + c) * (bf(in.at("v"), (t * 8 + h) * K + r) - u[r]);
        for (int64_t r = 0; r < K; ++r) {
          double o = 0.0;
          for (int64_t c = 0; c < K; ++c) o += bf(in.at("q"), (t * 4 + i) * K + c) * S[c * K + r];
          output[(t * 8 + h) * K + r] = scale * o;
        }
      }
      for (int64_t r = 0; r < K; ++r)
        for (int64_t c = 0; c < K; ++c) new_state[((n * 8 + h) * K + r) * K + c] = S[c * K + r];
    }
  }
}

void run_reference(std::map<std::string, Tensor>& in, double scale, Tensor& output, Tensor& new_state) {
  const int64_t T = in.at("q").shape()[0], N = in.at("cu_seqlens").numel() - 1;
  Tensor scale_t(DType::kFloat32, {});
  scale_t.set_from_double(0, scale);
  std::vector<DLTensor> ins;
  for (const char* name : {"q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "cu_seqlens"})
    ins.push_back(in.at(name).dl_view());
  ins.push_back(scale_t.dl_view());
  output = Tensor(DType::kBFloat16, {T, 8, K});
  new_state = Tensor(DType::kFloat32, {N, 8, K, K});
  for (int64_t i = 0; i < new_state.numel(); ++i) new_state.data_as<float>()[i] = NAN;  // poisoned, as the harness
  for (int64_t i = 0; i < output.numel(); ++i) output.data_as<uint16_t>()[i] = 0x7fc0;
  std::vector<DLTensor> outs = {output.dl_view(), new_state.dl_view()};
  ASSERT_EQ(run(ins.data(), static_cast<int64_t>(ins.size()), outs.data(), 2, nullptr), 0);
}

void expect_matches(std::map<std::string, Tensor>& in) {
  const double scale = 0.08838834764831843;
  Tensor output, new_state;
  run_reference(in, scale, output, new_state);
  std::vector<double> want_out, want_state;
  matrix_form(in, scale, want_out, want_state);
  for (int64_t i = 0; i < new_state.numel(); ++i)
    ASSERT_NEAR(new_state.data_as<float>()[i], want_state[i], 1e-5 + 1e-5 * std::abs(want_state[i])) << "state " << i;
  for (int64_t i = 0; i < output.numel(); ++i)
    ASSERT_NEAR(bf(output, i), want_out[i], 1e-6 + std::abs(want_out[i]) * 4e-3) << "output " << i;
}

TEST(GdnPrefillReferenceCpu, MatchesTheMatrixFormOverSeveralSequences) {
  auto in = generate(24, 3, 31);
  expect_matches(in);
}

TEST(GdnPrefillReferenceCpu, EmptySequencesGetZeroStateNotTheirInput) {
  auto in = generate(2, 5, 32);  // T < N: three empty sequences
  const int64_t* cu = in.at("cu_seqlens").data_as<int64_t>();
  // Give every sequence a non-zero input state so that the quirk is observable.
  float* s = in.at("state").data_as<float>();
  for (int64_t i = 0; i < in.at("state").numel(); ++i)
    if (s[i] == 0.0f) s[i] = 0.25f;
  Tensor output, new_state;
  run_reference(in, 0.08838834764831843, output, new_state);
  int empties = 0;
  for (int64_t n = 0; n < 5; ++n) {
    if (cu[n + 1] != cu[n]) continue;
    ++empties;
    for (int64_t i = 0; i < 8 * K * K; ++i) ASSERT_EQ(new_state.data_as<float>()[n * 8 * K * K + i], 0.0f);
  }
  EXPECT_EQ(empties, 3);
  expect_matches(in);
}

TEST(GdnPrefillReferenceCpu, SingleTokenSingleSequence) {
  auto in = generate(1, 1, 33);
  expect_matches(in);
}

TEST(GdnPrefillReferenceCpu, RejectsBadCuSeqlens) {
  auto in = generate(8, 2, 34);
  in.at("cu_seqlens").data_as<int64_t>()[1] = 9;  // beyond T
  Tensor scale_t(DType::kFloat32, {});
  std::vector<DLTensor> ins;
  for (const char* name : {"q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "cu_seqlens"})
    ins.push_back(in.at(name).dl_view());
  ins.push_back(scale_t.dl_view());
  Tensor output(DType::kBFloat16, {8, 8, K}), new_state(DType::kFloat32, {2, 8, K, K});
  std::vector<DLTensor> outs = {output.dl_view(), new_state.dl_view()};
  EXPECT_NE(run(ins.data(), 10, outs.data(), 2, nullptr), 0);
}

}  // namespace
}  // namespace kda::contest
