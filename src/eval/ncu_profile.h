// One workload of one solution under Nsight Compute with kda's collection: the part of
// `kda ncu profile` that the loop's `profile` tool shares (the ncu command line, the report path
// rules, the run under ncu and what its failures mean). Reading and analysing the report is the
// caller's (src/ncu: load_report, analyze), so this stays free of the ncu reader.
//
// Collection: only the call the runner brackets with cudaProfilerStart/Stop (--profile-from-start
// off), the given section set (default full: SourceCounters, PmSampling, rules), source imported
// (-lineinfo builds), clocks left alone, caches flushed between passes, and a kernel filter on the
// candidate's own kernels (mangled names from ptxas).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "eval/tool_run.h"
#include "task/solution.h"
#include "task/task_pack.h"
#include "util/status.h"

namespace kda::eval {

// ncu's --kernel-name value matching exactly these mangled names ("regex:^(a|b)$", escaped).
std::string ncu_kernel_filter(const std::vector<std::string>& mangled);

// What ncu collects and under which cache and clock policy.
struct NcuCollection {
  std::string set = "full";            // --set; empty: none (only `metrics`)
  std::vector<std::string> metrics;    // --metrics, comma-joined (e.g. gpu__time_duration.sum)
  std::string cache_control = "all";   // --cache-control: all (flush between passes) | none
  std::string clock_control = "none";  // --clock-control: none (as kda times) | base (locked)
};

// The collection, checked: cache_control all|none, clock_control none|base, metric names of
// letters, digits, '_', '.', ':' (they travel as one comma-joined argument), and at least a set or
// one metric. Messages name the CLI option (--cache-control, --clock-control, --metrics).
Status validate(const NcuCollection& c);

// The argv prefix the runner is started under: `ncu` (absolute), the collection above, the kernel
// filter when `kernels` is not empty, --source-folders with `source_folders` (comma-joined; ncu
// searches them recursively for sources the -lineinfo paths no longer reach), --log-file
// `log_file`, -o `report`, -f.
std::vector<std::string> ncu_profile_argv(const std::string& ncu, const NcuCollection& collection,
                                          const std::vector<std::string>& kernels, const std::string& report,
                                          const std::string& log_file,
                                          const std::vector<std::string>& source_folders = {});

struct NcuProfileOptions {
  std::filesystem::path ncu;     // the ncu binary (find_tool(..., "ncu", "--ncu"))
  std::filesystem::path report;  // where the report goes; ".ncu-rep" is appended when missing
  std::string workload;          // uuid in workloads.jsonl
  NcuCollection collection;
  std::filesystem::path runner_binary;  // kda-runner
  uint64_t seed = 1;
  int warmup = 2;  // unprofiled calls before the profiled one
  std::string cuda_arch = "90a";
  double timeout_s = 600;  // runner start, load, and each call
  std::function<void(const std::string&)> progress;
};

struct NcuProfileRun {
  std::filesystem::path report;  // absolute, ends in .ncu-rep; exists when status is ok
  std::filesystem::path log;     // ncu's own log (report with .log)
  ToolRunResult run;
  // Why there is no report: the solution does not build (kFailed), the run stopped before the first
  // call (kIo: the tool, the runner, the driver) or at/after it (kFailed), ncu profiled no kernel
  // (kFailed), ncu wrote no report (kIo; a host-backend task launches no kernel). Messages carry
  // the compile log, runner output and ncu log tails.
  Status status;
};

// Builds the solution with -lineinfo and runs `workload` under ncu (eval::run_under_tool). An
// earlier file at the report path is removed first, so it can never pass for this run's. Errors:
// what run_under_tool refuses (unknown workload, other definition, runner not startable) and a
// report directory that cannot be made, an invalid collection; everything the candidate or ncu does is in `status`.
Result<NcuProfileRun> run_ncu_profile(const task::TaskPack& pack, const task::Solution& solution,
                                      const NcuProfileOptions& options);

}  // namespace kda::eval
