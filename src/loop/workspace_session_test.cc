// kda mcp --workspace --task: the evaluate and ledger tools of a session kda does not drive, as the
// agent calls them through KdaToolHost (the MCP server only forwards).
#include "loop/workspace_session.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "loop/fake_ncu.h"
#include "task/task_pack.h"
#include "util/fs.h"

namespace kda::loop {
namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

const stdfs::path kSource = KDA_SOURCE_DIR;

class WorkspaceSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-workspace-session");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
    stdfs::copy(kSource / "tasks/host/rmsnorm", dir_ / "pack", stdfs::copy_options::recursive);
    stdfs::copy(kSource / "tests/fixtures/solutions/host_rmsnorm/fast", dir_ / "ws", stdfs::copy_options::recursive);
  }
  void TearDown() override { stdfs::remove_all(dir_); }

  WorkspaceSessionOptions options(int max_evals) {
    WorkspaceSessionOptions o;
    o.workspace = dir_ / "ws";
    o.pack = dir_ / "pack";
    o.runner_binary = KDA_RUNNER;
    o.max_evals = max_evals;
    o.log = dir_ / "evaluations.jsonl";
    return o;
  }
  // One dev workload keeps each evaluation short.
  std::string first_dev() {
    auto pack = task::load_task_pack(dir_ / "pack");
    EXPECT_TRUE(pack.ok());
    return pack->dev_uuids.front();
  }

  stdfs::path dir_;
};

TEST_F(WorkspaceSessionTest, EvaluateGivesTheOfficialVerdictAndTheLedgerKeepsTheBest) {
  auto o = options(2);
  o.workloads = first_dev();
  auto session = WorkspaceSession::open(o);
  ASSERT_TRUE(session.ok()) << session.status().message();
  KdaToolHost host((*session)->hooks());
  host.begin_round((*session)->max_evals());
  bool has_evaluate = false, has_finish = false;
  for (const auto& t : host.tools()) {
    has_evaluate = has_evaluate || t.name == "evaluate";
    has_finish = has_finish || t.name == "finish_round";
  }
  EXPECT_TRUE(has_evaluate);
  EXPECT_FALSE(has_finish) << "a session without rounds has nothing to finish";

  auto first = host.call("evaluate", json::object());
  ASSERT_FALSE(first.is_error) << first.text;
  EXPECT_NE(first.text.find("PASSED"), std::string::npos) << first.text;
  EXPECT_NE(first.text.find("calls left this session: 1"), std::string::npos) << first.text;
  EXPECT_TRUE(first.data["all_passed"].get<bool>());

  // The agent breaks its kernel: the next evaluation says so, and the incumbent stays the first.
  std::ofstream(dir_ / "ws" / "kernel.cc", std::ios::app) << "\n#error broken by the agent\n";
  auto second = host.call("evaluate", json::object());
  ASSERT_FALSE(second.is_error) << second.text;
  EXPECT_NE(second.text.find("COMPILE_ERROR"), std::string::npos) << second.text;
  auto ledger = json::parse(host.call("ledger", json::object()).text);
  EXPECT_EQ(ledger["incumbent"], "e1") << ledger.dump();
  EXPECT_EQ(ledger["candidates_total"], 2);

  auto third = host.call("evaluate", json::object());
  EXPECT_TRUE(third.is_error);
  EXPECT_NE(third.text.find("no evaluations left in this session"), std::string::npos) << third.text;

  // Every evaluation is in the log, outside the workspace.
  auto log = fs::read_file(dir_ / "evaluations.jsonl");
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(std::count(log->begin(), log->end(), '\n'), 2);
}

TEST_F(WorkspaceSessionTest, AChangedPackFailsTheEvaluation) {
  auto o = options(3);
  o.workloads = first_dev();
  auto session = WorkspaceSession::open(o);
  ASSERT_TRUE(session.ok()) << session.status().message();
  // Loosening the tolerance after the session started is what a cheating agent would do.
  std::ofstream(dir_ / "pack" / "task.toml", std::ios::app) << "\n# edited\n";
  auto r = (*session)->evaluate();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("task.toml"), std::string::npos) << r.status().message();
}

// With --profiles the session offers `profile`: the workspace's solution under ncu (a fake one that
// runs the real runner), the report kept in the profiles directory (a second profile of the same
// workload beside the first), its advice returned; at most max_profiles calls, a holdout or unknown
// workload refused without using one up.
TEST_F(WorkspaceSessionTest, ProfileKeepsReportsOutsideTheWorkspaceWithinItsBudget) {
  auto o = options(1);
  o.profiles_dir = dir_ / "profiles";
  o.max_profiles = 2;
  o.ncu = testing_fixture::write_fake_ncu(dir_ / "bin", dir_ / "ncu-argv", kSource / "src/ncu/testdata/saxpy.ncu-rep")
              .string();
  auto session = WorkspaceSession::open(o);
  ASSERT_TRUE(session.ok()) << session.status().message();
  KdaToolHost host((*session)->hooks());
  host.begin_round((*session)->max_evals());
  bool offered = false;
  for (const auto& t : host.tools()) offered = offered || t.name == "profile";
  ASSERT_TRUE(offered);

  auto pack = task::load_task_pack(dir_ / "pack");
  ASSERT_TRUE(pack.ok());
  ASSERT_FALSE(pack->holdout.empty());
  auto holdout = host.call("profile", {{"workload", pack->holdout.front().uuid}});
  EXPECT_TRUE(holdout.is_error);
  EXPECT_EQ(holdout.data["error"], "bad_arguments") << holdout.text;
  EXPECT_NE(holdout.text.find("is not in the task's workloads.jsonl"), std::string::npos) << holdout.text;

  const std::string uuid = first_dev();
  for (int i = 1; i <= 2; ++i) {
    auto r = host.call("profile", json::object());
    ASSERT_FALSE(r.is_error) << r.text;
    EXPECT_NE(r.text.find("Profiled workload " + uuid), std::string::npos) << r.text;
    EXPECT_EQ(r.data["profiles_left"], 2 - i);
  }
  const std::string stem = uuid.substr(0, 8);
  EXPECT_TRUE(stdfs::exists(dir_ / "profiles" / (stem + ".ncu-rep")));
  EXPECT_TRUE(stdfs::exists(dir_ / "profiles" / (stem + "-2.ncu-rep")));
  auto record = json::parse(*fs::read_file(dir_ / "profiles" / (stem + ".json")));
  EXPECT_TRUE(record["ok"].get<bool>()) << record.dump();
  EXPECT_EQ(record["workload"], uuid);
  EXPECT_FALSE(stdfs::exists(dir_ / "ws" / (stem + ".ncu-rep")));  // nothing lands in the workspace

  auto third = host.call("profile", json::object());
  EXPECT_TRUE(third.is_error);
  EXPECT_EQ(third.data["error"], "profile_limit") << third.text;
}

TEST_F(WorkspaceSessionTest, BadOptionsAreClearErrors) {
  auto o = options(0);
  auto zero = WorkspaceSession::open(o);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("--max-evals"), std::string::npos);
  o = options(1);
  o.pack = dir_ / "no-such-pack";
  auto missing = WorkspaceSession::open(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no-such-pack"), std::string::npos) << missing.status().message();
  o = options(1);
  o.workspace = dir_ / "nowhere";
  auto no_ws = WorkspaceSession::open(o);
  ASSERT_FALSE(no_ws.ok());
  EXPECT_NE(no_ws.status().message().find("nowhere"), std::string::npos);
  o = options(1);
  o.profiles_dir = dir_ / "profiles";
  o.max_profiles = 0;
  auto no_profiles = WorkspaceSession::open(o);
  ASSERT_FALSE(no_profiles.ok());
  EXPECT_NE(no_profiles.status().message().find("--max-profiles"), std::string::npos) << no_profiles.status().message();
}

}  // namespace
}  // namespace kda::loop
