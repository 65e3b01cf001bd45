#include "report/report.h"

#include "report/run_report.h"

namespace kda::report {

namespace stdfs = std::filesystem;

const char* kind_name(ReportKind kind) {
  switch (kind) {
    case ReportKind::kRun: return "run";
    case ReportKind::kEval: return "eval";
    case ReportKind::kTune: return "tune";
  }
  return "?";
}

Result<ReportKind> detect(const stdfs::path& input) {
  std::error_code ec;
  if (stdfs::is_directory(input, ec)) {
    if (stdfs::exists(input / "state.json") && stdfs::exists(input / "ledger.json")) return ReportKind::kRun;
    if (stdfs::exists(input / "map.json")) return ReportKind::kTune;
    return Status::bad_input(input.string() +
                             ": neither a run directory (state.json and ledger.json) nor a kda tune output (map.json)");
  }
  if (stdfs::is_regular_file(input, ec)) return ReportKind::kEval;
  return Status::not_found(input.string() + ": no such file or directory");
}

Result<Report> render(const stdfs::path& input) {
  KDA_ASSIGN_OR_RETURN(ReportKind kind, detect(input));
  Result<Report> r = Status::internal("unset");
  switch (kind) {
    case ReportKind::kRun: r = render_run(input); break;
    case ReportKind::kEval: r = render_eval(input); break;
    case ReportKind::kTune: r = render_tune(input); break;
  }
  if (!r.ok()) return r;
  for (size_t at = r->html.find("data-src=\""); at != std::string::npos; at = r->html.find("data-src=\"", at + 1))
    ++r->numbers;
  return r;
}

stdfs::path default_output(const stdfs::path& input, ReportKind kind) {
  if (kind == ReportKind::kEval) return stdfs::path(input).replace_extension(".html");
  return input / "report.html";
}

}  // namespace kda::report
