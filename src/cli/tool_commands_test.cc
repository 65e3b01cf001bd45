// `kda ncu profile`, `kda sanitize` and `kda eval` without a GPU or the Nsight tools: fake tools (shell scripts)
// record the argv kda built, write a log where --log-file says, and exec the real kda-runner.
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "eval/tool_run_fake.h"
#include "proc/subprocess.h"
#include "util/fs.h"

namespace kda::cli {
namespace {

namespace stdfs = std::filesystem;
using eval::testing::recorded_argv;
using eval::testing::write_fake_tool;

const std::string kSource = KDA_SOURCE_DIR;
const char* kFirstHostRmsnorm = "991de80f-5989-5d9d-84fd-6000970aafaf";

class ToolCommands : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("KDA_RUNNER", (stdfs::path(KDA_BINARY_DIR) / "kda-runner").c_str(), 1);
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-tool-cmd-test");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
  }
  void TearDown() override {
    ::unsetenv("KDA_RUNNER");
    std::error_code ec;
    stdfs::remove_all(dir_, ec);
  }
  // Runs `kda <v...>` for the two commands under test, as dispatch() does (the command's words,
  // then its arguments), without linking the whole command table.
  int run(std::vector<std::string> v) {
    std::vector<CommandSpec> specs = ncu_commands();
    specs.push_back(sanitize_command());
    specs.push_back(eval_command());
    std::ostringstream o, e;
    Io io{o, e};
    int rc = kExitBadInput;
    for (const auto& spec : specs) {
      const size_t words = spec.name.find(' ') == std::string::npos ? 1 : 2;
      if (v.size() < words || (words == 1 ? v[0] : v[0] + " " + v[1]) != spec.name) continue;
      std::vector<std::string> rest(v.begin() + static_cast<std::ptrdiff_t>(words), v.end());
      auto args = parse_args(spec, rest);
      if (!args.ok()) {
        e << args.status().message() << "\n";
        break;
      }
      rc = spec.run(*args, io);
      break;
    }
    out_ = o.str();
    err_ = e.str();
    return rc;
  }
  stdfs::path dir_;
  std::string out_, err_;
};

size_t index_of(const std::vector<std::string>& v, const std::string& s) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] == s) return i;
  return v.size();
}

// The option's value in a recorded argv ("" when absent).
std::string value_after(const std::vector<std::string>& v, const std::string& opt) {
  size_t i = index_of(v, opt);
  return i + 1 < v.size() ? v[i + 1] : "";
}

// What a person sees of a failed build in `kda eval`'s table: the reason once (not once per
// workload) with the compiler's error lines, named by the solution's files.
TEST_F(ToolCommands, EvalTableShowsCompilerErrorsOnce) {
  EXPECT_EQ(run({"eval", kSource + "/tests/fixtures/solutions/host_rmsnorm/compile_error", "--task",
                 kSource + "/tasks/host/rmsnorm", "--quiet"}),
            1);
  size_t n = 0;
  for (size_t p = out_.find("does not build"); p != std::string::npos; p = out_.find("does not build", p + 1)) ++n;
  EXPECT_EQ(n, 1u) << out_;
  EXPECT_NE(out_.find("compile error: kernel.cc:11:"), std::string::npos) << out_;
  EXPECT_NE(out_.find("COMPILE_ERROR"), std::string::npos) << out_;
}

// Spread and names on screen (issue 21 item 2): rows by uuid prefix with their axes, each latency
// with its p10-p90 spread, the rate the pack's roofline formulas give, the geomean's interval over
// trials; --workloads takes a unique prefix and says which workloads an ambiguous one matches.
TEST_F(ToolCommands, EvalTableShowsAxesSpreadRatesAndTakesUuidPrefixes) {
  const std::string fast = kSource + "/tests/fixtures/solutions/host_gemm/fast", task = kSource + "/tasks/host/gemm";
  ASSERT_EQ(run({"eval", fast, "--task", task, "--workloads", "ff23,5d7c", "--quiet"}), 0) << err_;
  EXPECT_NE(out_.find("p10 - p90"), std::string::npos) << out_;
  EXPECT_NE(out_.find("ff23df9b  K=64 M=1 N=64"), std::string::npos) << out_;
  EXPECT_NE(out_.find("5d7ca068  K=128 M=256 N=256"), std::string::npos) << out_;
  EXPECT_NE(out_.find(" us - "), std::string::npos) << out_;
  EXPECT_NE(out_.find("GB/s"), std::string::npos) << out_;
  EXPECT_NE(out_.find("TFLOP/s"), std::string::npos) << out_;
  EXPECT_NE(out_.find("95 % interval over trials"), std::string::npos) << out_;
  EXPECT_NE(out_.find("summary: 2/2 PASSED"), std::string::npos) << out_;
  EXPECT_EQ(run({"eval", fast, "--task", task, "--workloads", "f", "--quiet"}), 2);
  EXPECT_NE(err_.find("'f' is the start of 3 workloads"), std::string::npos) << err_;
  EXPECT_EQ(run({"eval", fast, "--task", task, "--workloads", "0000", "--quiet"}), 2);
  EXPECT_NE(err_.find("no workload '0000'"), std::string::npos) << err_;
}

// `kda eval --param`: one configuration of a tunable solution without copying it (session 10 made three
// copies of a kernel with sed to try its PAIRS masks). The report names the configuration; a parameter the
// solution does not have, or a solution without tunables.toml, is refused before anything is built.
TEST_F(ToolCommands, EvalParamBuildsOneConfigurationOfATunableSolution) {
  const std::string sol = kSource + "/tasks/host/rmsnorm/solutions/tunable", task = kSource + "/tasks/host/rmsnorm";
  ASSERT_EQ(run({"eval", sol, "--task", task, "--param", "UNROLL=8", "--param", "SCALE_UNROLL=8", "--workloads",
                 kFirstHostRmsnorm, "--trials", "1", "--iterations", "2", "--json"}),
            0)
      << err_;
  EXPECT_NE(err_.find("kda eval: configuration ROWS=1 SCALE_UNROLL=8 UNROLL=8 ("), std::string::npos) << err_;
  const auto report = nlohmann::json::parse(out_, nullptr, false);
  ASSERT_TRUE(report.is_object()) << out_;
  EXPECT_NE(report.dump().find("_tunable_"), std::string::npos);  // the configuration's solution name
  EXPECT_EQ(run({"eval", sol, "--task", task, "--param", "UNROLLS=8", "--quiet"}), 2);
  EXPECT_NE(err_.find("has no parameter UNROLLS (it has UNROLL, ROWS, SCALE_UNROLL)"), std::string::npos) << err_;
  EXPECT_EQ(run({"eval", kSource + "/tests/fixtures/solutions/host_rmsnorm/compile_error", "--task", task, "--param",
                 "UNROLL=8", "--quiet"}),
            2);
  EXPECT_NE(err_.find("tunables.toml"), std::string::npos) << err_;
}

TEST_F(ToolCommands, NcuProfileBuildsTheCollectionAndReportsAMissingReport) {
  // Host pack: the whole run completes under the fake (profile_range is ignored on the host), but
  // the fake writes no report, so the command fails and shows ncu's log tail.
  const stdfs::path record = dir_ / "argv.txt";
  const stdfs::path ncu = write_fake_tool(dir_, "ncu", record, "==PROF== fake ncu log line\n");
  const stdfs::path out = dir_ / "prof" / "x";
  int rc =
      run({"ncu", "profile", kSource + "/tasks/host/rmsnorm/baselines/naive", "--task", kSource + "/tasks/host/rmsnorm",
           "--workload", kFirstHostRmsnorm, "--ncu", ncu.string(), "--out", out.string(), "--json", "-q"});
  EXPECT_EQ(rc, kExitInternal) << err_;
  EXPECT_NE(err_.find("ncu wrote no report at " + out.string() + ".ncu-rep"), std::string::npos) << err_;
  EXPECT_NE(err_.find("fake ncu log line"), std::string::npos) << err_;
  EXPECT_NE(err_.find("host-backend task launches no kernel"), std::string::npos) << err_;
  auto j = nlohmann::json::parse(out_, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out_;
  EXPECT_FALSE(j.value("ok", true));
  EXPECT_EQ(j["run"].value("stage", ""), "done");
  EXPECT_TRUE(j["run"]["build"].value("lineinfo", false));
  auto argv = recorded_argv(record);
  EXPECT_EQ(value_after(argv, "--profile-from-start"), "off");
  EXPECT_EQ(value_after(argv, "--set"), "full");
  EXPECT_EQ(value_after(argv, "--import-source"), "yes");
  EXPECT_EQ(value_after(argv, "--clock-control"), "none");
  EXPECT_EQ(value_after(argv, "--cache-control"), "all");
  EXPECT_EQ(value_after(argv, "--target-processes"), "all");
  EXPECT_EQ(value_after(argv, "-o"), out.string() + ".ncu-rep");
  EXPECT_EQ(value_after(argv, "--log-file"), out.string() + ".log");
  EXPECT_LT(index_of(argv, "-f"), argv.size());
  EXPECT_EQ(index_of(argv, "--kernel-name"), argv.size());  // a host build has no kernels to filter on
  // The tool's options come before the runner's argv.
  EXPECT_LT(index_of(argv, "-f"), index_of(argv, (stdfs::path(KDA_BINARY_DIR) / "kda-runner").string()));
}

TEST_F(ToolCommands, NcuProfileCollectsMetricsAloneUnderTheChosenCachePolicy) {
  const stdfs::path record = dir_ / "argv.txt";
  const stdfs::path ncu = write_fake_tool(dir_, "ncu", record, "fake\n");
  const std::vector<std::string> base{"ncu",
                                      "profile",
                                      kSource + "/tasks/host/rmsnorm/baselines/naive",
                                      "--task",
                                      kSource + "/tasks/host/rmsnorm",
                                      "--workload",
                                      kFirstHostRmsnorm,
                                      "--ncu",
                                      ncu.string(),
                                      "--out",
                                      (dir_ / "m").string(),
                                      "--json",
                                      "-q"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> v = base;
    v.insert(v.end(), extra.begin(), extra.end());
    return run(v);
  };
  // --metrics alone: no section set, one comma-joined --metrics argument, caches left to the harness.
  with({"--metrics", "gpu__time_duration.sum, sm__cycles_elapsed.max", "--cache-control", "none"});
  auto argv = recorded_argv(record);
  ASSERT_FALSE(argv.empty()) << err_;
  EXPECT_EQ(index_of(argv, "--set"), argv.size());
  EXPECT_EQ(value_after(argv, "--metrics"), "gpu__time_duration.sum,sm__cycles_elapsed.max");
  EXPECT_EQ(value_after(argv, "--cache-control"), "none");
  EXPECT_EQ(value_after(argv, "--clock-control"), "none");
  // An explicit set with metrics collects both; clocks may be locked.
  stdfs::remove(record);
  with({"--metrics", "gpu__time_duration.sum", "--set", "basic", "--clock-control", "base"});
  argv = recorded_argv(record);
  EXPECT_EQ(value_after(argv, "--set"), "basic");
  EXPECT_EQ(value_after(argv, "--metrics"), "gpu__time_duration.sum");
  EXPECT_EQ(value_after(argv, "--clock-control"), "base");
  // Bad values are refused before anything runs, naming the option.
  struct Bad {
    std::vector<std::string> args;
    std::string option;
  };
  for (const Bad& b :
       {Bad{{"--cache-control", "some"}, "--cache-control"}, Bad{{"--clock-control", "boost"}, "--clock-control"},
        Bad{{"--metrics", "gpu__time_duration.sum;rm -rf"}, "--metrics"}, Bad{{"--metrics", ","}, "--metrics"},
        Bad{{"--set", ""}, "--set/--metrics"}}) {
    stdfs::remove(record);
    EXPECT_EQ(with(b.args), kExitBadInput) << b.option;
    EXPECT_NE(err_.find(b.option), std::string::npos) << err_;
    EXPECT_FALSE(stdfs::exists(record)) << b.option << ": ncu ran";
  }
}

TEST_F(ToolCommands, NcuProfileOfACudaSolutionFiltersItsKernels) {
  // A CUDA pack needs nvcc to build; without a GPU the runner then fails to load, which the command
  // reports with the stage; with one, the fake writes no report. Either way the argv is checked.
  bool have_nvcc = proc::find_program("nvcc").ok() || stdfs::exists("/usr/local/cuda/bin/nvcc");
  if (!have_nvcc) GTEST_SKIP() << "nvcc not found";
  const stdfs::path record = dir_ / "argv.txt";
  const stdfs::path ncu = write_fake_tool(dir_, "ncu", record, "fake\n");
  int rc =
      run({"ncu", "profile", kSource + "/tasks/cuda/rmsnorm/baselines/naive", "--task", kSource + "/tasks/cuda/rmsnorm",
           "--workload", "", "--ncu", ncu.string(), "--run-dir", dir_.string(), "--json", "-q"});
  EXPECT_EQ(rc, kExitBadInput);  // --workload "" is required
  std::string uuid;
  {
    auto text = fs::read_file(kSource + "/tasks/cuda/rmsnorm/workloads.jsonl");
    ASSERT_TRUE(text.ok());
    auto first = nlohmann::json::parse(text->substr(0, text->find('\n')));
    uuid = first["workload"]["uuid"];
  }
  rc =
      run({"ncu", "profile", kSource + "/tasks/cuda/rmsnorm/baselines/naive", "--task", kSource + "/tasks/cuda/rmsnorm",
           "--workload", uuid, "--ncu", ncu.string(), "--run-dir", dir_.string(), "--json", "-q"});
  EXPECT_NE(rc, kExitOk) << out_;
  auto j = nlohmann::json::parse(out_, nullptr, false);
  auto argv = recorded_argv(record);
  ASSERT_FALSE(argv.empty()) << err_;
  // The default report path: <run-dir>/profiles/<solution>-<uuid8>.ncu-rep
  auto pos = value_after(argv, "-o").find("/profiles/");
  EXPECT_NE(pos, std::string::npos);
  EXPECT_NE(value_after(argv, "-o").find("-" + uuid.substr(0, 8) + ".ncu-rep"), std::string::npos);
  EXPECT_EQ(value_after(argv, "--kernel-name-base"), "mangled");
  const std::string filter = value_after(argv, "--kernel-name");
  ASSERT_TRUE(j.is_object()) << out_ << err_;
  ASSERT_FALSE(j["run"]["kernels"].empty());
  EXPECT_EQ(filter.rfind("regex:^(", 0), 0u) << filter;
  for (const auto& k : j["run"]["kernels"]) EXPECT_NE(filter.find(k.get<std::string>()), std::string::npos) << filter;
  EXPECT_TRUE(j["run"]["build"].value("lineinfo", false));
  if (!j["run"]["build"].value("cache_hit", true)) {
    EXPECT_NE(j["run"].dump().find("lineinfo"), std::string::npos);
  }
  EXPECT_FALSE(err_.empty());
}

TEST_F(ToolCommands, NcuProfileErrorsNameTheFlagAndTheFile) {
  const std::string sol = kSource + "/tasks/host/rmsnorm/baselines/naive";
  const std::string task = kSource + "/tasks/host/rmsnorm";
  EXPECT_EQ(run({"ncu", "profile", sol, "--task", task, "--workload", kFirstHostRmsnorm, "--ncu", "/nonexistent/ncu"}),
            kExitBadInput);
  EXPECT_NE(err_.find("--ncu /nonexistent/ncu"), std::string::npos) << err_;
  const stdfs::path ncu = write_fake_tool(dir_, "ncu", dir_ / "argv.txt", "");
  EXPECT_EQ(run({"ncu", "profile", sol, "--task", task, "--workload", "nope", "--ncu", ncu.string(), "-q"}),
            kExitBadInput);
  EXPECT_NE(err_.find("workloads.jsonl"), std::string::npos) << err_;
  EXPECT_NE(err_.find("nope"), std::string::npos) << err_;
  EXPECT_EQ(run({"ncu", "profile", sol, "--task", dir_.string(), "--workload", "x", "--ncu", ncu.string()}),
            kExitBadInput);
  EXPECT_EQ(run({"ncu", "profile", kSource + "/tasks/cuda/rmsnorm/baselines/naive", "--task", task, "--workload",
                 kFirstHostRmsnorm, "--ncu", ncu.string(), "-q"}),
            kExitBadInput);
  EXPECT_NE(err_.find("field definition"), std::string::npos) << err_;
}

const char* kDirtyLog =
    "========= COMPUTE-SANITIZER\n"
    "========= Invalid __global__ write of size 2 bytes\n"
    "=========     at rmsnorm_block_per_row+0x4d0 in kernel.cu:58\n"
    "=========     Address 0x7f0000001000 is out of bounds\n"
    "=========\n"
    "========= ERROR SUMMARY: 3 errors\n";

TEST_F(ToolCommands, SanitizeFailsWithEvidenceWhenTheToolCountsErrors) {
  const stdfs::path record = dir_ / "argv.txt";
  const stdfs::path cs = write_fake_tool(dir_, "compute-sanitizer", record, kDirtyLog);
  int rc = run({"sanitize", kSource + "/tasks/host/rmsnorm/baselines/naive", "--task", kSource + "/tasks/host/rmsnorm",
                "--workloads", kFirstHostRmsnorm, "--sanitizer", cs.string(), "--json", "-q"});
  EXPECT_EQ(rc, kExitFailed) << err_;
  auto j = nlohmann::json::parse(out_, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out_;
  EXPECT_FALSE(j.value("passed", true));
  ASSERT_EQ(j["workloads"].size(), 1u);
  EXPECT_EQ(j["workloads"][0].value("verdict", ""), "SANITIZER_ERROR");
  EXPECT_EQ(j["workloads"][0].value("errors", 0), 3);
  EXPECT_EQ(j["workloads"][0]["evidence"][0][0], "Invalid __global__ write of size 2 bytes");
  auto argv = recorded_argv(record);
  EXPECT_EQ(value_after(argv, "--tool"), "memcheck");
  EXPECT_EQ(value_after(argv, "--error-exitcode"), "86");
  EXPECT_EQ(value_after(argv, "--print-limit"), "20");
  EXPECT_FALSE(value_after(argv, "--log-file").empty());
  // Human output: the verdict and the evidence lines.
  rc = run({"sanitize", kSource + "/tasks/host/rmsnorm/baselines/naive", "--task", kSource + "/tasks/host/rmsnorm",
            "--workloads", kFirstHostRmsnorm, "--sanitizer", cs.string(), "--tool", "racecheck", "-q"});
  EXPECT_EQ(rc, kExitFailed);
  EXPECT_NE(out_.find("SANITIZER_ERROR"), std::string::npos) << out_;
  EXPECT_NE(out_.find("kernel.cu:58"), std::string::npos) << out_;
  EXPECT_EQ(value_after(recorded_argv(record), "--tool"), "racecheck");
}

TEST_F(ToolCommands, SanitizeCleanPassesAndNoSummaryIsAnError) {
  const stdfs::path record = dir_ / "argv.txt";
  const stdfs::path clean = write_fake_tool(dir_ / "clean", "compute-sanitizer", record,
                                            "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n");
  const stdfs::path logs = dir_ / "logs";
  int rc = run({"sanitize", kSource + "/tasks/host/rmsnorm/baselines/naive", "--task", kSource + "/tasks/host/rmsnorm",
                "--workloads", kFirstHostRmsnorm, "--sanitizer", clean.string(), "--log-dir", logs.string(), "-q"});
  EXPECT_EQ(rc, kExitOk) << out_ << err_;
  EXPECT_NE(out_.find("PASSED"), std::string::npos);
  EXPECT_TRUE(stdfs::exists(logs / (std::string("memcheck-") + kFirstHostRmsnorm + ".log")));
  const stdfs::path mute = write_fake_tool(dir_ / "mute", "compute-sanitizer", record, "");
  rc = run({"sanitize", kSource + "/tasks/host/rmsnorm/baselines/naive", "--task", kSource + "/tasks/host/rmsnorm",
            "--workloads", kFirstHostRmsnorm, "--sanitizer", mute.string(), "-q"});
  EXPECT_EQ(rc, kExitInternal);
  EXPECT_NE(err_.find("no summary"), std::string::npos) << err_;
  rc = run({"sanitize", kSource + "/tasks/host/rmsnorm/baselines/naive", "--task", kSource + "/tasks/host/rmsnorm",
            "--workloads", kFirstHostRmsnorm, "--sanitizer", mute.string(), "-q", "--json"});
  EXPECT_EQ(rc, kExitInternal);
  auto j = nlohmann::json::parse(out_, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out_;
  EXPECT_FALSE(j.value("passed", true));
  EXPECT_EQ(j.value("workload", ""), kFirstHostRmsnorm);
  EXPECT_NE(j.value("error", "").find("no summary"), std::string::npos);
  EXPECT_EQ(run({"sanitize", kSource + "/tasks/host/rmsnorm/baselines/naive", "--task", kSource + "/tasks/host/rmsnorm",
                 "--tool", "leakcheck", "--sanitizer", clean.string()}),
            kExitBadInput);
  EXPECT_NE(err_.find("--tool leakcheck"), std::string::npos);
  EXPECT_EQ(run({"sanitize", kSource + "/tasks/host/rmsnorm/baselines/naive", "--task", kSource + "/tasks/host/rmsnorm",
                 "--sanitizer", "/nonexistent/cs"}),
            kExitBadInput);
  EXPECT_NE(err_.find("--sanitizer"), std::string::npos);
}

// A copy of the host rmsnorm baseline with `edit` applied to its kernel source.
stdfs::path edited_baseline(const stdfs::path& dir, const std::string& from, const std::string& to) {
  const std::string base = kSource + "/tasks/host/rmsnorm/baselines/naive/";
  stdfs::create_directories(dir);
  std::string src = *fs::read_file(base + "kernel.cc");
  size_t at = src.rfind(from);
  EXPECT_NE(at, std::string::npos);
  if (at != std::string::npos) src.replace(at, from.size(), to);
  EXPECT_TRUE(fs::write_file_atomic(dir / "kernel.cc", src).ok());
  EXPECT_TRUE(fs::write_file_atomic(dir / "solution.json", *fs::read_file(base + "solution.json")).ok());
  return dir;
}

TEST_F(ToolCommands, SanitizeVerdictsBesideTheSanitizersOwn) {
  const stdfs::path clean =
      write_fake_tool(dir_ / "clean", "compute-sanitizer", dir_ / "argv.txt", "========= ERROR SUMMARY: 0 errors\n");
  const std::string task = kSource + "/tasks/host/rmsnorm";
  auto verdict = [&](const stdfs::path& solution) {
    run({"sanitize", solution.string(), "--task", task, "--workloads", kFirstHostRmsnorm, "--sanitizer", clean.string(),
         "--json", "-q"});
    auto j = nlohmann::json::parse(out_, nullptr, false);
    return j.is_object() && !j["workloads"].empty() ? j["workloads"][0].value("verdict", "")
                                                    : "no JSON: " + out_ + err_;
  };
  // One element written past the last output: inside the arena, so only the guard bands see it.
  EXPECT_EQ(verdict(edited_baseline(dir_ / "oob", "  return 0;\n}", "  ip[batch] = 1.0f;\n  return 0;\n}")),
            "VIOLATION_OUT_OF_BOUNDS");
  EXPECT_NE(out_.find("inv_rms"), std::string::npos);
  EXPECT_EQ(verdict(kSource + "/tests/fixtures/solutions/host_rmsnorm/crash"), "RUNTIME_ERROR");
  EXPECT_EQ(verdict(edited_baseline(dir_ / "broken", "  return 0;\n}", "  return undeclared_name;\n}")),
            "COMPILE_ERROR");
}

}  // namespace
}  // namespace kda::cli
