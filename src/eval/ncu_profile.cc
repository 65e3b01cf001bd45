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

Status validate(const NcuCollection& c) {
  if (c.cache_control != "all" && c.cache_control != "none")
    return Status::bad_input("--cache-control: '" + c.cache_control + "' is not one of all, none");
  if (c.clock_control != "none" && c.clock_control != "base")
    return Status::bad_input("--clock-control: '" + c.clock_control + "' is not one of none, base");
  for (const auto& m : c.metrics) {
    const bool ok = !m.empty() && std::all_of(m.begin(), m.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_' || ch == '.' || ch == ':';
    });
    if (!ok) return Status::bad_input("--metrics: '" + m + "' is not a metric name (letters, digits, _ . : only)");
  }
  if (c.set.empty() && c.metrics.empty()) return Status::bad_input("--set/--metrics: nothing to collect");
  return {};
}

std::vector<std::string> ncu_profile_argv(const std::string& ncu, const NcuCollection& collection,
                                          const std::vector<std::string>& kernels, const std::string& report,
                                          const std::string& log_file, const std::vector<std::string>& source_folders) {
  std::vector<std::string> argv{ncu,
                                // only the call the runner brackets with cudaProfilerStart/Stop:
                                // warm-up launches and the harness's own work are never profiled
                                "--profile-from-start", "off", "--target-processes", "all"};
  // the full set carries SourceCounters (per-PC stalls) and PmSampling; metrics alone (no set) are
  // one pass, e.g. gpu__time_duration.sum for a duration without the replay of a full set
  if (!collection.set.empty()) {
    argv.emplace_back("--set");
    argv.push_back(collection.set);
  }
  if (!collection.metrics.empty()) {
    std::string joined;
    for (const auto& m : collection.metrics) joined += (joined.empty() ? "" : ",") + m;
    argv.emplace_back("--metrics");
    argv.push_back(joined);
  }
  // clocks as kda times them (not locked) unless asked; caches flushed between passes, as kda
  // flushes L2 before every call, unless asked not to (the harness's own flush then stands alone)
  for (const std::string& a : {std::string("--import-source"), std::string("yes"), std::string("--clock-control"),
                               collection.clock_control, std::string("--cache-control"), collection.cache_control})
    argv.push_back(a);
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
  KDA_RETURN_IF_ERROR(validate(options.collection));
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
  const std::string ncu = options.ncu.string(), report = out.report.string(), log_file = out.log.string();
  const NcuCollection collection = options.collection;
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
    return ncu_profile_argv(ncu, collection, kernels, report, log_file, folders);
  };
  KDA_ASSIGN_OR_RETURN(out.run, run_under_tool(pack, solution, o));
  const ToolRunResult& run = out.run;

  // Phase: what the run left behind.
  if (run.stage == ToolRunStage::kBuild && !run.ok) {
    out.status = Status::failed(
        fmt::format("solution '{}' does not build:\n{}", solution.name, tail_lines(run.compile_log, 30)));
    return out;
  }
  const std::string tool_tail = tail_lines(run.tool_log, 20);
  // Before the first call the failure is the environment's (the tool, the runner, the driver); from
  // then on it is the solution's.
  const bool environment =
      run.stage == ToolRunStage::kStart || run.stage == ToolRunStage::kLoad || run.stage == ToolRunStage::kLayout;
  if (!run.ok) {
    out.status =
        Status(environment ? ErrorKind::kIo : ErrorKind::kFailed,
               fmt::format("the run under ncu stopped at {}: {}{}{}", tool_run_stage_name(run.stage), run.message,
                           run.runner_log.empty() ? "" : "\nrunner output:\n" + tail_lines(run.runner_log, 20),
                           tool_tail.empty() ? "" : "\nncu log (" + log_file + "):\n" + tool_tail));
    return out;
  }
  if (!stdfs::is_regular_file(out.report, ec)) {
    const bool none = run.tool_log.find("No kernels were profiled") != std::string::npos;
    const std::string log_part = tool_tail.empty() ? "\n(ncu wrote no log at " + log_file + ")"
                                                   : "\nncu log (" + log_file + "), tail:\n" + tool_tail;
    out.status =
        none ? Status::failed("ncu profiled no kernel (is the kernel filter right? does the call launch one?)" +
                              log_part)
             : Status::io("ncu wrote no report at " + report +
                          (run.backend == "host" ? " (a host-backend task launches no kernel)" : "") + log_part);
  }
  return out;
}

}  // namespace kda::eval
