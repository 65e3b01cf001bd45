// The writer's `profile` tool: KdaToolHost on its own (arguments, budget, ncu missing, hook errors)
// and inside a scripted `kda run` on the host RMSNorm pack with a fake ncu (a shell script that
// records its argv, copies a fixture report to where -o says and execs the real kda-runner).
#include <sys/stat.h>

#include <fstream>

#include "loop/fake_ncu.h"
#include "loop/kda_tools.h"
#include "loop/run_loop_fixture.h"
#include "task/task_pack.h"

namespace kda::loop::testing_fixture {
namespace {

const stdfs::path kRmsnorm = stdfs::path(KDA_SOURCE_DIR) / "tasks/host/rmsnorm";
const stdfs::path kSaxpy = stdfs::path(KDA_SOURCE_DIR) / "src/ncu/testdata/saxpy.ncu-rep";

// The argv of each recorded fake-ncu invocation.
std::vector<std::vector<std::string>> recorded_runs(const stdfs::path& record) {
  std::vector<std::vector<std::string>> runs(1);
  std::ifstream in(record);
  for (std::string line; std::getline(in, line);) {
    if (line == "--")
      runs.emplace_back();
    else
      runs.back().push_back(line);
  }
  runs.pop_back();
  return runs;
}

std::string value_after(const std::vector<std::string>& v, const std::string& opt) {
  for (size_t i = 0; i + 1 < v.size(); ++i)
    if (v[i] == opt) return v[i + 1];
  return "";
}

// Audit records: of `type`, or agent_event tool_call records of tool `tool` (with their actor).
std::vector<json> audit_records(const stdfs::path& audit, const std::string& type, const std::string& tool = "") {
  std::vector<json> out;
  auto text = fs::read_file(audit);
  EXPECT_TRUE(text.ok());
  if (!text.ok()) return out;
  size_t start = 0;
  for (size_t nl; (nl = text->find('\n', start)) != std::string::npos; start = nl + 1) {
    json r = json::parse(text->substr(start, nl - start), nullptr, false);
    if (r.is_discarded() || r.value("type", "") != type) continue;
    json d = r["data"];
    if (!tool.empty() && !(d.value("kind", "") == "tool_call" && d["detail"].value("name", "") == tool)) continue;
    d["actor"] = r["actor"];
    out.push_back(d);
  }
  return out;
}

bool offers(const KdaToolHost& h, const std::string& name) {
  for (const auto& t : h.tools())
    if (t.name == name) return true;
  return false;
}

// ---- KdaToolHost alone ------------------------------------------------------------------------------

TEST(ProfileTool, MissingNcuIsAClearErrorAndCostsNothing) {
  int calls = 0;
  KdaToolHost host(KdaToolHost::Hooks{
      .profile = [&](const ProfileRequest&) -> Result<ProfileTaken> {
        ++calls;
        return Status::internal("must not run");
      },
      .ncu = "/nonexistent/ncu",
      .max_profiles_per_round = 1,
  });
  EXPECT_FALSE(offers(host, "profile"));  // writers only, inside a round
  host.begin_round(1);
  ASSERT_TRUE(offers(host, "profile"));
  for (const auto& t : host.tools()) {
    if (t.name == "profile") {
      EXPECT_FALSE(t.read_only);
    }
  }
  for (int i = 0; i < 2; ++i) {  // not found twice: the budget of 1 is not used up by it
    auto o = host.call("profile", json::object());
    EXPECT_TRUE(o.is_error);
    EXPECT_NE(o.text.find("ncu not found: install Nsight Compute or pass --ncu"), std::string::npos) << o.text;
    EXPECT_NE(o.text.find("/nonexistent/ncu"), std::string::npos) << o.text;
    EXPECT_EQ(o.data["error"], "ncu_not_found");
  }
  EXPECT_EQ(calls, 0);
  host.end_round();
  EXPECT_FALSE(offers(host, "profile"));
  EXPECT_TRUE(host.call("profile", json::object()).is_error);
}

TEST(ProfileTool, ArgumentsBudgetAndHookErrors) {
  auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-profile-tool");
  ASSERT_TRUE(d.ok());
  const stdfs::path ncu = write_fake_ncu(*d, *d / "record", kSaxpy);  // found, never run here
  std::vector<ProfileRequest> seen;
  KdaToolHost host(KdaToolHost::Hooks{
      .profile = [&](const ProfileRequest& r) -> Result<ProfileTaken> {
        seen.push_back(r);
        if (r.workload == "unknown")
          return Status::not_found("workload 'unknown' is not in the task's workloads.jsonl");
        if (r.workload == "broken") return Status::failed("solution 'x' does not build:\nerror: expected ';'");
        const stdfs::path rep = *d / "r.ncu-rep";
        stdfs::copy_file(kSaxpy, rep, stdfs::copy_options::overwrite_existing);
        return ProfileTaken{r.workload.empty() ? "w-default" : r.workload, rep, "shown/r.ncu-rep"};
      },
      .ncu = ncu.string(),
      .max_profiles_per_round = 2,
      .max_profile_chars = 4000,
  });
  host.begin_round(0);
  EXPECT_EQ(host.call("profile", {{"workload", 3}}).data["error"], "bad_arguments");
  EXPECT_EQ(host.call("profile", {{"kernel", "x"}}).data["error"], "bad_arguments");
  auto unknown = host.call("profile", {{"workload", "unknown"}});  // refused by the hook: no budget used
  EXPECT_TRUE(unknown.is_error);
  EXPECT_EQ(unknown.data["error"], "bad_arguments");
  auto broken = host.call("profile", {{"workload", "broken"}});  // ran and failed: budget used
  EXPECT_TRUE(broken.is_error);
  EXPECT_EQ(broken.data["error"], "profile_failed");
  EXPECT_NE(broken.text.find("expected ';'"), std::string::npos);
  auto ok = host.call("profile", json::object());
  ASSERT_FALSE(ok.is_error) << ok.text;
  EXPECT_NE(ok.text.find("report: shown/r.ncu-rep"), std::string::npos) << ok.text;
  EXPECT_NE(ok.text.find("Priorities"), std::string::npos) << ok.text;
  EXPECT_NE(ok.text.find("[truncated:"), std::string::npos);  // bounded at 4000 characters
  EXPECT_LT(ok.text.size(), 4400u);
  EXPECT_EQ(ok.data["workload"], "w-default");
  EXPECT_EQ(ok.data["profiles_left"], 0);
  ASSERT_FALSE(ok.data["kernels"].empty());
  EXPECT_FALSE(ok.data["kernels"][0]["priorities"].empty());
  auto third = host.call("profile", json::object());
  EXPECT_TRUE(third.is_error);
  EXPECT_EQ(third.data["error"], "profile_limit");
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].ncu, stdfs::absolute(ncu));
  EXPECT_EQ(seen[1].index, 1);
  EXPECT_EQ(seen[2].index, 2);
  host.begin_round(0);  // a new round has a fresh budget
  EXPECT_FALSE(host.call("profile", json::object()).is_error);
  stdfs::remove_all(*d);
}

// ---- inside a scripted run ----------------------------------------------------------------------------

TEST_F(RunLoopTest, WriterProfilesIntoTheRoundDirectory) {
  auto pack = task::load_task_pack(kRmsnorm);
  ASSERT_TRUE(pack.ok()) << pack.status().message();
  const std::string first_dev = pack->dev_uuids.front();
  const std::string other = pack->workloads.back().uuid;
  ASSERT_NE(first_dev, other);
  const stdfs::path record = tmp_ / "ncu-argv.txt";
  const stdfs::path ncu = write_fake_ncu(tmp_ / "bin", record, kSaxpy);

  for (const auto& p : plan_sessions()) sessions_.push_back(p);
  json profile_default = {{"tool", "profile"}};
  json profile_other = {{"tool", "profile"}, {"arguments", {{"workload", other}}}};
  json analyze = {{"tool", "ncu_analyze"},
                  {"arguments",
                   {{"report", (run_ / "rounds/001/profiles" / (first_dev.substr(0, 8) + ".ncu-rep")).string()},
                    {"max_priorities", 1}}}};
  sessions_.push_back(
      writer_session("round", 1,
                     json::array({profile_default, profile_other, analyze, write_kernel(4.0), profile_default,
                                  finish("profiled", json::array({geomean_claim(4.0)}))})));
  sessions_.push_back(reviewer_session("review", 1, "DECISION: COMPLETE\nPROGRESS: ADVANCED"));
  LoopOptions opts = options();
  opts.task = kRmsnorm;
  opts.max_profiles_per_round = 2;  // opt in (the default is 0: profiled code runs unsandboxed)
  LoopEnv e = env();
  e.runner_binary = stdfs::path(KDA_BINARY_DIR) / "kda-runner";
  e.ncu = ncu.string();
  auto o = start_run(run_, opts, e);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->phase, "done") << o->stop_reason;

  // ncu ran twice, each time writing into the round's profiles/ directory with kda's collection.
  auto runs = recorded_runs(record);
  ASSERT_EQ(runs.size(), 2u);
  const stdfs::path rep1 = run_ / "rounds/001/profiles" / (first_dev.substr(0, 8) + ".ncu-rep");
  const stdfs::path rep2 = run_ / "rounds/001/profiles" / (other.substr(0, 8) + ".ncu-rep");
  EXPECT_EQ(stdfs::path(value_after(runs[0], "-o")), stdfs::absolute(rep1));
  EXPECT_EQ(stdfs::path(value_after(runs[1], "-o")), stdfs::absolute(rep2));
  EXPECT_EQ(value_after(runs[0], "--profile-from-start"), "off");
  EXPECT_EQ(value_after(runs[0], "--set"), "full");
  EXPECT_TRUE(stdfs::is_regular_file(rep1));
  EXPECT_TRUE(stdfs::is_regular_file(rep2));

  // The writer saw the priorities and the report path; the third call was refused.
  auto calls = audit_records(run_ / "audit.jsonl", "agent_event", "profile");
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0]["actor"], "writer");
  EXPECT_TRUE(calls[0]["ok"].get<bool>()) << calls[0].dump();
  const std::string text = calls[0]["detail"].value("result", "");
  EXPECT_NE(text.find("report: " + stdfs::absolute(rep1).string()), std::string::npos) << text;
  EXPECT_NE(text.find("Priorities"), std::string::npos) << text;
  EXPECT_TRUE(calls[1]["ok"].get<bool>()) << calls[1].dump();
  EXPECT_FALSE(calls[2]["ok"].get<bool>()) << calls[2].dump();
  EXPECT_NE(calls[2]["detail"].value("result", "").find("no profiles left this round (2 per round)"), std::string::npos)
      << calls[2].dump();
  auto analyzed = audit_records(run_ / "audit.jsonl", "agent_event", "ncu_analyze");
  ASSERT_EQ(analyzed.size(), 1u);
  EXPECT_TRUE(analyzed[0]["ok"].get<bool>()) << analyzed[0].dump();

  // kda's own records: one audit record per profile taken, and the round's verify.json lists them.
  auto profiles = audit_records(run_ / "audit.jsonl", "profile");
  ASSERT_EQ(profiles.size(), 2u);
  EXPECT_EQ(profiles[0]["actor"], "verifier");
  EXPECT_EQ(profiles[0]["workload"], first_dev);
  EXPECT_EQ(profiles[0]["report"], "rounds/001/profiles/" + first_dev.substr(0, 8) + ".ncu-rep");
  EXPECT_TRUE(profiles[0]["ok"].get<bool>());
  EXPECT_EQ(profiles[1]["workload"], other);
  auto verify = read_json(run_ / "rounds/001/verify.json");
  ASSERT_EQ(verify["profiles"].size(), 2u) << verify.dump();
  EXPECT_EQ(verify["profiles"][0]["index"], 1);
  EXPECT_EQ(verify["profiles"][1]["report"], "rounds/001/profiles/" + other.substr(0, 8) + ".ncu-rep");
}

TEST_F(RunLoopTest, NoProfileToolWhenTheBudgetIsZero) {
  for (const auto& p : plan_sessions()) sessions_.push_back(p);
  sessions_.push_back(writer_session(
      "round", 1,
      json::array({{{"tool", "profile"}}, write_kernel(4.0), finish("x", json::array({geomean_claim(4.0)}))})));
  sessions_.push_back(reviewer_session("review", 1, "DECISION: COMPLETE\nPROGRESS: ADVANCED"));
  LoopOptions opts = options();
  opts.max_profiles_per_round = 0;
  auto o = start_run(run_, opts, env());
  ASSERT_TRUE(o.ok()) << o.status().message();
  auto calls = audit_records(run_ / "audit.jsonl", "agent_event", "profile");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_FALSE(calls[0]["ok"].get<bool>());
  EXPECT_NE(calls[0]["detail"].value("result", "").find("unknown tool"), std::string::npos) << calls[0].dump();
  EXPECT_EQ(read_json(run_ / "rounds/001/verify.json")["profiles"].size(), 0u);
}

}  // namespace
}  // namespace kda::loop::testing_fixture
