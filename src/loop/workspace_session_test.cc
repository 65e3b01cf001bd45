// kda mcp --workspace --task: the evaluate and ledger tools of a session kda does not drive, as the
// agent calls them through KdaToolHost (the MCP server only forwards).
#include "loop/workspace_session.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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
}

}  // namespace
}  // namespace kda::loop
