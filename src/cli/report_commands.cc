// `kda report`: one self-contained HTML page of a run directory, an evaluation's JSON or a tuning
// directory (src/report, docs/report.md).
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "report/monitor.h"
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
    return fail(io, "kda report", page.status());
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
    return fail(io, "kda report", st);
  }
  if (args.flag("json")) {
    io.out << nlohmann::json{{"kind", report::kind_name(page->kind)},
                             {"input", input.string()},
                             {"output", out.string()},
                             {"title", page->title},
                             {"numbers", page->numbers},
                             {"checked", check.checked},
                             {"bytes", page->html.size()}}
                  .dump(2)
           << "\n";
  } else {
    io.out << fmt::format("{} report: {} ({} numbers, each checked against its file)\n", report::kind_name(page->kind),
                          out.string(), check.checked);
  }
  return kExitOk;
}

int terminal_width() {
  winsize ws{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS"); c != nullptr && std::atoi(c) > 20) return std::atoi(c);
  return 120;
}

int run_monitor(const Args& args, Io& io) {
  const stdfs::path dir = args.positional("run");
  auto interval = args.number("interval");
  auto wait = args.number("wait");
  auto lines = args.integer("activity");
  for (const auto* r : {&interval, &wait}) {
    if (!r->ok()) {
      io.err << "kda monitor: " << r->status().message() << "\n";
      return kExitBadInput;
    }
  }
  if (!lines.ok() || (*lines && **lines < 0)) {
    io.err << "kda monitor: --activity: must be a whole number >= 0\n";
    return kExitBadInput;
  }
  const double every = std::max(0.05, interval->value_or(1.0));
  const double wait_s = wait->value_or(60.0);
  const bool once = args.flag("once"), as_json = args.flag("json");
  const auto started = std::chrono::steady_clock::now();
  std::string last;
  while (true) {
    auto snap = report::monitor_snapshot(dir, terminal_width(), static_cast<int>(lines->value_or(8)));
    if (!snap.ok()) {
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (snap.status().kind() != ErrorKind::kNotFound || once || waited >= wait_s) {
        io.err << "kda monitor: " << snap.status().message() << "\n";
        return snap.status().kind() == ErrorKind::kNotFound ? kExitBadInput : exit_code_for(snap.status());
      }
      if (last.empty()) io.err << "kda monitor: waiting for " << (dir / "state.json").string() << "\n" << std::flush;
      last = "waiting";
    } else {
      const std::string shown = as_json ? snap->json.dump() + "\n" : snap->frame;
      if (shown != last) {
        // A frame replaces the previous one in place (cursor home, clear); --once and --json append.
        io.out << (once || as_json ? "" : "\x1b[H\x1b[2J") << shown << std::flush;
        last = shown;
      }
      if (once || snap->finished) return snap->phase == "done" || once ? kExitOk : kExitFailed;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(every));
  }
}

}  // namespace

CommandSpec monitor_command() {
  return {
      .name = "monitor",
      .summary = "Watch a running kda run live in the terminal (phase, round, incumbent, budgets, verdicts, activity)",
      .description =
          "Redraws a frame every --interval seconds from the run directory's files alone (state.json, ledger.json,\n"
          "rounds/, the tail of audit.jsonl), so it never touches the run and can watch one another process drives:\n"
          "phase and round of max, the incumbent with its speedup and interval against the target, budget bars, the\n"
          "last rounds with why each ended, and the newest audit-log records (the agents' tool calls and file\n"
          "writes, evaluations). Waits up to --wait seconds for a run that has not started. Ends by itself when the\n"
          "run ends: exit 0 done, 1 stopped; --once prints one frame and exits 0. --json prints the frame's data as\n"
          "one JSON object per change (JSON lines). 2 when there is no run at <run>.",
      .positionals = {{.name = "run", .help = "run directory (kda run --run-dir)"}},
      .options = {{.name = "interval", .metavar = "S", .help = "seconds between frames", .default_value = "1"},
                  {.name = "wait",
                   .metavar = "S",
                   .help = "seconds to wait for the run's state.json to appear",
                   .default_value = "60"},
                  {.name = "activity", .metavar = "N", .help = "audit-log records shown", .default_value = "8"},
                  {.name = "once", .help = "print one frame and exit"},
                  json_option()},
      .run = run_monitor,
  };
}

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
      .positionals = {{.name = "input",
                       .help = "run directory, eval JSON (kda eval --json > FILE) or kda tune output directory"}},
      .options = {{.name = "output",
                   .short_name = 'o',
                   .metavar = "FILE",
                   .help = "where to write the page (default: <dir>/report.html, or <eval>.html beside the JSON)"},
                  json_option()},
      .run = run_report,
  };
}

}  // namespace kda::cli
