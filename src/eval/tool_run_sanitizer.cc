#include "eval/tool_run_sanitizer.h"

#include <regex>
#include <sstream>

namespace kda::eval {

namespace {

int64_t parse_count(const std::string& digits) {
  int64_t n = 0;
  for (char c : digits)
    if (c >= '0' && c <= '9') n = n * 10 + (c - '0');
  return n;
}

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

}  // namespace

SanitizerSummary parse_sanitizer_log(const std::string& log, size_t max_reports, size_t max_details) {
  static const std::regex kErrorSummary(R"(ERROR SUMMARY: ([0-9,]+) error)");
  static const std::regex kRaceSummary(R"(RACECHECK SUMMARY: .*\(([0-9,]+) error)");
  SanitizerSummary s;
  bool saw_error_summary = false;
  int64_t race_errors = 0;
  bool saw_race_summary = false;
  bool open = false;  // appending detail lines to the last report
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t bar = line.find("=========");
    if (bar == std::string::npos) {
      open = false;
      continue;
    }
    std::string rest = line.substr(bar + 9);
    std::smatch m;
    if (std::regex_search(rest, m, kErrorSummary)) {
      saw_error_summary = true;
      s.errors += parse_count(m[1].str());
      open = false;
      continue;
    }
    if (std::regex_search(rest, m, kRaceSummary)) {
      saw_race_summary = true;
      race_errors += parse_count(m[1].str());
      open = false;
      continue;
    }
    if (rest.empty() || rest.find_first_not_of(' ') == std::string::npos) {
      open = false;
      continue;
    }
    const size_t text_at = rest.find_first_not_of(' ');
    const std::string text = rest.substr(text_at);
    if (text_at <= 1) {
      // A headline: a new report, unless it is the banner or a summary of another kind.
      open = false;
      if (starts_with(text, "COMPUTE-SANITIZER") || text.find("SUMMARY") != std::string::npos) continue;
      if (s.reports.size() >= max_reports) continue;
      s.reports.push_back({text});
      open = true;
      continue;
    }
    if (!open) continue;
    if (starts_with(text, "Host Frame") || starts_with(text, "Saved host backtrace") ||
        starts_with(text, "Device Frame"))
      continue;
    if (s.reports.back().size() <= max_details) s.reports.back().push_back(text);
  }
  s.found = saw_error_summary || saw_race_summary;
  if (!saw_error_summary) s.errors = race_errors;
  return s;
}

}  // namespace kda::eval
