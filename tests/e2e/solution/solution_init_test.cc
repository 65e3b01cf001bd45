// `kda solution init` for every built-in pack: the scaffold of a host pack is evaluated by the real
// evaluator, and every workload ends in RUNTIME_ERROR "entry point returned 100" (the not-yet-written
// computation), which shows its argument checks accept the real calls (a wrong count, dtype, device,
// rank or shape would return 1, 2 or 3); the scaffold of each CUDA and contest pack compiles with
// nvcc through kda's builder (where nvcc is installed). Bad requests change nothing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "eval/solution_build.h"
#include "proc/subprocess.h"
#include "task/solution.h"
#include "util/fs.h"

namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

const stdfs::path kSource = KDA_SOURCE_DIR;

class SolutionInit : public ::testing::Test {
 protected:
  void SetUp() override { tmp_ = *kda::fs::make_temp_dir(stdfs::temp_directory_path(), "kda-solution-init"); }
  void TearDown() override {
    if (!HasFailure()) stdfs::remove_all(tmp_);
  }
  kda::proc::RunResult kda(std::vector<std::string> args) {
    args.insert(args.begin(), KDA_BINARY);
    kda::proc::RunOptions o;
    o.argv = args;
    o.timeout_seconds = 300;
    auto r = kda::proc::run(o);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : kda::proc::RunResult{};
  }
  std::vector<stdfs::path> packs(const char* group) {
    std::vector<stdfs::path> out;
    for (const auto& e : stdfs::directory_iterator(kSource / "tasks" / group))
      if (stdfs::exists(e.path() / "definition.json")) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
  }
  stdfs::path tmp_;
};

TEST_F(SolutionInit, HostScaffoldsLoadAndAcceptTheRealCalls) {
  for (const auto& pack : packs("host")) {
    const stdfs::path out = tmp_ / pack.filename();
    auto init = kda({"solution", "init", pack.string(), "--out", out.string(), "--json"});
    ASSERT_EQ(init.exit.exit_code, 0) << init.stderr_text;
    EXPECT_EQ(json::parse(init.stdout_text)["language"], "cpp");
    auto eval = kda({"eval", out.string(), "--task", pack.string(), "--json"});
    EXPECT_EQ(eval.exit.exit_code, 1) << eval.stderr_text;
    const json report = json::parse(eval.stdout_text, nullptr, false);
    ASSERT_TRUE(report.is_object()) << pack << ": " << eval.stderr_text;
    ASSERT_FALSE(report["traces"].empty());
    for (const auto& t : report["traces"]) {
      EXPECT_EQ(t["evaluation"]["status"], "RUNTIME_ERROR") << pack;
      EXPECT_EQ(t["evaluation"]["kda"]["message"], "entry point returned 100")
          << pack << ": " << t["evaluation"]["kda"]["message"];
    }
  }
}

TEST_F(SolutionInit, CudaScaffoldsCompileWithNvcc) {
  std::vector<stdfs::path> all = packs("cuda");
  for (const auto& p : packs("contest")) all.push_back(p);
  ASSERT_GE(all.size(), 8u);
  for (const auto& pack : all) {
    const stdfs::path out = tmp_ / pack.filename();
    auto init = kda({"solution", "init", pack.string(), "--out", out.string()});
    ASSERT_EQ(init.exit.exit_code, 0) << init.stderr_text;
    auto sol = kda::task::load_solution(out);
    ASSERT_TRUE(sol.ok()) << sol.status().message();
    EXPECT_EQ(sol->spec.language, "cuda");
    auto lib = kda::eval::build_solution(*sol, {});
    if (!lib.ok() && lib.status().kind() == kda::ErrorKind::kNotFound) GTEST_SKIP() << lib.status().message();
    ASSERT_TRUE(lib.ok()) << lib.status().message();
    EXPECT_TRUE(lib->ok) << pack << ": " << kda::eval::build_failure_summary(*lib) << "\n" << lib->log.substr(0, 3000);
  }
}

// A Python scaffold of each host pack is evaluated for real: every workload ends in RUNTIME_ERROR
// naming its NotImplementedError, so its shape checks accepted the real calls (a failed assert would
// name an AssertionError instead).
TEST_F(SolutionInit, PythonScaffoldsLoadAndAcceptTheRealCalls) {
  for (const auto& pack : packs("host")) {
    const stdfs::path out = tmp_ / (pack.filename().string() + "_py");
    auto init = kda({"solution", "init", pack.string(), "--out", out.string(), "--language", "python", "--json"});
    ASSERT_EQ(init.exit.exit_code, 0) << init.stderr_text;
    EXPECT_EQ(json::parse(init.stdout_text)["entry_point"], "kernel.py::run");
    auto eval = kda({"eval", out.string(), "--task", pack.string(), "--json"});
    EXPECT_EQ(eval.exit.exit_code, 1) << eval.stderr_text;
    const json report = json::parse(eval.stdout_text, nullptr, false);
    ASSERT_TRUE(report.is_object()) << pack << ": " << eval.stderr_text;
    ASSERT_FALSE(report["traces"].empty());
    for (const auto& t : report["traces"]) {
      const std::string message = t["evaluation"]["kda"].value("message", "");
      if (message.find("cannot run Python solutions") != std::string::npos)
        GTEST_SKIP() << "kda-runner was built without the embedded interpreter: " << message;
      EXPECT_EQ(t["evaluation"]["status"], "RUNTIME_ERROR") << pack;
      EXPECT_NE(message.find("NotImplementedError"), std::string::npos) << pack << ": " << message;
      EXPECT_NE(message.find("the computation is not written yet"), std::string::npos) << message;
    }
  }
}

// Python and Triton scaffolds of every CUDA and contest pack pass kda's build step (every .py file
// parsed by Python's compile()); Triton on a host pack is refused.
TEST_F(SolutionInit, PythonAndTritonScaffoldsOfCudaPacksParse) {
  std::vector<stdfs::path> all = packs("cuda");
  for (const auto& p : packs("contest")) all.push_back(p);
  for (const auto& pack : all)
    for (const char* language : {"python", "triton"}) {
      const stdfs::path out = tmp_ / (pack.filename().string() + "_" + language);
      auto init = kda({"solution", "init", pack.string(), "--out", out.string(), "--language", language});
      ASSERT_EQ(init.exit.exit_code, 0) << init.stderr_text;
      auto sol = kda::task::load_solution(out);
      ASSERT_TRUE(sol.ok()) << sol.status().message();
      EXPECT_EQ(sol->spec.language, language);
      auto lib = kda::eval::build_solution(*sol, {});
      ASSERT_TRUE(lib.ok()) << lib.status().message();
      EXPECT_TRUE(lib->ok) << pack << " " << language << ": " << lib->log.substr(0, 2000);
    }
  auto host = kda({"solution", "init", (kSource / "tasks/host/rmsnorm").string(), "--out", (tmp_ / "t").string(),
                   "--language", "triton"});
  EXPECT_EQ(host.exit.exit_code, 2);
  EXPECT_NE(host.stderr_text.find("Triton runs on a GPU"), std::string::npos) << host.stderr_text;
  EXPECT_FALSE(stdfs::exists(tmp_ / "t"));
}

TEST_F(SolutionInit, BadRequestsChangeNothing) {
  const stdfs::path pack = kSource / "tasks/host/rmsnorm";
  const stdfs::path busy = tmp_ / "busy";
  ASSERT_TRUE(kda::fs::ensure_dir(busy).ok());
  ASSERT_TRUE(kda::fs::write_file_atomic(busy / "notes.txt", "mine").ok());
  auto r = kda({"solution", "init", pack.string(), "--out", busy.string()});
  EXPECT_EQ(r.exit.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("exists and is not an empty directory; nothing written"), std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(std::distance(stdfs::directory_iterator(busy), stdfs::directory_iterator()), 1);
  auto lang = kda({"solution", "init", pack.string(), "--out", (tmp_ / "x").string(), "--language", "cuda"});
  EXPECT_EQ(lang.exit.exit_code, 2);
  EXPECT_NE(lang.stderr_text.find("is a host pack; its solutions are cpp or python"), std::string::npos)
      << lang.stderr_text;
  auto nopack = kda({"solution", "init", (tmp_ / "no-pack").string(), "--out", (tmp_ / "y").string()});
  EXPECT_EQ(nopack.exit.exit_code, 2) << nopack.stderr_text;
  EXPECT_FALSE(stdfs::exists(tmp_ / "x"));
  EXPECT_FALSE(stdfs::exists(tmp_ / "y"));
  for (const auto& e : stdfs::directory_iterator(tmp_))
    EXPECT_EQ(e.path().filename().string().find(".init"), std::string::npos) << e.path();
}

}  // namespace
