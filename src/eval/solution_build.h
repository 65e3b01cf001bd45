// Builds a task Solution into a shared library through the content-addressed build cache.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "task/build_options.h"
#include "task/solution.h"
#include "util/status.h"

namespace kda::eval {

struct BuildSettings {
  std::string cuda_arch = "90a";
  bool lineinfo = false;  // -lineinfo for profiling
  bool cuda = true;       // a CUDA pack (binding "torch" builds only there, as FlashInfer-Bench's does)
  // The task policy's libraries (task.toml [policy] libraries): a solution's spec.dependencies may
  // name these (each is linked, -l<name>) or a header-only library (kHeaderOnlyDependencies).
  std::vector<std::string> allowed_libraries;
};

// Dependencies that need no library: headers the CUDA toolkit ships (CUB, Thrust, libcu++ / CCCL)
// or that a solution carries in its own sources or the machine provides (CUTLASS, CuTe:
// kMachineHeaderLibraries, machine_headers.h).
inline const std::vector<std::string> kHeaderOnlyDependencies = {"cccl", "cub",        "cutlass",
                                                                 "cute", "libcudacxx", "thrust"};

struct BuiltLibrary {
  bool ok = false;                // false: COMPILE_ERROR (log says why)
  std::filesystem::path library;  // the cached .so
  std::string symbol;             // entry point function
  std::string log;                // compiler output
  bool python = false;            // called through kda-runner's interpreter: python/triton, binding torch
  // binding "torch": the extension module's name (`library` is the built module, imported by the
  // interpreter; its entry function is the module's attribute `symbol`); "" otherwise.
  std::string python_module;
  // Python or Triton sources, no compiled library (python without python_module): no ELF to audit,
  // and its kernels are its JIT's.
  bool python_source() const { return python && python_module.empty(); }
  bool returns_outputs = false;  // destination_passing_style false: the entry function returns the outputs
  // language triton: the staged solution's own directory for its JIT compiler's cache and temporary
  // files (beside the staged sources, so one solution's content never reads another's cache).
  std::filesystem::path jit_dir;
  nlohmann::json info = nlohmann::json::object();  // cache key, hit, language, resources (ptxas)
};

// Why a library did not build, in one line: the builder's status ("compile error", "entry point run
// not exported (found C++ symbol ...)") and, for compile and link errors, the log's first error line
// (build::error_lines), e.g. "compile error: kernel.cu:3:1: error: expected ';'".
std::string build_failure_summary(const BuiltLibrary& lib);

// Errors are the environment's (no compiler, cache not writable); a solution that does not compile,
// or whose binding kda does not build (task::not_evaluable_reason), is a BuiltLibrary with ok == false.
Result<BuiltLibrary> build_solution(const task::Solution& solution, const BuildSettings& settings);

}  // namespace kda::eval
