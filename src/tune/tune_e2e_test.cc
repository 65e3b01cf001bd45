// `kda tune` end to end on tasks/host/rmsnorm with a small budget; the dispatcher it writes must
// pass the unchanged `kda eval --workloads all` (and the holdout).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

int run(const std::string& cmd, std::string* out = nullptr) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  int rc = pclose(p);
  if (out) *out = text;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(TuneE2e, HostRmsnormDispatcherPassesKdaEvalOnAllWorkloads) {
  const std::string src = KDA_SOURCE_DIR;
  const std::string kda = KDA_BINARY;
  const auto out = std::filesystem::temp_directory_path() / ("kda_tune_e2e_" + std::to_string(::getpid()));
  std::filesystem::remove_all(out);
  const std::string pack = src + "/tasks/host/rmsnorm";
  std::string json;
  int rc = run(kda + " tune " + pack + "/solutions/tunable --task " + pack + " --out " + out.string() +
                   " --workloads all --max-configs 8 --json --quiet",
               &json);
  ASSERT_EQ(rc, 0) << json;
  auto j = nlohmann::json::parse(json, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json;
  EXPECT_TRUE(j["dispatcher_passed"].get<bool>());
  EXPECT_GE(j["configs_measured"].get<int>(), 2);
  EXPECT_GT(j["dispatcher_geomean_ms"].get<double>(), 0);
  EXPECT_GT(j["baseline_geomean_ms"].get<double>(), 0);
  ASSERT_TRUE(std::filesystem::exists(out / "map.json"));
  ASSERT_TRUE(std::filesystem::exists(out / "map.md"));
  ASSERT_TRUE(std::filesystem::exists(out / "state.json"));
  std::string eval_out;
  rc = run(kda + " eval " + (out / "dispatcher").string() + " --task " + pack +
               " --workloads all --quiet --trials 1 --iterations 5 2>&1",
           &eval_out);
  EXPECT_EQ(rc, 0) << eval_out;
  rc =
      run(kda + " eval " + (out / "dispatcher").string() + " --task " + pack + " --holdout --quiet --iterations 0 2>&1",
          &eval_out);
  EXPECT_EQ(rc, 0) << eval_out;
  // Resume measures nothing new: every measurement is in state.json already.
  std::string again;
  rc = run(kda + " tune " + pack + "/solutions/tunable --task " + pack + " --out " + out.string() +
               " --workloads all --max-configs 8 --resume --no-final 2>&1 >/dev/null",
           &again);
  EXPECT_EQ(rc, 0) << again;
  EXPECT_EQ(again.find("rung 0 ["), std::string::npos) << again;
  std::filesystem::remove_all(out);
}

}  // namespace
