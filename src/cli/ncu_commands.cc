// `kda ncu analyze|diff`: read Nsight Compute reports natively (or ncu's CSV pages) and turn them
// into ranked, evidenced advice, or say what moved between two reports.
#include <filesystem>
#include <ostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "ncu/analyze.h"
#include "ncu/diff.h"
#include "ncu/load.h"
#include "util/fs.h"

namespace kda::cli {

namespace {

using nlohmann::json;
namespace stdfs = std::filesystem;

std::string dump(const json& j) { return j.dump(2, ' ', false, json::error_handler_t::replace); }

int fail(Io& io, const Status& st) {
  io.err << "kda ncu: " << st.message() << "\n";
  return exit_code_for(st);
}

std::vector<stdfs::path> as_paths(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

// ---- analyze ----------------------------------------------------------------------------------------------
int run_analyze(const Args& args, Io& io) {
  auto report = ncu::load_report(as_paths(args.positionals("report")));
  if (!report.ok()) return fail(io, report.status());
  ncu::AnalyzeOptions options;
  options.kernel_regex = args.value_or("kernel", "");
  auto max = args.integer("max-priorities");
  if (!max.ok()) return fail(io, max.status());
  if (*max) {
    if (**max < 1 || **max > 5) return fail(io, Status::bad_input("--max-priorities: must be between 1 and 5"));
    options.max_priorities = static_cast<size_t>(**max);
  }
  auto analysis = ncu::analyze(*report, options);
  if (!analysis.ok()) return fail(io, analysis.status());
  json j = ncu::to_json(*analysis);
  std::string md = ncu::to_markdown(*analysis);
  // Phase: write the artefacts a profile step or an agent picks up.
  if (auto out = args.value("out")) {
    stdfs::path dir(*out);
    Status st = fs::ensure_dir(dir);
    if (st.ok()) st = fs::write_file_atomic(dir / "REPORT.md", md);
    if (st.ok()) st = fs::write_file_atomic(dir / "analysis.json", dump(j) + "\n");
    if (!st.ok()) return fail(io, st.with_context("--out " + *out));
    io.err << "wrote " << (dir / "REPORT.md").string() << " and " << (dir / "analysis.json").string() << "\n";
  }
  if (args.flag("json")) io.out << dump(j) << "\n";
  else io.out << md;
  return kExitOk;
}

// ---- diff -------------------------------------------------------------------------------------------------
int run_diff(const Args& args, Io& io) {
  auto before = ncu::load_report(stdfs::path(args.positional("before")));
  if (!before.ok()) return fail(io, before.status());
  auto after = ncu::load_report(stdfs::path(args.positional("after")));
  if (!after.ok()) return fail(io, after.status());
  auto min_move = args.number("min-move");
  if (!min_move.ok()) return fail(io, min_move.status());
  ncu::ReportDiff diff = ncu::diff_reports(*before, *after);
  if (args.flag("json")) io.out << dump(ncu::to_json(diff)) << "\n";
  else io.out << ncu::to_markdown(diff, min_move->value_or(1.0));
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> ncu_commands() {
  std::vector<CommandSpec> v;
  v.push_back({
      .name = "ncu analyze",
      .summary = "Read an Nsight Compute report natively and give at most five ranked, evidenced priorities per kernel",
      .description =
          "Reads a .ncu-rep file without ncu installed (own protobuf wire-format decoder), or ncu's CSV exports\n"
          "(--page raw, details, source; several pages of one report are merged, and a source page may be added\n"
          "to a .ncu-rep to join hot PCs to SASS and CUDA lines). Per kernel: duration, SM/memory/DRAM throughput,\n"
          "roofline position, occupancy limiter and waves, warp stalls (aggregate and per PC), memory efficiency,\n"
          "tensor pipe use, the PM-sampling timeline's shape, and NVIDIA's rules de-duplicated and re-ranked.\n"
          "Prints REPORT.md-style Markdown, or JSON with --json (headline metrics under their ncu names in base units).",
      .positionals = {{.name = "report", .help = ".ncu-rep file, or one or more ncu CSV pages of the same report", .variadic = true}},
      .options = {json_option(),
                  {.name = "kernel", .short_name = 'k', .metavar = "REGEX", .help = "analyze only kernels whose demangled name matches"},
                  {.name = "out", .short_name = 'o', .metavar = "DIR", .help = "also write DIR/REPORT.md and DIR/analysis.json"},
                  {.name = "max-priorities", .metavar = "N", .help = "priorities per kernel, 1..5", .default_value = "5"}},
      .run = run_analyze,
  });
  v.push_back({
      .name = "ncu diff",
      .summary = "Say what moved between two Nsight Compute reports (per matched kernel, absolute and %)",
      .description =
          "Kernels are matched by demangled name and launch order, then by function name (a changed signature),\n"
          "then a single leftover kernel on each side (a rename). Compares duration, throughputs, occupancy, IPC, warp stalls, cache hit rates, bank\n"
          "conflicts, sectors per request and spills, and the ranked priorities before and after.",
      .positionals = {{.name = "before", .help = "the baseline report (.ncu-rep or CSV page)"},
                      {.name = "after", .help = "the new report"}},
      .options = {json_option(),
                  {.name = "min-move", .metavar = "PCT", .help = "hide quantities that moved less than PCT percent (Markdown only)", .default_value = "1"}},
      .run = run_diff,
  });
  return v;
}

}  // namespace kda::cli
