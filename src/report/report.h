// kda report: one self-contained HTML page for a run directory (kda run), an evaluation
// (kda eval --json output) or a tuning directory (kda tune --out), every number on it traceable
// to the file it was read from (page.h). docs/report.md describes the page.
#pragma once

#include <filesystem>
#include <string>

#include "util/status.h"

namespace kda::report {

enum class ReportKind { kRun, kEval, kTune };
const char* kind_name(ReportKind kind);  // "run", "eval", "tune"

struct Report {
  ReportKind kind = ReportKind::kRun;
  std::filesystem::path root;  // the data-src paths on the page are relative to it
  std::string title;
  std::string html;
  int numbers = 0;  // elements that carry provenance
};

// What `input` is: a directory with state.json and ledger.json (a run), a directory with map.json
// (a tuning), or a JSON file with "traces" (an evaluation). Anything else is kBadInput naming it.
Result<ReportKind> detect(const std::filesystem::path& input);

Result<Report> render(const std::filesystem::path& input);

// <dir>/report.html for a run or tuning directory, <name>.html beside an evaluation's JSON.
std::filesystem::path default_output(const std::filesystem::path& input, ReportKind kind);

}  // namespace kda::report
