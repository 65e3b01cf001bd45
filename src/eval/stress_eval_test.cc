// Stress inputs end to end on the host (task.toml [inputs] stress, contest/stress.h): the contest's GDN
// prefill definition as a host pack judged by its CPU reference, with two candidates that are right on
// the random draws and wrong on real runs' extremes. A decay table in half precision rounds a gate of
// 0.9998 to 1 (the state never forgets); a sigmoid clamped to the range random b covers turns beta = 0.998
// into 0.97. Without stress inputs both PASS; with them each is INCORRECT_NUMERICAL naming its stress,
// and the CPU reference itself passes every stress. The candidates are the reference's own source with
// one line changed, made here so the twins differ in exactly that line.
#include <gtest/gtest.h>

#include <filesystem>

#include "eval/evaluator.h"
#include "eval/gates.h"
#include "task/solution.h"
#include "task/task_pack.h"
#include "util/fs.h"

namespace kda::eval {
namespace {

namespace stdfs = std::filesystem;

const stdfs::path kContestPack = stdfs::path(KDA_SOURCE_DIR) / "tasks/contest/gdn_prefill_qk4_v8_d128_k_last";
constexpr const char* kGateLine = "g[t * HV + h] = std::exp(-std::exp(static_cast<double>(alog[h])) * softplus(x));";
constexpr const char* kBetaLine =
    "beta[t * HV + h] = 1.0 / (1.0 + std::exp(-static_cast<double>(bf16_to_float(bp[t * HV + h]))));";

class StressEval : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-stress");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
  }
  void TearDown() override { stdfs::remove_all(dir_); }

  // The host pack: the contest definition, two workloads of 300 tokens (one sequence; three), the CPU
  // reference as reference and baseline, the gdn_prefill generator and `stress`.
  task::TaskPack pack(const std::string& stress) {
    const stdfs::path p = dir_ / ("pack" + std::to_string(++packs_));
    stdfs::create_directories(p / "baselines");
    stdfs::copy(kContestPack / "definition.json", p / "definition.json");
    stdfs::copy(kContestPack / "reference_cpu", p / "reference", stdfs::copy_options::recursive);
    stdfs::copy(kContestPack / "reference_cpu", p / "baselines/cpu", stdfs::copy_options::recursive);
    std::string workloads;
    for (const auto& [uuid, n] : {std::pair{"stress-one-seq", 1}, std::pair{"stress-three-seqs", 3}}) {
      std::string inputs;
      for (const char* name : {"q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "cu_seqlens"})
        inputs += std::string("\"") + name + "\": {\"type\": \"random\"}, ";
      workloads += std::string("{\"definition\": \"gdn_prefill_qk4_v8_d128_k_last\", \"workload\": {\"uuid\": \"") +
                   uuid + "\", \"axes\": {\"total_seq_len\": 300, \"num_seqs\": " + std::to_string(n) +
                   ", \"len_cu_seqlens\": " + std::to_string(n + 1) + "}, \"inputs\": {" + inputs +
                   "\"scale\": {\"type\": \"scalar\", \"value\": 0.08838834764831843}}}}\n";
    }
    EXPECT_TRUE(fs::write_file_atomic(p / "workloads.jsonl", workloads).ok());
    EXPECT_TRUE(fs::write_file_atomic(p / "task.toml",
                                      "[evaluation]\nbackend = \"host\"\natol = 1e-2\nrtol = 1e-2\n"
                                      "compare_outputs = [\"output\", \"new_state\"]\n"
                                      "[timing]\nwarmup = 0\niterations = 1\ntrials = 1\n"
                                      "[policy]\ndeterminism = \"tolerance\"\n[baseline]\nname = \"cpu\"\n"
                                      "[inputs]\ngenerator = \"gdn_prefill\"\nstress = [" +
                                          stress + "]\n")
                    .ok());
    auto loaded = task::load_task_pack(p);
    EXPECT_TRUE(loaded.ok()) << loaded.status().message();
    return loaded.ok() ? std::move(*loaded) : task::TaskPack{};
  }

  // The CPU reference with `line` replaced by `with` (empty: unchanged).
  task::Solution candidate(const std::string& name, const std::string& line, const std::string& with) {
    const stdfs::path c = dir_ / (name + std::to_string(++candidates_));
    stdfs::copy(kContestPack / "reference_cpu", c, stdfs::copy_options::recursive);
    if (!line.empty()) {
      std::string src = *fs::read_file(c / "kernel.cc");
      const size_t at = src.find(line);
      EXPECT_NE(at, std::string::npos) << "the reference's line changed: " << line;
      if (at != std::string::npos) src.replace(at, line.size(), with);
      EXPECT_TRUE(fs::write_file_atomic(c / "kernel.cc", src).ok());
    }
    auto s = task::load_solution(c);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? *s : task::Solution{};
  }

  EvalReport evaluate_on(const task::TaskPack& p, const task::Solution& s) {
    EvalOptions o;
    o.runner_binary = KDA_RUNNER;
    o.seed = seed_;
    auto r = evaluate(p, s, o);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : EvalReport{};
  }

  stdfs::path dir_;
  int packs_ = 0, candidates_ = 0;
  uint64_t seed_ = 4242;
};

// Rounds the gate to half precision (11 significant bits), as a decay table in fp16 would hold it.
const std::string kHalfGate =
    "{ int e2 = 0; const double m = std::frexp(std::exp(-std::exp(static_cast<double>(alog[h])) * softplus(x)), "
    "&e2); g[t * HV + h] = std::ldexp(std::nearbyint(m * 2048.0) / 2048.0, e2); }";
// A sigmoid only over the b that random draws give (|b| <= 3.5).
const std::string kClampedBeta =
    "beta[t * HV + h] = 1.0 / (1.0 + std::exp(-std::fmax(-3.5, std::fmin(3.5, "
    "static_cast<double>(bf16_to_float(bp[t * HV + h]))))));";

const WorkloadResult* failed(const EvalReport& r) {
  for (const auto& w : r.workloads)
    if (w.verdict != Verdict::kPassed) return &w;
  return nullptr;
}

TEST_F(StressEval, WithoutStressInputsBothShortcutsPass) {
  const task::TaskPack p = pack("");
  for (const auto& [name, line, with] :
       {std::tuple{"half_gate", kGateLine, kHalfGate}, std::tuple{"clamped_beta", kBetaLine, kClampedBeta}}) {
    const EvalReport r = evaluate_on(p, candidate(name, line, with));
    ASSERT_EQ(r.workloads.size(), 2u);
    EXPECT_TRUE(r.all_passed) << name << ": " << (failed(r) ? failed(r)->message : "");
    for (const auto& w : r.workloads)
      for (const auto& g : w.gates)
        if (g.name == "stress") {
          EXPECT_EQ(g.status, GateStatus::kSkipped);
        }
  }
}

TEST_F(StressEval, TheReferencePassesEveryStressAndEachShortcutFailsOne) {
  const task::TaskPack p = pack(
      "\"decay_near_one\", \"decay_near_zero\", \"beta_saturated\", \"keys_parallel\", \"chunk_boundaries\", "
      "\"empty_sequences\"");
  const EvalReport honest = evaluate_on(p, candidate("honest", "", ""));
  EXPECT_TRUE(honest.all_passed) << (failed(honest) ? failed(honest)->message : "");
  for (const auto& w : honest.workloads)
    for (const auto& g : w.gates)
      if (g.name == "stress") {
        EXPECT_EQ(g.status, GateStatus::kPass);
        EXPECT_NE(g.detail.find("empty_sequences"), std::string::npos) << g.detail;
      }
  // Both fail a stress (a clamped beta may already fail slow decay: with a long memory, its error on the
  // few |b| > 3.5 of a random draw stays in the state).
  for (const auto& [name, line, with] :
       {std::tuple{"half_gate", kGateLine, kHalfGate}, std::tuple{"clamped_beta", kBetaLine, kClampedBeta}}) {
    const EvalReport r = evaluate_on(p, candidate(name, line, with));
    const WorkloadResult* w = failed(r);
    ASSERT_NE(w, nullptr) << name << " passed every stress";
    EXPECT_EQ(w->verdict, Verdict::kIncorrectNumerical) << name;
    EXPECT_EQ(w->reason, "stress_mismatch") << name << ": " << w->message;
  }
}

// Each shortcut on a pack with only the stress that is about it: that stress catches it, by name.
TEST_F(StressEval, EachShortcutFailsItsOwnStress) {
  for (const auto& [name, line, with, stress] :
       {std::tuple{"half_gate", kGateLine, kHalfGate, "decay_near_one"},
        std::tuple{"clamped_beta", kBetaLine, kClampedBeta, "beta_saturated"}}) {
    const task::TaskPack p = pack(std::string("\"") + stress + "\"");
    const EvalReport r = evaluate_on(p, candidate(name, line, with));
    const WorkloadResult* w = failed(r);
    ASSERT_NE(w, nullptr) << name << " passed " << stress;
    EXPECT_EQ(w->verdict, Verdict::kIncorrectNumerical) << name;
    EXPECT_EQ(w->reason, "stress_mismatch") << name << ": " << w->message;
    EXPECT_NE(w->message.find(std::string("stress input '") + stress + "'"), std::string::npos)
        << name << ": " << w->message;
  }
}

TEST_F(StressEval, AStressTheGeneratorDoesNotHaveIsThePacksErrorNamed) {
  const task::TaskPack p = pack("\"ties\"");
  EvalOptions o;
  o.runner_binary = KDA_RUNNER;
  auto r = evaluate(p, candidate("honest", "", ""), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput);
  EXPECT_NE(r.status().message().find("[inputs] stress 'ties' is not a stress of generator 'gdn_prefill'"),
            std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("known: decay_near_one"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace kda::eval
