// FlashInfer-Bench solutions with the tvm-ffi binding, unmodified (docs/solutions.md "The tvm-ffi
// binding"): the host fixture PASSES every workload through the real evaluator, also with binding
// null (FlashInfer-Bench's default); what a function raises, a wrong parameter list, a missing
// export and the unsupported bindings each end with their own verdict and a message that says why;
// the CUDA fixture compiles with nvcc to a library whose entry is the tvm-ffi export.
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
const stdfs::path kHostFixture = kSource / "tests/fixtures/solutions/host_rmsnorm/tvm_ffi";

class TvmFfi : public ::testing::Test {
 protected:
  void SetUp() override { tmp_ = *kda::fs::make_temp_dir(stdfs::temp_directory_path(), "kda-tvm-ffi"); }
  void TearDown() override {
    if (!HasFailure()) stdfs::remove_all(tmp_);
  }
  // kda eval --json of `solution` on the host rmsnorm pack; the report (exit code in *rc).
  json eval(const stdfs::path& solution, const std::string& workloads, int* rc) {
    kda::proc::RunOptions o;
    o.argv = {KDA_BINARY,    "eval",    solution.string(), "--task", (kSource / "tasks/host/rmsnorm").string(),
              "--workloads", workloads, "--json",          "--quiet"};
    o.timeout_seconds = 300;
    auto r = kda::proc::run(o);
    EXPECT_TRUE(r.ok());
    if (!r.ok()) return json();
    *rc = r->exit.exit_code;
    json report = json::parse(r->stdout_text, nullptr, false);
    EXPECT_TRUE(report.is_object()) << r->stderr_text;
    return report;
  }
  // A copy of the host fixture with `kernel` as its source and `binding` in its spec.
  stdfs::path variant(const std::string& name, const std::string& kernel, const json& binding) {
    const stdfs::path dir = tmp_ / name;
    stdfs::create_directories(dir);
    json sol = json::parse(*kda::fs::read_file(kHostFixture / "solution.json"));
    sol["spec"]["binding"] = binding;
    EXPECT_TRUE(kda::fs::write_file_atomic(dir / "solution.json", sol.dump(2)).ok());
    EXPECT_TRUE(kda::fs::write_file_atomic(dir / "kernel.cc", kernel).ok());
    return dir;
  }
  static std::string fixture_kernel() { return *kda::fs::read_file(kHostFixture / "kernel.cc"); }
  static void expect_every(const json& report, const std::string& status, const std::string& message_has) {
    ASSERT_TRUE(report.contains("traces")) << report.dump();
    ASSERT_FALSE(report["traces"].empty());
    for (const auto& t : report["traces"]) {
      EXPECT_EQ(t["evaluation"]["status"], status) << t["evaluation"]["kda"].dump();
      const std::string message = t["evaluation"]["kda"].value("message", "");
      EXPECT_NE(message.find(message_has), std::string::npos) << message;
    }
  }
  stdfs::path tmp_;
};

TEST_F(TvmFfi, HostSolutionPassesEveryWorkloadAsItIs) {
  int rc = -1;
  const json report = eval(kHostFixture, "all", &rc);
  EXPECT_EQ(rc, 0);
  expect_every(report, "PASSED", "");
  EXPECT_GE(report["traces"].size(), 10u);
  // The trace says what ran it: this machine's CPU and the compiler that built the solution.
  const json env = report["traces"][0]["evaluation"]["environment"];
  const std::string hardware = env.value("hardware", "");
  EXPECT_NE(hardware.find("host CPU"), std::string::npos) << env.dump();
  EXPECT_EQ(hardware.find("H200"), std::string::npos) << env.dump();
  EXPECT_FALSE(env["libs"].value("compiler", "").empty()) << env.dump();
}

TEST_F(TvmFfi, BindingNullFindsTheTvmFfiExport) {
  int rc = -1;
  const json report = eval(variant("null_binding", fixture_kernel(), nullptr), "dev", &rc);
  EXPECT_EQ(rc, 0);
  expect_every(report, "PASSED", "");
}

TEST_F(TvmFfi, WhatTheFunctionRaisesIsTheRuntimeErrorMessage) {
  std::string kernel = fixture_kernel();
  const std::string at = "  const int64_t rows = x.size(0), hidden = x.size(-1);\n";
  ASSERT_NE(kernel.find(at), std::string::npos);
  kernel.replace(kernel.find(at), at.size(),
                 at + "  if (hidden > 0) TVM_FFI_THROW(ValueError) << \"no kernel for hidden_size \" << hidden;\n");
  int rc = -1;
  const json report = eval(variant("raises", kernel, "tvm-ffi"), "dev", &rc);
  EXPECT_EQ(rc, 1);
  // The kind, where in the solution's own source it was raised, and the text.
  expect_every(report, "RUNTIME_ERROR", "ValueError: kernel.cc:");
  expect_every(report, "RUNTIME_ERROR", "no kernel for hidden_size ");
}

TEST_F(TvmFfi, AWrongParameterListIsATypeErrorNamingIt) {
  std::string kernel = fixture_kernel();
  const std::string sig = "void Run(TensorView x, TensorView weight, float eps, TensorView y, TensorView inv_rms) {";
  ASSERT_NE(kernel.find(sig), std::string::npos);
  kernel.replace(kernel.find(sig), sig.size(),
                 "void Run(TensorView x, TensorView weight, TensorView y, TensorView inv_rms) {\n  float eps = 1e-6f;");
  int rc = -1;
  expect_every(eval(variant("arity", kernel, "tvm-ffi"), "dev", &rc), "RUNTIME_ERROR",
               "TypeError: Mismatched number of arguments when calling `run`: expected 4, got 5");
  EXPECT_EQ(rc, 1);

  // eps declared as a tensor: the scalar arrives as a float, not a DLTensor*.
  kernel = fixture_kernel();
  kernel.replace(kernel.find(sig), sig.size(),
                 "void Run(TensorView x, TensorView weight, TensorView eps_t, TensorView y, TensorView inv_rms) {\n"
                 "  float eps = 1e-6f;");
  expect_every(eval(variant("scalar_as_tensor", kernel, "tvm-ffi"), "dev", &rc), "RUNTIME_ERROR",
               "TypeError: Mismatched type on argument #2 when calling `run`: expected Tensor, got float");
}

TEST_F(TvmFfi, BindingTvmFfiWithoutTheExportIsACompileErrorSayingWhatIsMissing) {
  const std::string kda_abi =
      "#include <dlpack/dlpack.h>\n#include <cstdint>\n"
      "extern \"C\" int run(const DLTensor*, int64_t, DLTensor*, int64_t, void*) { return 0; }\n";
  int rc = -1;
  expect_every(eval(variant("no_export", kda_abi, "tvm-ffi"), "dev", &rc), "COMPILE_ERROR",
               "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, <function>)");
  EXPECT_EQ(rc, 1);
}

TEST_F(TvmFfi, UnsupportedBindingsAreRefusedSayingSo) {
  int rc = -1;
  // binding "torch" builds for a CUDA pack only (as FlashInfer-Bench's torch builder); this pack is the host's.
  expect_every(eval(variant("torch", fixture_kernel(), "torch"), "dev", &rc), "COMPILE_ERROR",
               "binding \"torch\" builds for a CUDA pack only");
  const stdfs::path no_dps = variant("no_dps", fixture_kernel(), "tvm-ffi");
  json sol = json::parse(*kda::fs::read_file(no_dps / "solution.json"));
  sol["spec"]["destination_passing_style"] = false;
  ASSERT_TRUE(kda::fs::write_file_atomic(no_dps / "solution.json", sol.dump(2)).ok());
  expect_every(eval(no_dps, "dev", &rc), "COMPILE_ERROR", "destination_passing_style false");
}

TEST_F(TvmFfi, CudaSolutionCompilesToTheTvmFfiExport) {
  auto sol = kda::task::load_solution(kSource / "tests/fixtures/solutions/cuda_rmsnorm/tvm_ffi");
  ASSERT_TRUE(sol.ok()) << sol.status().message();
  auto lib = kda::eval::build_solution(*sol, {});
  if (!lib.ok() && lib.status().kind() == kda::ErrorKind::kNotFound) GTEST_SKIP() << lib.status().message();
  ASSERT_TRUE(lib.ok()) << lib.status().message();
  ASSERT_TRUE(lib->ok) << kda::eval::build_failure_summary(*lib) << "\n" << lib->log.substr(0, 3000);
  EXPECT_EQ(lib->symbol, "__tvm_ffi_run");
}

}  // namespace
