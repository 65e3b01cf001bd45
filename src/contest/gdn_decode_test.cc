// gdn_decode_qk4_v8_d128_k_last: the structured-input generator's invariants, and the CPU reference
// (tasks/contest/.../reference_cpu/kernel.cc, compiled into this test) against an independent matrix-form
// computation of the same step.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
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
constexpr uint64_t kWorkloadSeed = 7;

// The inputs of one trial: the trial seed is what varies in an evaluation.
std::map<std::string, Tensor> generate(int64_t batch, uint64_t trial_seed) {
  return testing::run_generator(&generate_gdn_decode, {{"batch_size", batch}}, kWorkloadSeed, trial_seed);
}

double bf(const Tensor& t, int64_t i) { return tensor::bfloat16_to_float(t.data_as<uint16_t>()[i]); }

TEST(GdnDecodeGen, RegisteredUnderItsTaskTomlName) {
  ASSERT_NE(find_generator("gdn_decode"), nullptr);
  EXPECT_EQ(*find_generator("gdn_decode"), &generate_gdn_decode);
}

TEST(GdnDecodeGen, ShapesAndDtypesMatchTheDefinition) {
  auto in = generate(3, 1);
  const std::map<std::string, std::pair<DType, std::vector<int64_t>>> want = {
      {"q", {DType::kBFloat16, {3, 1, 4, 128}}}, {"k", {DType::kBFloat16, {3, 1, 4, 128}}},
      {"v", {DType::kBFloat16, {3, 1, 8, 128}}}, {"state", {DType::kFloat32, {3, 8, 128, 128}}},
      {"A_log", {DType::kFloat32, {8}}},         {"a", {DType::kBFloat16, {3, 1, 8}}},
      {"dt_bias", {DType::kFloat32, {8}}},       {"b", {DType::kBFloat16, {3, 1, 8}}}};
  ASSERT_EQ(in.size(), want.size());
  for (const auto& [name, spec] : want) {
    ASSERT_TRUE(in.count(name)) << name;
    EXPECT_EQ(in.at(name).dtype(), spec.first) << name;
    EXPECT_EQ(in.at(name).shape(), spec.second) << name;
  }
}

TEST(GdnDecodeGen, QueriesAndKeysHaveUnitNorm) {
  for (uint64_t trial : {2ull, 3ull, 4ull}) {
    auto in = generate(4, trial);
    for (const char* name : {"q", "k"}) {
      const Tensor& t = in.at(name);
      for (int64_t row = 0; row < t.numel() / K; ++row) {
        double n2 = 0.0;
        for (int64_t c = 0; c < K; ++c) n2 += bf(t, row * K + c) * bf(t, row * K + c);
        EXPECT_NEAR(std::sqrt(n2), 1.0, 0.01) << name << " row " << row << " trial " << trial;
      }
    }
  }
}

TEST(GdnDecodeGen, DecayMostlyBetweenHalfAndOne) {
  int in_range = 0, total = 0;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    auto in = generate(4, seed);
    for (int64_t bi = 0; bi < 4; ++bi)
      for (int64_t h = 0; h < kGdnVHeads; ++h) {
        const double g = gdn_decay(bf(in.at("a"), bi * 8 + h), in.at("A_log").data_as<float>()[h],
                                   in.at("dt_bias").data_as<float>()[h]);
        ASSERT_GT(g, 0.0);
        ASSERT_LT(g, 1.0);
        in_range += g >= 0.5 && g <= 0.999;
        ++total;
      }
    for (int64_t h = 0; h < kGdnVHeads; ++h) {
      const double A = std::exp(in.at("A_log").data_as<float>()[h]);
      EXPECT_GE(A, 1.0 - 1e-6);
      EXPECT_LE(A, 16.0 + 1e-5);
    }
  }
  EXPECT_GT(in_range, total * 8 / 10) << in_range << " of " << total;
}

TEST(GdnDecodeGen, WarmedStateIsFiniteNonZeroAndOfOrderOne) {
  for (uint64_t trial : {3ull, 4ull, 5ull}) {
    auto in = generate(2, trial);
    const float* s = in.at("state").data_as<float>();
    const int64_t per_state = K * K;
    for (int64_t slot = 0; slot < 2 * kGdnVHeads; ++slot) {  // every (batch, head) state is warmed
      double sum2 = 0.0, max_abs = 0.0;
      for (int64_t i = 0; i < per_state; ++i) {
        const double x = s[slot * per_state + i];
        ASSERT_TRUE(std::isfinite(x));
        sum2 += x * x;
        max_abs = std::max(max_abs, std::abs(x));
      }
      EXPECT_GT(std::sqrt(sum2 / per_state), 0.01) << "slot " << slot << " trial " << trial;
      EXPECT_LT(max_abs, 50.0) << "slot " << slot << " trial " << trial;
    }
  }
}

TEST(GdnDecodeGen, EveryTensorIsFreshPerTrialAndDeterministicPerSeeds) {
  testing::expect_fresh_per_trial(
      &generate_gdn_decode, {{"batch_size", 2}},
      {{"q", 0.9}, {"k", 0.9}, {"v", 0.9}, {"state", 0.9}, {"A_log", 0.9}, {"a", 0.9}, {"dt_bias", 0.9}, {"b", 0.9}});
}

TEST(GdnDecodeGen, RejectsMissingOrNonPositiveBatch) {
  std::map<std::string, Tensor> out;
  Status st = generate_gdn_decode({}, 1, 1, out);
  EXPECT_EQ(st.kind(), ErrorKind::kBadInput);
  EXPECT_NE(st.message().find("batch_size"), std::string::npos);
  EXPECT_EQ(generate_gdn_decode({{"batch_size", 0}}, 1, 1, out).kind(), ErrorKind::kBadInput);
}

// The step in matrix form, S in K x V (S[c][r] = state[r][c]), in double, independent of the reference's loops.
struct Expected {
  std::vector<double> output;     // [B, 8, 128]
  std::vector<double> new_state;  // [B, 8, 128, 128] k-last
};

Expected matrix_form(std::map<std::string, Tensor>& in, int64_t B, double scale) {
  Expected e;
  e.output.assign(B * 8 * K, 0.0);
  e.new_state.assign(B * 8 * K * K, 0.0);
  std::vector<double> S(K * K), u(K);
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t h = 0; h < 8; ++h) {
      const int64_t i = h / 2;
      const double g = gdn_decay(bf(in.at("a"), bi * 8 + h), in.at("A_log").data_as<float>()[h],
                                 in.at("dt_bias").data_as<float>()[h]);
      const double beta = gdn_beta(bf(in.at("b"), bi * 8 + h));
      const float* st = in.at("state").data_as<float>() + (bi * 8 + h) * K * K;
      for (int64_t c = 0; c < K; ++c)
        for (int64_t r = 0; r < K; ++r) S[c * K + r] = g * st[r * K + c];  // S' = g S
      for (int64_t r = 0; r < K; ++r) {                                    // u = k^T S'
        u[r] = 0.0;
        for (int64_t c = 0; c < K; ++c) u[r] += bf(in.at("k"), (bi * 4 + i) * K + c) * S[c * K + r];
      }
      for (int64_t c = 0; c < K; ++c)  // S_new = S' + beta k (v - u)^T
        for (int64_t r = 0; r < K; ++r)
          S[c * K + r] += beta * bf(in.at("k"), (bi * 4 + i) * K + c) * (bf(in.at("v"), (bi * 8 + h) * K + r) - u[r]);
      for (int64_t r = 0; r < K; ++r) {  // o = scale q^T S_new
        double o = 0.0;
        for (int64_t c = 0; c < K; ++c) o += bf(in.at("q"), (bi * 4 + i) * K + c) * S[c * K + r];
        e.output[(bi * 8 + h) * K + r] = scale * o;
        for (int64_t c = 0; c < K; ++c) e.new_state[((bi * 8 + h) * K + r) * K + c] = S[c * K + r];
      }
    }
  return e;
}

void run_reference(std::map<std::string, Tensor>& in, int64_t B, double scale, Tensor& output, Tensor& new_state) {
  Tensor scale_t(DType::kFloat32, {});
  scale_t.set_from_double(0, scale);
  std::vector<DLTensor> ins;
  for (const char* name : {"q", "k", "v", "state", "A_log", "a", "dt_bias", "b"}) ins.push_back(in.at(name).dl_view());
  ins.push_back(scale_t.dl_view());
  output = Tensor(DType::kBFloat16, {B, 1, 8, K});
  new_state = Tensor(DType::kFloat32, {B, 8, K, K});
  std::vector<DLTensor> outs = {output.dl_view(), new_state.dl_view()};
  ASSERT_EQ(run(ins.data(), static_cast<int64_t>(ins.size()), outs.data(), 2, nullptr), 0);
}

TEST(GdnDecodeReferenceCpu, MatchesTheMatrixForm) {
  const int64_t B = 2;
  auto in = generate(B, 21);
  Tensor output, new_state;
  run_reference(in, B, 0.08838834764831843, output, new_state);
  const Expected e = matrix_form(in, B, 0.08838834764831843);
  double max_state_err = 0.0;
  for (int64_t i = 0; i < new_state.numel(); ++i)
    max_state_err = std::max(max_state_err, std::abs(new_state.data_as<float>()[i] - e.new_state[i]));
  EXPECT_LT(max_state_err, 1e-5);
  for (int64_t i = 0; i < output.numel(); ++i) {
    const double got = bf(output, i);
    EXPECT_NEAR(got, e.output[i], 1e-6 + std::abs(e.output[i]) * 4e-3) << "output element " << i;
  }
  // The step changed the state (the workload is not trivial).
  double moved = 0.0;
  for (int64_t i = 0; i < new_state.numel(); ++i)
    moved = std::max(moved,
                     std::abs(static_cast<double>(new_state.data_as<float>()[i]) - in.at("state").data_as<float>()[i]));
  EXPECT_GT(moved, 1e-3);
}

TEST(GdnDecodeReferenceCpu, ZeroScaleMeansOneOverSqrtHeadSize) {
  auto in = generate(1, 22);
  Tensor o1, s1, o2, s2;
  run_reference(in, 1, 0.0, o1, s1);
  run_reference(in, 1, 1.0 / std::sqrt(128.0), o2, s2);
  EXPECT_TRUE(o1.bitwise_equal(o2));
  EXPECT_TRUE(s1.bitwise_equal(s2));
}

TEST(GdnDecodeReferenceCpu, RejectsWrongArity) { EXPECT_NE(run(nullptr, 3, nullptr, 2, nullptr), 0); }

}  // namespace
}  // namespace kda::contest
