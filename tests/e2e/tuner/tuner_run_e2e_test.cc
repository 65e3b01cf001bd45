// End to end with no LLM: `kda run tasks/host/rmsnorm --writer tuner --reviewer rules` with the
// real evaluator. The tuner's plan names tunables and regimes and the rules reviewer approves it;
// round 1 (coarse search) is verified and accepted on a confirmed claim; the run ends done with a
// final solution that kda's completion check passes on all workloads, faster than the baseline,
// and that the unchanged `kda eval` also passes on the hidden holdout. Timings are the pack's own
// (what the main job runs), so this can fail if tuning does not make RMSNorm faster.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "proc/subprocess.h"
#include "util/fs.h"

namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

const stdfs::path kSource = KDA_SOURCE_DIR;
const stdfs::path kPack = kSource / "tasks/host/rmsnorm";

json read_json(const stdfs::path& p) {
  auto t = kda::fs::read_file(p);
  return t.ok() ? json::parse(*t, nullptr, false) : json();
}

kda::proc::RunResult run(const std::vector<std::string>& argv, const stdfs::path& cache) {
  kda::proc::RunOptions o;
  o.argv = argv;
  auto env = kda::proc::current_environment();
  env.push_back("KDA_CACHE_DIR=" + cache.string());
  o.env = env;
  o.timeout_seconds = 600;
  auto r = kda::proc::run(o);
  EXPECT_TRUE(r.ok());
  return r.ok() ? *r : kda::proc::RunResult{};
}

TEST(TunerRunE2E, TunerWriterAndRulesReviewerMakeRmsnormFasterOffline) {
  auto d = kda::fs::make_temp_dir(stdfs::temp_directory_path(), "kda-tuner-e2e");
  ASSERT_TRUE(d.ok());
  const stdfs::path tmp = *d, run_dir = tmp / "run";
  auto r = run({KDA_BINARY, "run", kPack.string(), "--writer", "tuner", "--reviewer", "rules", "--run-dir",
                run_dir.string(), "--json"},
               tmp / "cache");
  ASSERT_EQ(r.exit.exit_code, 0) << r.stdout_text << "\n" << r.stderr_text;

  json state = read_json(run_dir / "state.json");
  EXPECT_EQ(state["phase"], "done") << state.dump(1);
  // The plan: starts from the pack's tunable solution (the baseline has no tunables.toml), approved.
  auto plan = kda::fs::read_file(run_dir / "plan/plan.md");
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(plan->find("Tunables: "), std::string::npos);
  EXPECT_NE(plan->find("solutions/tunable"), std::string::npos);
  auto review = kda::fs::read_file(run_dir / "plan/review_1.md");
  ASSERT_TRUE(review.ok());
  EXPECT_NE(review->find("PLAN: APPROVE"), std::string::npos);
  // Round 1: the claim is the tuner's measurement and kda confirms it; the round advances.
  json v1 = read_json(run_dir / "rounds/001/verify.json");
  EXPECT_TRUE(v1["verified"].get<bool>()) << v1.dump(1);
  ASSERT_EQ(v1["claims"].size(), 1u);
  EXPECT_EQ(v1["claims"][0]["metric"], "geomean_speedup");
  EXPECT_EQ(v1["claims"][0]["status"], "confirmed");
  json d1 = read_json(run_dir / "rounds/001/verdict.json");
  EXPECT_TRUE(d1["well_formed"].get<bool>());
  EXPECT_EQ(d1["progress"], "ADVANCED");
  // The round says how the dispatcher routes shapes outside every regime, and what its fallback is.
  json f1 = read_json(run_dir / "rounds/001/finish.json");
  const std::string summary1 = f1.value("summary", std::string());
  EXPECT_NE(summary1.find("Unseen shapes: "), std::string::npos) << summary1;
  EXPECT_NE(summary1.find("Fallback: "), std::string::npos) << summary1;
  // Every round's verdict is well formed and no claim was false.
  for (const auto& e : stdfs::directory_iterator(run_dir / "rounds")) {
    if (e.path().filename() == "000") continue;
    json v = read_json(e.path() / "verdict.json");
    EXPECT_TRUE(v.value("well_formed", false)) << e.path();
    for (const auto& c : read_json(e.path() / "verify.json")["claims"]) EXPECT_NE(c["status"], "false") << e.path();
  }
  // The completion check on all workloads, then the official evaluator on the holdout.
  json check = read_json(run_dir / "final/check.json");
  EXPECT_TRUE(check["met"].get<bool>()) << check.dump(1);
  EXPECT_TRUE(check["eval"]["all_passed"].get<bool>());
  EXPECT_EQ(check["eval"]["workloads"].size(), 11u);
  EXPECT_GT(check["eval"]["geomean"].get<double>(), 1.0);
  auto h = run({KDA_BINARY, "eval", (run_dir / "final").string(), "--task", kPack.string(), "--holdout", "--json"},
               tmp / "cache");
  ASSERT_EQ(h.exit.exit_code, 0) << h.stderr_text;
  json holdout = json::parse(h.stdout_text, nullptr, false);
  ASSERT_TRUE(holdout.is_object()) << h.stdout_text;
  EXPECT_TRUE(holdout["all_passed"].get<bool>()) << h.stderr_text;
  if (!HasFailure()) stdfs::remove_all(tmp);
}

}  // namespace
