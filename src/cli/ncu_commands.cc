// `kda ncu profile|analyze|diff`: profile one workload of a task under Nsight Compute, read reports
// natively (or ncu's CSV pages) and turn them into ranked, evidenced advice, or say what moved
// between two reports.
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/solution_params.h"
#include "cli/tool_run_args.h"
#include "eval/ncu_profile.h"
#include "eval/tool_run.h"
#include "ncu/analyze.h"
#include "ncu/diff.h"
#include "ncu/load.h"
#include "task/task_pack.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kda::cli {

namespace {

using nlohmann::json;
namespace stdfs = std::filesystem;

std::vector<stdfs::path> as_paths(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

// ---- profile ----------------------------------------------------------------------------------------------
// <run dir or cwd>/profiles/<solution>-<uuid8>.ncu-rep
stdfs::path default_report_path(const std::string& run_dir, const std::string& solution, const std::string& uuid) {
  stdfs::path base = run_dir.empty() ? stdfs::current_path() : stdfs::path(run_dir);
  std::string name = solution;
  for (char& c : name)
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '-' && c != '_' && c != '.') c = '_';
  return base / "profiles" / (name + "-" + uuid.substr(0, 8) + ".ncu-rep");
}

int run_profile(const Args& args, Io& io) {
  auto fail_json = [&](const Status& st, const json& extra) {
    if (args.flag("json")) {
      json j = extra;
      j["ok"] = false;
      j["error"] = st.message();
      io.out << json_text(j) << "\n";
    }
    return fail(io, "kda ncu", st);
  };
  // Phase: inputs (task, solution, workload, the tool).
  const std::string task_dir = args.value_or("task", "");
  if (task_dir.empty()) return fail(io, "kda ncu", Status::bad_input("--task: required (a task pack directory)"));
  auto pack = task::load_task_pack(task_dir);
  if (!pack.ok()) return fail(io, "kda ncu", pack.status());
  auto solution = task::load_solution(args.positional("solution"));
  if (!solution.ok()) return fail(io, "kda ncu", solution.status());
  if (Status st = apply_params(args, args.positional("solution"), pack->definition, *solution, io, "kda ncu"); !st.ok())
    return fail(io, "kda ncu", st);
  const std::string uuid = args.value_or("workload", "");
  if (uuid.empty())
    return fail(
        io, "kda ncu",
        Status::bad_input("--workload: required (a uuid from " + (pack->root / "workloads.jsonl").string() + ")"));
  auto ncu = eval::find_tool(args.value_or("ncu", ""), "ncu", "--ncu");
  if (!ncu.ok()) return fail(io, "kda ncu", ncu.status());
  auto run_args = parse_tool_run_args(args);
  if (!run_args.ok()) return fail(io, "kda ncu", run_args.status());

  stdfs::path report = args.value("out") ? stdfs::path(*args.value("out"))
                                         : default_report_path(args.value_or("run-dir", ""), solution->name, uuid);

  // Phase: one run of the workload under ncu (eval::run_ncu_profile: the collection, the kernel filter).
  const bool quiet = args.flag("quiet");
  eval::NcuProfileOptions o;
  o.ncu = *ncu;
  o.report = report;
  o.workload = uuid;
  // --metrics alone collects only those metrics (one pass); --set with --metrics collects both.
  o.collection.metrics = util::split_list(args.value_or("metrics", ""));
  if (args.value("metrics") && o.collection.metrics.empty())
    return fail(io, "kda ncu",
                Status::bad_input("--metrics: names no metric (a comma-separated list, e.g. gpu__time_duration.sum)"));
  o.collection.set = args.value_or("set", o.collection.metrics.empty() ? "full" : "");
  o.collection.cache_control = args.value_or("cache-control", "all");
  o.collection.clock_control = args.value_or("clock-control", "none");
  if (Status st = eval::validate(o.collection); !st.ok()) return fail(io, "kda ncu", st);
  o.runner_binary = eval::default_runner_binary();
  o.seed = static_cast<uint64_t>(run_args->seed.value_or(1));
  o.warmup = static_cast<int>(run_args->warmup.value_or(2));
  o.cuda_arch = args.value_or("arch", "90a");
  o.timeout_s = run_args->timeout_s.value_or(600);
  o.progress = [&io, quiet](const std::string& line) {
    if (!quiet) io.err << "kda ncu profile: " << line << "\n";
  };
  auto prof = eval::run_ncu_profile(*pack, *solution, o);
  if (!prof.ok()) return fail(io, "kda ncu", prof.status());
  report = prof->report;
  json j{{"solution", solution->name},
         {"task", pack->root.string()},
         {"report", report.string()},
         {"log", prof->log.string()},
         {"run", prof->run.to_json()}};
  if (!prof->status.ok()) return fail_json(prof->status, j);

  // Phase: the report, read natively, and its analysis.
  auto loaded = ncu::load_report(report);
  if (!loaded.ok()) return fail_json(loaded.status(), j);
  auto analysis = ncu::analyze(*loaded, {});
  if (!analysis.ok()) return fail_json(analysis.status(), j);
  j["ok"] = true;
  j["analysis"] = ncu::to_json(*analysis);
  if (args.flag("json")) {
    io.out << json_text(j) << "\n";
  } else {
    io.out << "report: " << report.string() << "\n\n" << ncu::to_markdown(*analysis);
  }
  return kExitOk;
}

// ---- analyze ----------------------------------------------------------------------------------------------
int run_analyze(const Args& args, Io& io) {
  auto report = ncu::load_report(as_paths(args.positionals("report")));
  if (!report.ok()) return fail(io, "kda ncu", report.status());
  ncu::AnalyzeOptions options;
  options.kernel_regex = args.value_or("kernel", "");
  auto max = args.integer("max-priorities");
  if (!max.ok()) return fail(io, "kda ncu", max.status());
  if (*max) {
    if (**max < 1 || **max > 5)
      return fail(io, "kda ncu", Status::bad_input("--max-priorities: must be between 1 and 5"));
    options.max_priorities = static_cast<size_t>(**max);
  }
  auto analysis = ncu::analyze(*report, options);
  if (!analysis.ok()) return fail(io, "kda ncu", analysis.status());
  json j = ncu::to_json(*analysis);
  std::string md = ncu::to_markdown(*analysis);
  // Phase: write the artefacts a profile step or an agent picks up.
  if (auto out = args.value("out")) {
    stdfs::path dir(*out);
    Status st = fs::ensure_dir(dir);
    if (st.ok()) st = fs::write_file_atomic(dir / "REPORT.md", md);
    if (st.ok()) st = fs::write_file_atomic(dir / "analysis.json", json_text(j) + "\n");
    if (!st.ok()) return fail(io, "kda ncu", st.with_context("--out " + *out));
    io.err << "wrote " << (dir / "REPORT.md").string() << " and " << (dir / "analysis.json").string() << "\n";
  }
  if (args.flag("json"))
    io.out << json_text(j) << "\n";
  else
    io.out << md;
  return kExitOk;
}

// ---- diff -------------------------------------------------------------------------------------------------
int run_diff(const Args& args, Io& io) {
  auto before = ncu::load_report(stdfs::path(args.positional("before")));
  if (!before.ok()) return fail(io, "kda ncu", before.status());
  auto after = ncu::load_report(stdfs::path(args.positional("after")));
  if (!after.ok()) return fail(io, "kda ncu", after.status());
  auto min_move = args.number("min-move");
  if (!min_move.ok()) return fail(io, "kda ncu", min_move.status());
  ncu::ReportDiff diff = ncu::diff_reports(*before, *after);
  if (args.flag("json"))
    io.out << json_text(ncu::to_json(diff)) << "\n";
  else
    io.out << ncu::to_markdown(diff, min_move->value_or(1.0));
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> ncu_commands() {
  std::vector<CommandSpec> v;
  v.push_back({
      .name = "ncu profile",
      .summary = "Profile one workload of a task under Nsight Compute and analyze the report",
      .description =
          "Builds the solution with -lineinfo, starts the candidate runner under ncu (sandbox off: ncu injects a\n"
          "library that talks to its host process), runs --warmup plain calls and then one call that the runner\n"
          "brackets with cudaProfilerStart/Stop, so only that call's kernels are profiled (--profile-from-start off).\n"
          "Collection: --set full (source counters, PM sampling, rules), --import-source yes, --clock-control none\n"
          "(clocks as kda times them), --cache-control all, a kernel filter on the candidate's own kernels (their\n"
          "mangled names from ptxas). --metrics LIST without --set collects only those metrics in one pass (e.g.\n"
          "gpu__time_duration.sum for a kernel's duration); --cache-control none leaves the caches as the harness's\n"
          "own L2 flush before the call left them; --clock-control base locks clocks at base.\n"
          "The report goes to --out, default <run-dir>/profiles/<solution>-<uuid8>.ncu-rep\n"
          "(ncu's log beside it, .log); then prints the path and the `kda ncu analyze` summary, or JSON with --json.\n"
          "Host-backend tasks run too, but produce no report (there is no kernel).",
      .positionals = {{.name = "solution", .help = "solution directory or Solution JSON"}},
      .options =
          {{.name = "task", .short_name = 't', .metavar = "DIR", .help = "task pack directory", .env = "KDA_TASK"},
           {.name = "workload",
            .short_name = 'w',
            .metavar = "UUID",
            .help = "workload uuid from the pack's workloads.jsonl, or a start of one that names one workload"},
           param_option(),
           {.name = "out",
            .short_name = 'o',
            .metavar = "FILE",
            .help = "report path (.ncu-rep appended when missing)"},
           {.name = "run-dir",
            .metavar = "DIR",
            .help = "where profiles/ goes when --out is not given (default: the current directory)",
            .env = "KDA_RUN_DIR"},
           {.name = "ncu",
            .metavar = "PATH",
            .help = "the ncu binary (default: ncu on PATH, else /usr/local/cuda/bin/ncu)",
            .env = "KDA_NCU"},
           {.name = "set",
            .metavar = "NAME",
            .help = "ncu section set (default: full; no set when only --metrics is given)"},
           {.name = "metrics", .metavar = "LIST", .help = "comma-separated ncu metrics to collect"},
           {.name = "cache-control",
            .metavar = "MODE",
            .help = "ncu cache control between passes: all or none",
            .default_value = "all"},
           {.name = "clock-control",
            .metavar = "MODE",
            .help = "ncu clock control: none (as kda times) or base",
            .default_value = "none"},
           {.name = "warmup", .metavar = "N", .help = "unprofiled calls before the profiled one", .default_value = "2"},
           {.name = "seed", .metavar = "N", .help = "input seed", .default_value = "1"},
           {.name = "arch", .metavar = "SM", .help = "CUDA architecture for nvcc", .default_value = "90a"},
           {.name = "timeout",
            .metavar = "S",
            .help = "limit for the runner's start and for each call under ncu",
            .default_value = "600"},
           {.name = "quiet", .short_name = 'q', .help = "no progress on stderr"},
           json_option()},
      .run = run_profile,
  });
  v.push_back({
      .name = "ncu analyze",
      .summary = "Read an Nsight Compute report natively and give at most five ranked, evidenced priorities per kernel",
      .description =
          "Reads a .ncu-rep file without ncu installed (own protobuf wire-format decoder), or ncu's CSV exports\n"
          "(--page raw, details, source; several pages of one report are merged, and a source page may be added\n"
          "to a .ncu-rep to join hot PCs to SASS and CUDA lines). Per kernel: duration, SM/memory/DRAM throughput,\n"
          "roofline position, occupancy limiter and waves, warp stalls (aggregate and per PC), memory efficiency,\n"
          "tensor pipe use, the PM-sampling timeline's shape, and NVIDIA's rules de-duplicated and re-ranked.\n"
          "Prints REPORT.md-style Markdown, or JSON with --json (headline metrics under their ncu names in base "
          "units).",
      .positionals = {{.name = "report",
                       .help = ".ncu-rep file, or one or more ncu CSV pages of the same report",
                       .variadic = true}},
      .options =
          {json_option(),
           {.name = "kernel",
            .short_name = 'k',
            .metavar = "REGEX",
            .help = "analyze only kernels whose demangled name matches"},
           {.name = "out",
            .short_name = 'o',
            .metavar = "DIR",
            .help = "also write DIR/REPORT.md and DIR/analysis.json"},
           {.name = "max-priorities", .metavar = "N", .help = "priorities per kernel, 1..5", .default_value = "5"}},
      .run = run_analyze,
  });
  v.push_back({
      .name = "ncu diff",
      .summary = "Say what moved between two Nsight Compute reports (per matched kernel, absolute and %)",
      .description =
          "Kernels are matched by demangled name and launch order, then by function name (a changed signature),\n"
          "then a single leftover kernel on each side as a rename, when the two share a word of their names or their\n"
          "launch configuration (unrelated kernels stay unpaired). Compares duration, throughputs, occupancy, IPC, "
          "warp\n"
          "stalls, cache hit rates, bank conflicts, sectors per request and spills, and the ranked priorities before "
          "and after.",
      .positionals = {{.name = "before", .help = "the baseline report (.ncu-rep or CSV page)"},
                      {.name = "after", .help = "the new report"}},
      .options = {json_option(),
                  {.name = "min-move",
                   .metavar = "PCT",
                   .help = "hide quantities that moved less than PCT percent (Markdown only)",
                   .default_value = "1"}},
      .run = run_diff,
  });
  return v;
}

}  // namespace kda::cli
