#include "eval/ncu_profile.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/fs.h"

namespace kda::eval {

namespace stdfs = std::filesystem;

// Mangled names are unique and free of spaces, commas and template brackets, unlike the function
// names ncu matches by default; every other character is escaped for the regex.
std::string ncu_kernel_filter(const std::vector<std::string>& mangled) {
  std::string alt;
  for (const auto& m : mangled) {
    std::string e;
    for (char c : m) {
      if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_') e += '\\';
      e += c;
    }
    alt += (alt.empty() ? "" : "|") + e;
  }
  return "regex:^(" + alt + ")$";
}

std::vector<std::string> ncu_profile_argv(const std::string& ncu, const std::string& set,
                                          const std::vector<std::string>& kernels, const std::string& report,
                                          const std::string& log_file, const std::vector<std::string>& source_folders) {
  std::vector<std::string> argv{ncu,
                                // only the call the runner brackets with cudaProfilerStart/Stop:
                                // warm-up launches and the harness's own work are never profiled
                                "--profile-from-start", "off", "--target-processes", "all",
                                // the full set carries SourceCounters (per-PC stalls) and PmSampling
                                "--set", set, "--import-source", "yes",
                                // clocks as kda times them (not locked); caches flushed between
                                // passes, as kda flushes L2 before every call
                                "--clock-control", "none", "--cache-control", "all"};
  if (!kernels.empty()) {
    for (const char* a : {"--kernel-name-base", "mangled", "--kernel-name"}) argv.emplace_back(a);
    argv.push_back(ncu_kernel_filter(kernels));
  }
  std::string folders;
  for (const auto& f : source_folders)
    if (!f.empty() && f.find(',') == std::string::npos) folders += (folders.empty() ? "" : ",") + f;
  if (!folders.empty()) {
    argv.emplace_back("--source-folders");
    argv.push_back(folders);
  }
  for (const std::string& a : {std::string("--log-file"), log_file, std::string("-o"), report, std::string("-f")})
    argv.push_back(a);
  return argv;
}

Result<NcuProfileRun> run_ncu_profile(const task::TaskPack& pack, const task::Solution& solution,
                                      const NcuProfileOptions& options) {
  // Phase: the report's place (ncu appends .ncu-rep when it is missing, so kda does it first).
  NcuProfileRun out;
  out.report = options.report;
  if (out.report.extension() != ".ncu-rep") out.report += ".ncu-rep";
  std::error_code ec;
  out.report = stdfs::absolute(out.report, ec);
  KDA_RETURN_IF_ERROR(fs::ensure_dir(out.report.parent_path()).with_context("report directory"));
  stdfs::remove(out.report, ec);  // a report left from an earlier run must not pass for this one's
  out.log = stdfs::path(out.report).replace_extension(".log");

  // Phase: one run of the workload under ncu (the kernel filter needs the build's kernel names).
  ToolRunOptions o;
  o.workload = options.workload;
  o.runner_binary = options.runner_binary;
  o.seed = options.seed;
  o.warmup = options.warmup;
  o.lineinfo = true;
  o.cuda_arch = options.cuda_arch;
  o.timeout_s = options.timeout_s;
  o.tool_log = out.log;
  o.progress = options.progress;
  const std::string ncu = options.ncu.string(), set = options.set, report = out.report.string(),
                    log_file = out.log.string();
  o.wrapper_for = [&](const BuiltLibrary& lib) -> Result<std::vector<std::string>> {
    std::vector<std::string> kernels;
    for (const auto& k : lib.info.value("resources", nlohmann::json::array()))
      kernels.push_back(k.value("mangled", std::string{}));
    std::erase(kernels, std::string{});
    // The build compiled in a temporary directory that was then renamed to the cache entry, so the
    // paths -lineinfo recorded are gone: ncu finds the sources again under the entry's src/.
    std::vector<std::string> folders;
    std::error_code ec;
    if (!lib.library.empty() && stdfs::is_directory(lib.library.parent_path() / "src", ec))
      folders.push_back((lib.library.parent_path() / "src").string());
    return ncu_profile_argv(ncu, set, kernels, report, log_file, folders);
  };
  KDA_ASSIGN_OR_RETURN(out.run, run_under_tool(pack, solution, o));
  const ToolRunResult& run = out.run;

  // Phase: what the run left behind.
  if (run.stage == ToolRunStage::kBuild && !run.ok) {
    out.status = Status::failed(fmt::format("solution '{}' does not build:\n{}", solution.name, tail_lines(run.compile_log, 30)));
    return out;
  }
  const std::string tool_tail = tail_lines(run.tool_log, 20);
  // Before the first call the failure is the environment's (the tool, the runner, the driver); from
  // then on it is the solution's.
  const bool environment =
      run.stage == ToolRunStage::kStart || run.stage == ToolRunStage::kLoad || run.stage == ToolRunStage::kLayout;
  if (!run.ok) {
    out.status = Status(environment ? ErrorKind::kIo : ErrorKind::kFailed,
                        fmt::format("the run under ncu stopped at {}: {}{}{}", tool_run_stage_name(run.stage), run.message,
                                    run.runner_log.empty() ? "" : "\nrunner output:\n" + tail_lines(run.runner_log, 20),
                                    tool_tail.empty() ? "" : "\nncu log (" + log_file + "):\n" + tool_tail));
    return out;
  }
  if (!stdfs::is_regular_file(out.report, ec)) {
    const bool none = run.tool_log.find("No kernels were profiled") != std::string::npos;
    const std::string log_part = tool_tail.empty() ? "\n(ncu wrote no log at " + log_file + ")"
                                                   : "\nncu log (" + log_file + "), tail:\n" + tool_tail;
    out.status = none ? Status::failed("ncu profiled no kernel (is the kernel filter right? does the call launch one?)" + log_part)
                      : Status::io("ncu wrote no report at " + report +
                                   (run.backend == "host" ? " (a host-backend task launches no kernel)" : "") + log_part);
  }
  return out;
}

}  // namespace kda::eval
