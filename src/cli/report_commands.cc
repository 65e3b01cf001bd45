// `kda report`: one self-contained HTML page of a run directory, an evaluation's JSON or a tuning
// directory (src/report, docs/report.md).
#include <filesystem>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "report/provenance.h"
#include "report/report.h"
#include "util/fs.h"

namespace kda::cli {

namespace {

namespace stdfs = std::filesystem;

int run_report(const Args& args, Io& io) {
  const stdfs::path input = args.positional("input");
  auto page = report::render(input);
  if (!page.ok()) {
    io.err << "kda report: " << page.status().message() << "\n";
    return exit_code_for(page.status());
  }
  // Every number on the page is checked against its file before the page is written: a mismatch is
  // kda's own bug, and no page goes out with it.
  const report::ProvenanceCheck check = report::check_provenance(page->html, page->root);
  if (!check.ok()) {
    io.err << "kda report: internal error: " << check.problems.size() << " number(s) do not match their files:\n";
    for (const auto& p : check.problems) io.err << "  " << p << "\n";
    return kExitInternal;
  }
  const stdfs::path out = args.value_or("output", report::default_output(input, page->kind).string());
  if (Status st = fs::write_file_atomic(out, page->html); !st.ok()) {
    io.err << "kda report: " << st.message() << "\n";
    return exit_code_for(st);
  }
  if (args.flag("json")) {
    io.out << nlohmann::json{{"kind", report::kind_name(page->kind)}, {"input", input.string()}, {"output", out.string()},
                             {"title", page->title}, {"numbers", page->numbers}, {"checked", check.checked}, {"bytes", page->html.size()}}
                  .dump(2)
           << "\n";
  } else {
    io.out << fmt::format("{} report: {} ({} numbers, each checked against its file)\n", report::kind_name(page->kind), out.string(),
                          check.checked);
  }
  return kExitOk;
}

}  // namespace

CommandSpec report_command() {
  return {
      .name = "report",
      .summary = "Write one self-contained HTML page of a run, an evaluation or a tuning",
      .description =
          "<input> is a run directory (kda run: speedup over rounds, the rounds with why each ended as it did, the\n"
          "candidate DAG, the reviewer's verdicts, per-workload bars of baseline / final solution / roofline floor,\n"
          "budgets, the audit log's state), the JSON of `kda eval --json` (score with its interval, per workload with\n"
          "its p10-p90 spread, gates) or a `kda tune --out` directory (the performance map as a heat map, routing).\n"
          "The page works offline: inline CSS and SVG, no script, a Content-Security-Policy that forbids every fetch.\n"
          "Every number read from a file carries that file and JSON pointer (data-src) and is checked against it\n"
          "before the page is written. Exit 0 written, 2 bad input (the file named), 3 a number did not match.\n"
          "See docs/report.md.",
      .positionals = {{.name = "input", .help = "run directory, eval JSON (kda eval --json > FILE) or kda tune output directory"}},
      .options = {{.name = "output", .short_name = 'o', .metavar = "FILE",
                   .help = "where to write the page (default: <dir>/report.html, or <eval>.html beside the JSON)"},
                  json_option()},
      .run = run_report,
  };
}

}  // namespace kda::cli
