// Python solutions on the host backend (docs/solutions.md, "Python and Triton solutions"): the
// numpy solutions kda ships pass their packs, a wrong one is INCORRECT, one that does not parse is a
// COMPILE_ERROR, and the Python cheats of tests/fixtures/hacks/python are rejected for their own
// reasons by the same runtime gates as compiled solutions (plus kda's audit hook for what only
// Python can do). Needs libkda-python.so beside kda-runner (Debian's libpython3-dev and numpy,
// which scripts/install-deps.sh installs); where the build found no libpython the tests skip.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "eval/evaluator.h"
#include "eval/runner_client.h"
#include "task/solution.h"
#include "task/task_pack.h"
#include "util/fs.h"

namespace kda::eval {
namespace {

namespace stdfs = std::filesystem;

const stdfs::path kSource = KDA_SOURCE_DIR;

bool python_runner_built() { return stdfs::exists(stdfs::path(KDA_RUNNER).parent_path() / "libkda-python.so"); }

#define REQUIRE_PYTHON_RUNNER() \
  if (!python_runner_built()) GTEST_SKIP() << "kda-runner was built without libpython (libpython3-dev)"

EvalOptions options(const std::string& workloads) {
  EvalOptions o;
  o.runner_binary = KDA_RUNNER;
  o.workloads = workloads;
  o.trials = 2;
  o.warmup = 1;
  o.iterations = 4;
  o.seed = 4242;
  return o;
}

EvalReport evaluate_dir(const std::string& pack_dir, const stdfs::path& solution, const std::string& workloads) {
  auto pack = task::load_task_pack(kSource / pack_dir);
  EXPECT_TRUE(pack.ok()) << pack.status().message();
  if (!pack.ok()) return {};
  pack->settings.call_timeout_s = 10;
  auto sol = task::load_solution(solution);
  EXPECT_TRUE(sol.ok()) << sol.status().message();
  if (!sol.ok()) return {};
  auto r = evaluate(*pack, *sol, options(workloads));
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : EvalReport{};
}

const WorkloadResult* first_rejection(const EvalReport& r) {
  for (const auto& w : r.workloads)
    if (w.verdict != Verdict::kPassed) return &w;
  return nullptr;
}

TEST(PythonSolutions, NumpySolutionsPassEveryWorkloadDestinationPassingOrReturning) {
  REQUIRE_PYTHON_RUNNER();
  struct Case {
    const char* pack;
    const char* solution;
  };
  for (const Case& c : {Case{"tasks/host/rmsnorm", "solutions/host_rmsnorm_f32/numpy"},
                        Case{"tasks/host/softmax", "solutions/host_softmax_f32/numpy"}}) {
    SCOPED_TRACE(c.solution);
    for (const char* set : {"all", "holdout"}) {
      EvalReport r = evaluate_dir(c.pack, kSource / c.solution, set);
      ASSERT_FALSE(r.workloads.empty());
      for (const auto& w : r.workloads) {
        EXPECT_EQ(w.verdict, Verdict::kPassed) << set << " " << w.uuid << ": " << w.reason << " " << w.message;
        EXPECT_GT(w.latency_ms, 0);
      }
      EXPECT_TRUE(r.all_passed);
    }
  }
}

// torch and Triton often live in a virtual environment (the GPU machine's is /opt/torch/.venv): a
// venv's python3 first on kda's PATH is the interpreter a solution runs in, though the runners' own
// PATH is /usr/bin:/bin. A solution importing a module only the venv has fails without the venv on
// PATH (ModuleNotFoundError) and passes with it.
TEST(PythonSolutions, ASolutionImportsFromTheVirtualEnvironmentOnKdasPath) {
  REQUIRE_PYTHON_RUNNER();
  auto tmp = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-venv");
  ASSERT_TRUE(tmp.ok());
  const stdfs::path venv = *tmp / "venv";
  const std::string make =
      "/usr/bin/python3 -m venv --without-pip --system-site-packages " + venv.string() + " > /dev/null 2>&1";
  if (std::system(make.c_str()) != 0) {
    stdfs::remove_all(*tmp);
    GTEST_SKIP() << "python3 -m venv is not available here";
  }
  stdfs::path site;
  for (const auto& e : stdfs::recursive_directory_iterator(venv / "lib"))
    if (e.path().filename() == "site-packages") site = e.path();
  ASSERT_FALSE(site.empty());
  ASSERT_TRUE(fs::write_file_atomic(site / "kda_venv_probe.py", "ONE = 1.0\n").ok());
  const stdfs::path sol = *tmp / "solution";
  stdfs::copy(kSource / "solutions/host_rmsnorm_f32/numpy", sol);
  ASSERT_TRUE(fs::write_file_atomic(sol / "rmsnorm.py", "import kda_venv_probe\n" + *fs::read_file(sol / "rmsnorm.py") +
                                                            "    y *= kda_venv_probe.ONE\n")
                  .ok());
  const std::string path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "/usr/bin:/bin";
  const char* kda_python = std::getenv("KDA_PYTHON");
  const std::string saved_python = kda_python != nullptr ? kda_python : "";
  ::unsetenv("KDA_PYTHON");
  ::setenv("PATH", ("/usr/bin:" + path).c_str(), 1);  // a python3 that is no venv's first
  EXPECT_EQ(python_interpreter(), "");
  EvalReport without = evaluate_dir("tasks/host/rmsnorm", sol, "dev");
  ::setenv("PATH", ((venv / "bin").string() + ":" + path).c_str(), 1);
  EXPECT_EQ(python_interpreter(), (venv / "bin/python3").string());
  EvalReport with = evaluate_dir("tasks/host/rmsnorm", sol, "dev");
  ::setenv("PATH", path.c_str(), 1);
  if (!saved_python.empty()) ::setenv("KDA_PYTHON", saved_python.c_str(), 1);
  ASSERT_FALSE(without.workloads.empty());
  EXPECT_NE(without.workloads.front().verdict, Verdict::kPassed);
  EXPECT_NE((without.workloads.front().message + without.workloads.front().log).find("kda_venv_probe"),
            std::string::npos)
      << without.workloads.front().message;
  ASSERT_FALSE(with.workloads.empty());
  for (const auto& w : with.workloads) EXPECT_EQ(w.verdict, Verdict::kPassed) << w.reason << " " << w.message;
  stdfs::remove_all(*tmp);
}

TEST(PythonSolutions, AWrongOneIsIncorrectAndOneThatDoesNotParseIsACompileError) {
  REQUIRE_PYTHON_RUNNER();
  EvalReport wrong =
      evaluate_dir("tasks/host/rmsnorm", kSource / "tests/fixtures/solutions/host_rmsnorm/python_wrong", "dev");
  ASSERT_FALSE(wrong.workloads.empty());
  for (const auto& w : wrong.workloads) {
    EXPECT_EQ(w.verdict, Verdict::kIncorrectNumerical) << w.reason << " " << w.message;
    EXPECT_EQ(w.reason, "incorrect_numerical");
  }
  EvalReport bad =
      evaluate_dir("tasks/host/rmsnorm", kSource / "tests/fixtures/solutions/host_rmsnorm/python_syntax_error", "dev");
  ASSERT_FALSE(bad.workloads.empty());
  const auto& w = bad.workloads.front();
  EXPECT_EQ(w.verdict, Verdict::kCompileError) << w.reason << " " << w.message;
  EXPECT_EQ(w.reason, "compile_error");
  EXPECT_NE(w.log.find("kernel.py\", line 6"), std::string::npos) << w.log;
  EXPECT_NE(w.log.find("SyntaxError"), std::string::npos) << w.log;
}

// Every fixture under tests/fixtures/hacks/python: a cheat is rejected for one of the reasons its
// expected.json names (the first rejected workload, public then holdout); an honest one passes.
TEST(PythonSolutions, PythonCheatsAreRejectedForTheirOwnReasonsHonestOnesPass) {
  REQUIRE_PYTHON_RUNNER();
  std::vector<stdfs::path> dirs;
  for (const auto& e : stdfs::directory_iterator(kSource / "tests/fixtures/hacks/python")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  int cheats = 0, honest = 0;
  for (const auto& dir : dirs) {
    SCOPED_TRACE(dir.filename().string());
    auto text = fs::read_file(dir / "expected.json");
    ASSERT_TRUE(text.ok()) << text.status().message();
    const auto expected = nlohmann::json::parse(*text);
    const auto reasons = expected.at("reasons").get<std::vector<std::string>>();
    const std::string task = expected.at("task").get<std::string>();
    EvalReport pub = evaluate_dir(task, dir, "all");
    const WorkloadResult* rej = first_rejection(pub);
    EvalReport hold;
    if (rej == nullptr) {
      hold = evaluate_dir(task, dir, "holdout");
      rej = first_rejection(hold);
    }
    std::cout << dir.filename().string() << ": "
              << (rej != nullptr ? std::string(verdict_name(rej->verdict)) + " (" + rej->reason + ")" : "PASSED")
              << "\n";
    if (expected.at("expect") == "pass") {
      ++honest;
      EXPECT_EQ(rej, nullptr) << "honest solution rejected: " << rej->reason << " " << rej->message;
      continue;
    }
    ++cheats;
    ASSERT_NE(rej, nullptr) << "the cheat passed every public and holdout workload";
    EXPECT_TRUE(std::count(reasons.begin(), reasons.end(), rej->reason))
        << "rejected for another reason: " << rej->reason << " (" << verdict_name(rej->verdict)
        << "): " << rej->message;
  }
  EXPECT_GE(cheats, 7);
  EXPECT_GE(honest, 2);
}

// kda times a Python call in kda-runner's C++, which the candidate cannot patch: a solution that
// freezes time.perf_counter, time.monotonic and time.time and then sleeps 3 ms per call is timed
// at 3 ms or more.
TEST(PythonSolutions, PatchedPythonClocksDoNotHideACallsTime) {
  REQUIRE_PYTHON_RUNNER();
  const stdfs::path dir = stdfs::temp_directory_path() / ("kda_py_clock_" + std::to_string(::getpid()));
  stdfs::remove_all(dir);
  stdfs::create_directories(dir);
  const auto honest = kSource / "tests/fixtures/hacks/python/honest_patches_the_clock";
  stdfs::copy_file(honest / "solution.json", dir / "solution.json");
  auto source = fs::read_file(honest / "kernel.py");
  ASSERT_TRUE(source.ok());
  std::string text = *source;
  text.replace(text.find("def run("), 0, "_sleep = time.sleep\n\n\n");
  text += "    _sleep(0.003)\n";
  ASSERT_TRUE(fs::write_file_atomic(dir / "kernel.py", text).ok());
  EvalReport r = evaluate_dir("tasks/host/rmsnorm", dir, "991de80f-5989-5d9d-84fd-6000970aafaf");
  ASSERT_EQ(r.workloads.size(), 1u);
  EXPECT_EQ(r.workloads[0].verdict, Verdict::kPassed) << r.workloads[0].reason << " " << r.workloads[0].message;
  EXPECT_GE(r.workloads[0].latency_ms, 3.0);
  stdfs::remove_all(dir);
}

// A JIT-compiling solution's runner (LoadRequest::jit_dir, given to triton solutions): confined as
// any candidate, yet its compilers may run and write under the JIT directory, as Triton's launcher
// build does (gcc: cc1, as, collect2, ld, reading /usr/include). The module compiles a C file into
// a shared library at import, confined. The same module without a JIT directory is refused as a
// process spawn. Needs gcc, which a kda build machine has.
TEST(PythonSolutions, AJitSolutionsRunnerMayRunItsCompilersInsideItsDirectoryAndNothingElse) {
  REQUIRE_PYTHON_RUNNER();
  const stdfs::path dir = stdfs::temp_directory_path() / ("kda_py_jit_" + std::to_string(::getpid()));
  stdfs::remove_all(dir);
  stdfs::create_directories(dir / "src");
  const std::string module = R"(import os
import subprocess

subprocess.run(["gcc", "--version"], check=True, capture_output=True)
_tmp = os.environ["TMPDIR"]
with open(os.path.join(_tmp, "stub.c"), "w") as f:
    f.write("#include <stdio.h>\nint stub(void) { return puts(\"jit\"); }\n")
subprocess.run(["gcc", "-shared", "-fPIC", "-O1", os.path.join(_tmp, "stub.c"), "-o", os.path.join(_tmp, "stub.so")],
               check=True, capture_output=True)


def run(x, y):
    pass
)";
  ASSERT_TRUE(fs::write_file_atomic(dir / "src/kernel.py", module).ok());
  for (bool jit : {true, false}) {
    SCOPED_TRACE(jit ? "with a JIT directory" : "without");
    RunnerOptions o;
    o.runner_binary = KDA_RUNNER;
    o.sandbox = true;
    if (const std::string py = python_interpreter(); !py.empty()) o.extra_env.push_back("KDA_PYTHON=" + py);
    auto r = RunnerClient::start(o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    r->send_load(dir / "src/kernel.py", "run", 60, false, jit ? dir / "jit" : stdfs::path());
    CallOutcome out = r->receive();
    if (jit) {
      ASSERT_EQ(out.kind, CallOutcome::Kind::kOk) << out.message << "\n" << out.log;
      EXPECT_TRUE(stdfs::exists(dir / "jit/tmp/stub.so"));
      ASSERT_TRUE(out.reply.contains("sandbox")) << out.reply.dump();
      EXPECT_EQ(out.reply["sandbox"]["jit"]["dir"], (dir / "jit").string());
      EXPECT_FALSE(out.reply["sandbox"]["jit"]["programs"].empty());
    } else {
      EXPECT_EQ(out.kind, CallOutcome::Kind::kFailed);
      EXPECT_NE(out.message.find("process_spawn"), std::string::npos) << out.message;
    }
  }
  stdfs::remove_all(dir);
}

}  // namespace
}  // namespace kda::eval
