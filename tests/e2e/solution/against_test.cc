// kda eval A --against B (issue 21 item 2): --pairs evaluations, each in fresh runner processes on
// fresh seeds, B timed interleaved as the baseline; the geomean ratio with a 95 % interval over the
// evaluations and whether it excludes 1. A clearly faster solution (host rmsnorm's fast fixture,
// about 1.5x) is "faster" with the whole interval above 1; the option's misuse is exit 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "proc/subprocess.h"

namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

const stdfs::path kSource = KDA_SOURCE_DIR;

kda::proc::RunResult kda_eval(const std::vector<std::string>& extra) {
  kda::proc::RunOptions o;
  o.argv = {KDA_BINARY,
            "eval",
            (kSource / "tests/fixtures/solutions/host_rmsnorm/fast").string(),
            "--task",
            (kSource / "tasks/host/rmsnorm").string(),
            "--quiet"};
  o.argv.insert(o.argv.end(), extra.begin(), extra.end());
  o.timeout_seconds = 300;
  auto r = kda::proc::run(o);
  EXPECT_TRUE(r.ok());
  return r.ok() ? *r : kda::proc::RunResult{};
}

TEST(Against, AFasterSolutionIsFasterOverFreshProcessPairs) {
  const std::string naive = (kSource / "tasks/host/rmsnorm/baselines/naive").string();
  auto r = kda_eval({"--against", naive, "--pairs", "3", "--trials", "2", "--iterations", "10", "--json"});
  ASSERT_EQ(r.exit.exit_code, 0) << r.stderr_text;
  json j = json::parse(r.stdout_text, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.stdout_text;
  EXPECT_EQ(j["against"], "host_rmsnorm_f32_naive");
  EXPECT_EQ(j["pairs"], 3);
  ASSERT_EQ(j["runs"].size(), 3u);
  ASSERT_EQ(j["geomean_ratios"].size(), 3u);
  EXPECT_NE(j["runs"][0]["seed"], j["runs"][1]["seed"]) << "each evaluation draws its own seed";
  EXPECT_EQ(j["verdict"], "faster") << j["ci95"].dump();
  EXPECT_GT(j["ci95"][0].get<double>(), 1.0);
  EXPECT_FALSE(j["workloads"].empty());
  for (const auto& w : j["workloads"]) EXPECT_EQ(w["ratios"].size(), 3u);
}

TEST(Against, MisuseIsExitTwo) {
  const std::string naive = (kSource / "tasks/host/rmsnorm/baselines/naive").string();
  auto one = kda_eval({"--against", naive, "--pairs", "1"});
  EXPECT_EQ(one.exit.exit_code, 2);
  EXPECT_NE(one.stderr_text.find("--pairs must be an integer in 2..50"), std::string::npos) << one.stderr_text;
  auto both = kda_eval({"--against", naive, "--baseline", naive});
  EXPECT_EQ(both.exit.exit_code, 2);
  EXPECT_NE(both.stderr_text.find("drop --baseline"), std::string::npos) << both.stderr_text;
  auto missing = kda_eval({"--against", "/nonexistent/solution"});
  EXPECT_EQ(missing.exit.exit_code, 2);
  EXPECT_NE(missing.stderr_text.find("--against /nonexistent/solution"), std::string::npos) << missing.stderr_text;
}

}  // namespace
