#include "eval/tool_run.h"

#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

#include "eval/ncu_profile.h"
#include "eval/tool_run_fake.h"
#include "eval/tool_run_sanitizer.h"
#include "util/fs.h"

namespace kda::eval {
namespace {

namespace stdfs = std::filesystem;

stdfs::path source_dir() { return KDA_SOURCE_DIR; }
const char* kFirstHostRmsnorm = "991de80f-5989-5d9d-84fd-6000970aafaf";

struct Fixture {
  task::TaskPack pack;
  task::Solution naive;
};

Fixture host_rmsnorm() {
  auto pack = task::load_task_pack(source_dir() / "tasks/host/rmsnorm");
  EXPECT_TRUE(pack.ok()) << pack.status().message();
  auto sol = task::load_solution(source_dir() / "tasks/host/rmsnorm/baselines/naive");
  EXPECT_TRUE(sol.ok()) << sol.status().message();
  return {*pack, *sol};
}

stdfs::path temp_dir() {
  auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-tool-run-test");
  EXPECT_TRUE(d.ok());
  return *d;
}

ToolRunOptions options_for(const std::string& uuid) {
  ToolRunOptions o;
  o.workload = uuid;
  o.runner_binary = KDA_RUNNER;
  o.seed = 7;
  o.warmup = 2;
  o.timeout_s = 60;
  return o;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(ToolRun, RunsTheWorkloadUnderTheWrapperAndReadsItsLog) {
  Fixture f = host_rmsnorm();
  stdfs::path dir = temp_dir();
  stdfs::path record = dir / "argv.txt";
  stdfs::path tool = testing::write_fake_tool(dir, "faketool", record, "FAKE TOOL OUTPUT\n");
  ToolRunOptions o = options_for(kFirstHostRmsnorm);
  o.wrapper = {tool.string(), "--mode", "x", "--log-file", (dir / "tool.log").string()};
  o.tool_log = dir / "tool.log";
  o.extra_env = {"KDA_FAKE_MARK=1"};
  auto r = run_under_tool(f.pack, f.naive, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->ok) << r->message << "\n" << r->runner_log;
  EXPECT_EQ(r->stage, ToolRunStage::kDone);
  EXPECT_EQ(r->backend, "host");
  EXPECT_TRUE(r->reply.value("ok", false));
  EXPECT_TRUE(r->damaged_guards.empty());
  EXPECT_EQ(r->tool_log, "FAKE TOOL OUTPUT\n");
  EXPECT_FALSE(r->build.value("lineinfo", true));
  // The tool was the process started, with its own options first, then the runner's argv.
  auto argv = testing::recorded_argv(record);
  ASSERT_GE(argv.size(), 4u);
  EXPECT_EQ(argv[0], "--mode");
  EXPECT_TRUE(contains(argv, std::string(KDA_RUNNER)));
  EXPECT_TRUE(contains(argv, "candidate"));
  EXPECT_TRUE(contains(argv, "host"));
  std::string text = *fs::read_file(record);
  EXPECT_NE(text.find("KDA_FAKE_MARK=1"), std::string::npos);
  EXPECT_EQ(r->to_json().value("stage", ""), "done");
  stdfs::remove_all(dir);
}

TEST(ToolRun, WrapperForSeesTheBuildAndLineinfoIsRecorded) {
  Fixture f = host_rmsnorm();
  ToolRunOptions o = options_for(kFirstHostRmsnorm);
  o.lineinfo = true;
  o.warmup = 0;
  bool called = false;
  o.wrapper_for = [&called](const BuiltLibrary& lib) -> Result<std::vector<std::string>> {
    called = true;
    EXPECT_TRUE(lib.ok);
    return std::vector<std::string>{};  // no tool: the runner itself
  };
  auto r = run_under_tool(f.pack, f.naive, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(called);
  EXPECT_TRUE(r->ok) << r->message;
  EXPECT_TRUE(r->build.value("lineinfo", false));
}

TEST(ToolRun, GuardBandWritesAreReported) {
  // A sanitizer cannot see a write that stays inside the runner's arena; the guard bands can.
  Fixture f = host_rmsnorm();
  stdfs::path dir = temp_dir();
  std::string src = *fs::read_file(source_dir() / "tasks/host/rmsnorm/baselines/naive/kernel.cc");
  const std::string end = "  return 0;\n}";
  size_t at = src.rfind(end);
  ASSERT_NE(at, std::string::npos);
  src.replace(at, end.size(), "  ip[batch] = 1.0f;\n  return 0;\n}");
  ASSERT_TRUE(fs::write_file_atomic(dir / "kernel.cc", src).ok());
  ASSERT_TRUE(fs::write_file_atomic(dir / "solution.json",
                                    *fs::read_file(source_dir() / "tasks/host/rmsnorm/baselines/naive/solution.json"))
                  .ok());
  auto oob = task::load_solution(dir);
  ASSERT_TRUE(oob.ok()) << oob.status().message();
  auto r = run_under_tool(f.pack, *oob, options_for(kFirstHostRmsnorm));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->ok);
  ASSERT_EQ(r->damaged_guards.size(), 1u);
  EXPECT_EQ(r->damaged_guards[0], f.pack.definition.outputs.back().name + " (after the end)");
  stdfs::remove_all(dir);
}

TEST(ToolRun, BadRequestsNameTheFileAndField) {
  Fixture f = host_rmsnorm();
  auto r = run_under_tool(f.pack, f.naive, options_for("no-such-uuid"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("workloads.jsonl"), std::string::npos);
  EXPECT_NE(r.status().message().find("no-such-uuid"), std::string::npos);
  // Holdout workloads are never run by a tool (agents never see them), not even by a start of their uuid.
  if (!f.pack.holdout.empty()) {
    auto h = run_under_tool(f.pack, f.naive, options_for(f.pack.holdout.front().uuid));
    EXPECT_FALSE(h.ok());
    const std::string start = f.pack.holdout.front().uuid.substr(0, 12);
    bool visible_too = false;
    for (const auto& w : f.pack.workloads) visible_too |= w.uuid.starts_with(start);
    if (!visible_too) EXPECT_FALSE(run_under_tool(f.pack, f.naive, options_for(start)).ok());
  }
  // A start of a uuid that more than one workload has is refused, naming them.
  auto a = run_under_tool(f.pack, f.naive, options_for(""));
  ASSERT_FALSE(a.ok());
  std::string common = f.pack.workloads[0].uuid;
  for (const auto& w : f.pack.workloads)
    while (!w.uuid.starts_with(common)) common.pop_back();
  if (!common.empty() && f.pack.workloads.size() > 1) {
    auto amb = run_under_tool(f.pack, f.naive, options_for(common));
    ASSERT_FALSE(amb.ok());
    EXPECT_NE(amb.status().message().find("give more of it"), std::string::npos) << amb.status().message();
  }
  task::Solution other = f.naive;
  other.spec.language = "cuda";
  auto l = run_under_tool(f.pack, other, options_for(kFirstHostRmsnorm));
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("spec.language"), std::string::npos);
  other = f.naive;
  other.definition = "something_else";
  auto d = run_under_tool(f.pack, other, options_for(kFirstHostRmsnorm));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("field definition"), std::string::npos);
}

TEST(ToolRun, AStartOfAUuidNamesItsWorkload) {
  // As kda eval --workloads takes them: the first 8 characters the result tables print.
  Fixture f = host_rmsnorm();
  stdfs::path dir = temp_dir();
  stdfs::path tool = testing::write_fake_tool(dir, "faketool", dir / "argv.txt", "");
  ToolRunOptions o = options_for(std::string(kFirstHostRmsnorm).substr(0, 8));
  o.wrapper = {tool.string()};
  auto r = run_under_tool(f.pack, f.naive, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->workload, kFirstHostRmsnorm);
  stdfs::remove_all(dir);
}

TEST(ToolRun, MissingToolIsAnErrorAndFindToolNamesTheFlag) {
  Fixture f = host_rmsnorm();
  ToolRunOptions o = options_for(kFirstHostRmsnorm);
  o.wrapper = {"/nonexistent/ncu"};
  auto r = run_under_tool(f.pack, f.naive, o);
  EXPECT_FALSE(r.ok());
  auto t = find_tool("/nonexistent/ncu", "ncu", "--ncu");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("--ncu"), std::string::npos);
  auto sh = find_tool("", "sh", "--sh");
  ASSERT_TRUE(sh.ok());
  EXPECT_TRUE(sh->is_absolute());
}

TEST(NcuProfile, SourceFoldersPointNcuAtTheBuildsSources) {
  // -lineinfo paths name the build's temporary directory, renamed after the build: ncu gets the
  // cache entry's src/ to search instead (issue 9: "Failed to import the following source files").
  Fixture f = host_rmsnorm();
  stdfs::path dir = temp_dir();
  stdfs::path record = dir / "argv.txt";
  NcuProfileOptions o;
  o.ncu = testing::write_fake_tool(dir, "ncu", record, "==PROF== fake\n");
  o.report = dir / "prof";
  o.workload = kFirstHostRmsnorm;
  o.runner_binary = KDA_RUNNER;
  o.warmup = 0;
  o.timeout_s = 60;
  auto r = run_ncu_profile(f.pack, f.naive, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->status.ok());  // the fake writes no report
  auto argv = testing::recorded_argv(record);
  auto it = std::find(argv.begin(), argv.end(), "--source-folders");
  ASSERT_NE(it, argv.end());
  ASSERT_NE(std::next(it), argv.end());
  const stdfs::path folder = *std::next(it);
  EXPECT_EQ(folder.filename(), "src");
  ASSERT_FALSE(f.naive.sources.empty());
  EXPECT_TRUE(stdfs::is_regular_file(folder / f.naive.sources[0].path)) << folder;
  EXPECT_TRUE(contains(argv, "--import-source"));

  const auto plain = ncu_profile_argv("/x/ncu", NcuCollection{}, {}, "r.ncu-rep", "r.log");
  EXPECT_FALSE(contains(plain, "--source-folders"));
  const auto two = ncu_profile_argv("/x/ncu", NcuCollection{}, {}, "r.ncu-rep", "r.log", {"/a/src", "/b,c", "/d"});
  auto at = std::find(two.begin(), two.end(), "--source-folders");
  ASSERT_NE(at, two.end());
  EXPECT_EQ(*std::next(at), "/a/src,/d");  // a folder with a comma cannot be passed: left out
  stdfs::remove_all(dir);
}

TEST(ToolRun, AToolThatCannotStartTheRunnerShowsItsLog) {
  Fixture f = host_rmsnorm();
  stdfs::path dir = temp_dir();
  const stdfs::path tool = dir / "brokentool";
  ASSERT_TRUE(fs::write_file_atomic(tool, "#!/bin/sh\necho '==ERROR== the tool refused' > \"$2\"\nexit 1\n").ok());
  stdfs::permissions(tool, stdfs::perms::owner_all);
  ToolRunOptions o = options_for(kFirstHostRmsnorm);
  o.wrapper = {tool.string(), "--log-file", (dir / "tool.log").string()};
  o.tool_log = dir / "tool.log";
  o.timeout_s = 10;
  auto r = run_under_tool(f.pack, f.naive, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the tool refused"), std::string::npos) << r.status().message();
  stdfs::remove_all(dir);
}

TEST(ToolRun, TailLines) {
  EXPECT_EQ(tail_lines("a\nb\nc\n", 2), "b\nc");
  EXPECT_EQ(tail_lines("a\nb\nc", 5), "a\nb\nc");
  EXPECT_EQ(tail_lines("", 3), "");
  EXPECT_EQ(tail_lines("one", 1), "one");
}

TEST(SanitizerLog, CountsErrorsAndKeepsTheFirstReports) {
  const std::string log =
      "========= COMPUTE-SANITIZER\n"
      "========= Invalid __global__ write of size 2 bytes\n"
      "=========     at rmsnorm(const __nv_bfloat16 *, float, __nv_bfloat16 *, long)+0x4d0 in kernel.cu:58\n"
      "=========     by thread (0,0,0) in block (3,0,0)\n"
      "=========     Address 0x7f0000001000 is out of bounds\n"
      "=========     Saved host backtrace up to driver entry point at kernel launch time\n"
      "=========         Host Frame: cuLaunchKernel [0x1234] in libcuda.so.1\n"
      "=========\n"
      "========= Program hit cudaErrorLaunchFailure (error 719) on CUDA API call to cudaDeviceSynchronize.\n"
      "=========\n"
      "kda-runner: something on stderr\n"
      "========= ERROR SUMMARY: 1,002 errors\n";
  SanitizerSummary s = parse_sanitizer_log(log);
  EXPECT_TRUE(s.found);
  EXPECT_EQ(s.errors, 1002);
  ASSERT_EQ(s.reports.size(), 2u);
  EXPECT_EQ(s.reports[0][0], "Invalid __global__ write of size 2 bytes");
  ASSERT_EQ(s.reports[0].size(), 4u);  // headline, at, by thread, address; no host frames
  EXPECT_NE(s.reports[0][1].find("kernel.cu:58"), std::string::npos);
  EXPECT_EQ(s.reports[1][0].rfind("Program hit", 0), 0u);

  SanitizerSummary clean = parse_sanitizer_log("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n");
  EXPECT_TRUE(clean.found);
  EXPECT_EQ(clean.errors, 0);
  EXPECT_TRUE(clean.reports.empty());

  SanitizerSummary race = parse_sanitizer_log(
      "========= Error: Race reported between Write access at k()+0x10 in r.cu:10\n"
      "=========     and Read access at k()+0x20 in r.cu:12 [4 hazards]\n"
      "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n");
  EXPECT_TRUE(race.found);
  EXPECT_EQ(race.errors, 1);
  ASSERT_EQ(race.reports.size(), 1u);
  EXPECT_EQ(race.reports[0].size(), 2u);

  EXPECT_FALSE(parse_sanitizer_log("the tool died before its summary\n").found);
  SanitizerSummary capped = parse_sanitizer_log(log, 1, 1);
  ASSERT_EQ(capped.reports.size(), 1u);
  EXPECT_EQ(capped.reports[0].size(), 2u);
}

}  // namespace
}  // namespace kda::eval
