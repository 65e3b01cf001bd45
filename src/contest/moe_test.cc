// moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048: the routing generator's invariants, the local
// (token, expert) load of every pack workload (recorded in the pack's routing_stats.json and checked against the
// task.toml roofline floor), and the CPU reference (compiled into this test) on reduced hidden/intermediate sizes
// against a direct per-token recomputation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contest/generators.h"
#include "contest/moe_gen.h"
#include "contest/seeded_rng.h"
#include "tensor/float_convert.h"

extern "C" int run(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs, void* stream);

namespace kda::contest {
namespace {

using tensor::DType;
using tensor::Tensor;

const std::string kPack =
    std::string(KDA_SOURCE_DIR) + "/tasks/contest/moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048";

std::map<std::string, Tensor> generate(int64_t T, uint64_t seed) {
  std::map<std::string, Tensor> out;
  const Status st = generate_moe_ds_routing({{"seq_len", T}}, seed, 3, out);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

std::vector<float> bias_floats(const Tensor& bias) {
  std::vector<float> b(bias.numel());
  for (int64_t e = 0; e < bias.numel(); ++e) b[e] = tensor::bfloat16_to_float(bias.data_as<uint16_t>()[e]);
  return b;
}

std::vector<int> route(std::map<std::string, Tensor>& in, std::vector<float>* weights = nullptr) {
  const int64_t T = in.at("routing_logits").shape()[0];
  std::vector<int> ids(T * kMoeTopK);
  std::vector<float> w(T * kMoeTopK);
  const std::vector<float> bias = bias_floats(in.at("routing_bias"));
  moe_route(in.at("routing_logits").data_as<float>(), bias.data(), T, kMoeExperts, 2.5f, ids.data(), w.data());
  if (weights) *weights = w;
  return ids;
}

TEST(MoeGen, RegisteredUnderItsTaskTomlName) {
  ASSERT_NE(find_generator("moe_ds_routing"), nullptr);
  EXPECT_EQ(*find_generator("moe_ds_routing"), &generate_moe_ds_routing);
}

TEST(MoeGen, ShapesDtypesSpreadAndSmallBias) {
  auto in = generate(64, 1);
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in.at("routing_logits").dtype(), DType::kFloat32);
  EXPECT_EQ(in.at("routing_logits").shape(), (std::vector<int64_t>{64, 256}));
  EXPECT_EQ(in.at("routing_bias").dtype(), DType::kBFloat16);
  EXPECT_EQ(in.at("routing_bias").shape(), (std::vector<int64_t>{256}));
  const float* l = in.at("routing_logits").data_as<float>();
  for (int64_t t = 0; t < 64; ++t) {  // per-token spread: standard deviation of the token's logits in ~[1, 2]
    double m = 0.0, m2 = 0.0;
    for (int e = 0; e < 256; ++e) {
      m += l[t * 256 + e];
      m2 += static_cast<double>(l[t * 256 + e]) * l[t * 256 + e];
    }
    const double sd = std::sqrt(m2 / 256 - (m / 256) * (m / 256));
    EXPECT_GT(sd, 0.75) << "token " << t;
    EXPECT_LT(sd, 2.5) << "token " << t;
  }
  double max_bias = 0.0;
  for (float b : bias_floats(in.at("routing_bias"))) max_bias = std::max(max_bias, std::abs(static_cast<double>(b)));
  EXPECT_LE(max_bias, 0.0201);
  EXPECT_GT(max_bias, 0.01);
}

TEST(MoeGen, DeterministicPerWorkloadSeedAndIndependentOfTrialSeed) {
  std::map<std::string, Tensor> a, b, c;
  ASSERT_TRUE(generate_moe_ds_routing({{"seq_len", 5}}, 9, 1, a).ok());
  ASSERT_TRUE(generate_moe_ds_routing({{"seq_len", 5}}, 9, 2, b).ok());
  ASSERT_TRUE(generate_moe_ds_routing({{"seq_len", 5}}, 10, 1, c).ok());
  for (const auto& [name, t] : a) {
    EXPECT_TRUE(t.bitwise_equal(b.at(name))) << name;
    EXPECT_FALSE(t.bitwise_equal(c.at(name))) << name;
  }
  std::map<std::string, Tensor> out;
  EXPECT_EQ(generate_moe_ds_routing({{"seq_len", 0}}, 1, 1, out).kind(), ErrorKind::kBadInput);
  EXPECT_EQ(generate_moe_ds_routing({}, 1, 1, out).kind(), ErrorKind::kBadInput);
}

TEST(MoeRouting, EightDistinctExpertsInAtMostFourGroupsWithWeightsSummingToTheScaling) {
  auto in = generate(500, 2);
  std::vector<float> w;
  const std::vector<int> ids = route(in, &w);
  std::vector<int> per_expert(256, 0), per_group(8, 0);
  for (int64_t t = 0; t < 500; ++t) {
    std::set<int> experts, groups;
    double sum = 0.0;
    for (int n = 0; n < 8; ++n) {
      const int e = ids[t * 8 + n];
      ASSERT_GE(e, 0);
      ASSERT_LT(e, 256);
      experts.insert(e);
      groups.insert(e / 32);
      EXPECT_GT(w[t * 8 + n], 0.0f);
      sum += w[t * 8 + n];
      ++per_expert[e];
    }
    EXPECT_EQ(experts.size(), 8u);
    EXPECT_LE(groups.size(), 4u);
    for (int g : groups) ++per_group[g];
    EXPECT_NEAR(sum, 2.5, 1e-5);
  }
  // Spread: every group is kept by a fair share of tokens, and no expert takes most tokens (a large bias would
  // send every token to the same few experts, §1.4).
  for (int g = 0; g < 8; ++g) EXPECT_GT(per_group[g], 500 / 8) << "group " << g;
  EXPECT_LT(*std::max_element(per_expert.begin(), per_expert.end()), 500 / 4);
}

TEST(MoeRouting, LocalPairsOverTheEightOffsetsTotalEightPerToken) {
  auto in = generate(37, 3);
  const std::vector<int> ids = route(in);
  int64_t pairs = 0;
  for (int64_t offset = 0; offset < 256; offset += 32) pairs += moe_local_load(ids, offset).pairs;
  EXPECT_EQ(pairs, 8 * 37);
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream f(path);
  std::vector<nlohmann::json> lines;
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// The local load of every workload follows from its uuid (workload seed) and offset. It is recorded in the pack
// (routing_stats.json) so that reports can quote it; KDA_UPDATE_GOLDEN=1 rewrites the file.
TEST(MoeRouting, LocalLoadOfThePackWorkloadsIsRecordedAndAboveTheRooflineFloor) {
  nlohmann::json rows = nlohmann::json::array();
  for (const char* split : {"workloads", "holdout"}) {
    const auto lines = read_jsonl(kPack + "/" + split + ".jsonl");
    ASSERT_FALSE(lines.empty()) << split;
    for (const auto& line : lines) {
      const auto& w = line.at("workload");
      const std::string uuid = w.at("uuid");
      const int64_t T = w.at("axes").at("seq_len");
      const int64_t offset = w.at("inputs").at("local_expert_offset").at("value");
      auto in = generate(T, workload_seed_from_uuid(uuid));
      const MoeLocalLoad load = moe_local_load(route(in), offset);
      EXPECT_GE(load.experts_touched, moe_floor_experts(T)) << uuid << " T=" << T;
      rows.push_back({{"split", split}, {"uuid", uuid}, {"seq_len", T}, {"local_expert_offset", offset},
                      {"local_pairs", load.pairs}, {"experts_touched", load.experts_touched},
                      {"tokens_without_local", load.tokens_without_local}});
    }
  }
  nlohmann::json doc = {
      {"description",
       "Local (token, expert) load of each workload under the moe_ds_routing generator (written by "
       "src/contest/moe_test.cc with KDA_UPDATE_GOLDEN=1; checked on every test run)."},
      {"workloads", rows}};
  const std::string path = kPack + "/routing_stats.json";
  if (const char* update = std::getenv("KDA_UPDATE_GOLDEN"); update && std::string(update) == "1") {
    std::ofstream(path) << doc.dump(1) << "\n";
  }
  std::ifstream f(path);
  ASSERT_TRUE(f) << path << " is missing (run with KDA_UPDATE_GOLDEN=1)";
  std::stringstream ss;
  ss << f.rdbuf();
  const nlohmann::json recorded = nlohmann::json::parse(ss.str(), nullptr, false);
  ASSERT_FALSE(recorded.is_discarded()) << path;
  EXPECT_EQ(recorded.at("workloads"), rows);
}

// ---- CPU reference on reduced sizes: H = 256, I = 128 (the routing keeps its 256 experts and 32 local ones).

constexpr int64_t kH = 256, kI = 128;

struct MoeInputs {
  std::map<std::string, Tensor> t;
  int64_t offset = 0;
};

void fill_fp8(Tensor& x, SeededRng& rng) {
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data_as<uint8_t>()[i] = tensor::double_to_float8_e4m3fn(std::clamp(rng.normal(), -2.0, 2.0));
}
void fill_normal(Tensor& x, SeededRng& rng) {
  for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = static_cast<float>(rng.normal());
}

MoeInputs small_inputs(int64_t T, uint64_t seed) {
  MoeInputs m;
  m.t = generate(T, seed);
  SeededRng rng(seed, 99);
  m.t.emplace("hidden_states", Tensor(DType::kFloat8E4M3FN, {T, kH}));
  m.t.emplace("hidden_states_scale", Tensor(DType::kFloat32, {kH / 128, T}));
  m.t.emplace("gemm1_weights", Tensor(DType::kFloat8E4M3FN, {32, 2 * kI, kH}));
  m.t.emplace("gemm1_weights_scale", Tensor(DType::kFloat32, {32, 2 * kI / 128, kH / 128}));
  m.t.emplace("gemm2_weights", Tensor(DType::kFloat8E4M3FN, {32, kH, kI}));
  m.t.emplace("gemm2_weights_scale", Tensor(DType::kFloat32, {32, kH / 128, kI / 128}));
  for (const char* n : {"hidden_states", "gemm1_weights", "gemm2_weights"}) fill_fp8(m.t.at(n), rng);
  for (const char* n : {"hidden_states_scale", "gemm1_weights_scale", "gemm2_weights_scale"}) fill_normal(m.t.at(n), rng);
  const std::vector<int> ids = route(m.t);
  m.offset = (ids[0] / 32) * 32;  // token 0's first expert is local
  return m;
}

Tensor run_reference(MoeInputs& m) {
  const int64_t T = m.t.at("routing_logits").shape()[0];
  Tensor offset(DType::kInt32, {}), scaling(DType::kFloat32, {});
  offset.set_from_double(0, static_cast<double>(m.offset));
  scaling.set_from_double(0, 2.5);
  std::vector<DLTensor> ins;
  for (const char* n : {"routing_logits", "routing_bias", "hidden_states", "hidden_states_scale", "gemm1_weights",
                        "gemm1_weights_scale", "gemm2_weights", "gemm2_weights_scale"})
    ins.push_back(m.t.at(n).dl_view());
  ins.push_back(offset.dl_view());
  ins.push_back(scaling.dl_view());
  Tensor out(DType::kBFloat16, {T, kH});
  for (int64_t i = 0; i < out.numel(); ++i) out.data_as<uint16_t>()[i] = 0x7fc0;  // poisoned
  DLTensor o = out.dl_view();
  EXPECT_EQ(run(ins.data(), 10, &o, 1, nullptr), 0);
  return out;
}

double fp8(const Tensor& x, int64_t i) { return tensor::float8_e4m3fn_to_double(x.data_as<uint8_t>()[i]); }

// One token's output straight from the spec's formulas.
std::vector<double> direct_token(MoeInputs& m, int64_t t) {
  const int64_t T = m.t.at("routing_logits").shape()[0];
  std::vector<float> w;
  const std::vector<int> ids = route(m.t, &w);
  const Tensor &hs = m.t.at("hidden_states"), &w1 = m.t.at("gemm1_weights"), &w2 = m.t.at("gemm2_weights");
  const float* hss = m.t.at("hidden_states_scale").data_as<float>();
  const float* w1s = m.t.at("gemm1_weights_scale").data_as<float>();
  const float* w2s = m.t.at("gemm2_weights_scale").data_as<float>();
  std::vector<double> out(kH, 0.0), g1(2 * kI), c(kI);
  for (int n = 0; n < 8; ++n) {
    const int64_t le = ids[t * 8 + n] - m.offset;
    if (le < 0 || le >= 32) continue;
    for (int64_t r = 0; r < 2 * kI; ++r) {
      g1[r] = 0.0;
      for (int64_t k = 0; k < kH; ++k)
        g1[r] += fp8(hs, t * kH + k) * hss[(k / 128) * T + t] * fp8(w1, (le * 2 * kI + r) * kH + k) *
                 w1s[(le * (2 * kI / 128) + r / 128) * (kH / 128) + k / 128];
    }
    for (int64_t j = 0; j < kI; ++j) c[j] = g1[kI + j] / (1.0 + std::exp(-g1[kI + j])) * g1[j];
    for (int64_t h = 0; h < kH; ++h) {
      double o = 0.0;
      for (int64_t j = 0; j < kI; ++j)
        o += c[j] * fp8(w2, (le * kH + h) * kI + j) * w2s[(le * (kH / 128) + h / 128) * (kI / 128) + j / 128];
      out[h] += w[t * 8 + n] * o;
    }
  }
  return out;
}

TEST(MoeReferenceCpu, MatchesADirectPerTokenComputation) {
  const int64_t T = 6;
  MoeInputs m = small_inputs(T, 41);
  const Tensor out = run_reference(m);
  const std::vector<int> ids = route(m.t);
  const MoeLocalLoad load = moe_local_load(ids, m.offset);
  ASSERT_GT(load.pairs, 0);
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<double> want = direct_token(m, t);
    double scale = 0.0;
    for (double v : want) scale = std::max(scale, std::abs(v));
    for (int64_t h = 0; h < kH; ++h) {
      const double got = tensor::bfloat16_to_double(out.data_as<uint16_t>()[t * kH + h]);
      ASSERT_NEAR(got, want[h], 1e-6 * scale + 4e-3 * std::abs(want[h])) << "token " << t << " h " << h;
    }
  }
  int nonzero = 0;  // token 0 has a local expert by construction: its output is not all zero
  for (int64_t h = 0; h < kH; ++h) nonzero += tensor::bfloat16_to_double(out.data_as<uint16_t>()[h]) != 0.0;
  EXPECT_GT(nonzero, kH / 2);
}

TEST(MoeReferenceCpu, TokensWithoutALocalExpertGetExactZeros) {
  const int64_t T = 12;
  MoeInputs m = small_inputs(T, 42);
  const std::vector<int> ids = route(m.t);
  // Move the shard to a group that token 0 did not keep, so that at least token 0 has no local expert.
  std::set<int> groups;
  for (int n = 0; n < 8; ++n) groups.insert(ids[n] / 32);
  for (int g = 0; g < 8; ++g)
    if (!groups.count(g)) {
      m.offset = 32 * g;
      break;
    }
  const Tensor out = run_reference(m);
  int zero_tokens = 0;
  for (int64_t t = 0; t < T; ++t) {
    bool local = false;
    for (int n = 0; n < 8; ++n) local |= ids[t * 8 + n] / 32 == m.offset / 32;
    if (local) continue;
    ++zero_tokens;
    for (int64_t h = 0; h < kH; ++h) ASSERT_EQ(out.data_as<uint16_t>()[t * kH + h] & 0x7fff, 0) << "token " << t;
  }
  EXPECT_GE(zero_tokens, 1);
}

}  // namespace
}  // namespace kda::contest
