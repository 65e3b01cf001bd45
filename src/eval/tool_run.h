// Runs ONE solution on ONE workload of a pack inside a candidate runner that is started under a
// tool (Nsight Compute, compute-sanitizer): the driver behind `kda ncu profile` and `kda sanitize`.
//
// Phases: build (with -lineinfo on request) -> start the runner under the wrapper (role candidate,
// sandbox off: the tools inject libraries that talk to their host process) -> load -> layout ->
// inputs from the seed -> `warmup` plain calls -> one call with "profile_range": true (the CUDA
// runner brackets it with cudaProfilerStart/Stop, so `ncu --profile-from-start off` sees only that
// call) -> stop the runner, so the tool writes its report / summary.
//
// This is a diagnostic run, not an evaluation: nothing is compared with a reference and no verdict
// is given. Guard bands are still filled and checked after the last call, because a sanitizer
// cannot see a write that stays inside the runner's single device allocation of the arena.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/solution_build.h"
#include "task/solution.h"
#include "task/task_pack.h"
#include "util/status.h"

namespace kda::eval {

struct ToolRunOptions {
  std::string workload;              // uuid of a workload in workloads.jsonl (never holdout)
  std::vector<std::string> wrapper;  // argv prefix: the tool and its options (argv[0] absolute)
  // When set, called after the build to make the wrapper (e.g. a kernel filter from the kernels
  // ptxas reported); replaces `wrapper`.
  std::function<Result<std::vector<std::string>>(const BuiltLibrary&)> wrapper_for;
  std::vector<std::string> extra_env;   // NAME=value for the tool (the runner's env is scrubbed)
  std::filesystem::path runner_binary;  // kda-runner
  uint64_t seed = 1;                    // inputs derive from (seed, uuid)
  int warmup = 1;                       // plain calls before the profiled one
  bool profile_range = true;            // send "profile_range" with the last call (ncu); a sanitizer
                                        // checks every call, so it needs no range
  bool lineinfo = false;                // build with -lineinfo (ncu source view)
  std::string cuda_arch = "90a";
  double timeout_s = 600;  // runner start, load, and each call
  // A file the wrapper writes its own output to (ncu/compute-sanitizer --log-file); read back
  // into ToolRunResult::tool_log once the runner has stopped.
  std::filesystem::path tool_log;
  std::function<void(const std::string&)> progress;
};

// How far the run got. kDone: the profiled call was made (ok or not, see `ok`).
enum class ToolRunStage { kBuild, kStart, kLoad, kLayout, kWarmup, kCall, kDone };
const char* tool_run_stage_name(ToolRunStage s);

struct ToolRunResult {
  std::string workload;
  std::string backend;                              // host | cuda
  std::vector<std::string> wrapper;                 // the argv prefix actually used
  nlohmann::json build = nlohmann::json::object();  // build info + {"lineinfo", "cuda_arch"}
  std::string compile_log;                          // when the build failed
  std::vector<std::string> kernels;                 // mangled names of the candidate's kernels (ptxas)
  ToolRunStage stage = ToolRunStage::kBuild;        // the stage reached (where it stopped unless kDone)
  bool ok = false;                                  // every call returned ok
  std::string message;                              // why it stopped, when !ok
  nlohmann::json reply;                             // the runner's reply to the profiled call
  std::string runner_log;                           // runner's captured output (when it failed or died)
  std::string tool_log;                             // contents of options.tool_log, if written
  std::vector<std::string> damaged_guards;          // slots whose guard bands the last call wrote
  double call_wall_s = 0;                           // the profiled call, evaluator's clock
  double wall_s = 0;                                // the whole run
  nlohmann::json to_json() const;
};

// Errors: the workload is not in workloads.jsonl, the solution is for another definition or
// language, the build environment failed, the runner or the tool cannot be started. What the
// candidate does (compile error, failing or crashing call) is a ToolRunResult with !ok.
Result<ToolRunResult> run_under_tool(const task::TaskPack& pack, const task::Solution& solution,
                                     const ToolRunOptions& options);

// A tool's absolute path: `explicit_path` when given (it must exist), else `name` on PATH, else
// /usr/local/cuda/bin/<name>. The kNotFound error names `flag` (e.g. "--ncu") as the way out.
Result<std::filesystem::path> find_tool(const std::string& explicit_path, const std::string& name,
                                        const std::string& flag);

// kda-runner: $KDA_RUNNER, else beside the running executable.
std::filesystem::path default_runner_binary();

// Last `max_lines` lines of `text` (a log tail for error messages).
std::string tail_lines(const std::string& text, size_t max_lines);

}  // namespace kda::eval
