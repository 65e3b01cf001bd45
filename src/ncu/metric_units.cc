#include "ncu/metric_units.h"

#include <array>
#include <utility>

namespace kda::ncu {

namespace {

// True when `word` occurs in s as a whole '_'-separated token.
bool has_token(std::string_view s, std::string_view word) {
  size_t pos = 0;
  while ((pos = s.find(word, pos)) != std::string_view::npos) {
    bool left = pos == 0 || s[pos - 1] == '_';
    size_t end = pos + word.size();
    bool right = end == s.size() || s[end] == '_';
    if (left && right) return true;
    pos = end;
  }
  return false;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::string infer_unit(std::string_view name) {
  // PM-sampling series carry a "<UNIT>.TriageCompute." prefix in front of an ordinary name.
  if (size_t t = name.find("TriageCompute."); t != std::string_view::npos) name = name.substr(t + 14);
  size_t dot = name.find('.');
  std::string_view head = name.substr(0, dot);
  std::string_view suffix = dot == std::string_view::npos ? std::string_view() : name.substr(dot);
  if (suffix.find(".pct") != std::string_view::npos || suffix.find("pct_of_peak") != std::string_view::npos ||
      ends_with(head, "_pct") || ends_with(head, "hit_rate"))
    return "%";
  if (head.starts_with("gpu__time_duration")) return "ns";
  size_t sep = head.find("__");
  std::string_view body = sep == std::string_view::npos ? head : head.substr(sep + 2);
  if (body.find("cycles_elapsed") != std::string_view::npos && ends_with(suffix, "per_second")) return "hz";
  std::string unit;
  if (has_token(body, "bytes"))
    unit = "byte";
  else if (has_token(body, "sectors"))
    unit = "sector";
  else if (has_token(body, "requests"))
    unit = "request";
  else if (has_token(body, "cycles"))
    unit = "cycle";
  else if (has_token(body, "inst") || body.find("inst_executed") != std::string_view::npos ||
           body.find("inst_issued") != std::string_view::npos)
    unit = "inst";
  else if (has_token(body, "warps"))
    unit = "warp";
  else if (has_token(body, "wavefronts"))
    unit = "";
  else if (has_token(body, "thread") || has_token(body, "threads"))
    unit = "thread";
  if (ends_with(suffix, ".per_second")) return unit.empty() ? "" : unit + "/s";
  if (suffix.find("per_cycle") != std::string_view::npos || ends_with(suffix, "peak_sustained"))
    return unit.empty() ? "" : unit + "/cycle";
  if (ends_with(suffix, ".ratio")) return "";
  return unit;
}

std::optional<UnitScale> unit_scale(std::string_view unit) {
  // Observed in ncu 2025.3.1 auto-units exports; "%/Kbyte" really is printed value * 1000.
  static const std::array<std::pair<std::string_view, UnitScale>, 24> kScales = {{
      {"Kbyte", {"byte", 1e3}},
      {"Mbyte", {"byte", 1e6}},
      {"Gbyte", {"byte", 1e9}},
      {"Tbyte", {"byte", 1e12}},
      {"us", {"ns", 1e3}},
      {"ms", {"ns", 1e6}},
      {"s", {"ns", 1e9}},
      {"Khz", {"hz", 1e3}},
      {"Mhz", {"hz", 1e6}},
      {"Ghz", {"hz", 1e9}},
      {"Kbyte/s", {"byte/s", 1e3}},
      {"Mbyte/s", {"byte/s", 1e6}},
      {"Gbyte/s", {"byte/s", 1e9}},
      {"Tbyte/s", {"byte/s", 1e12}},
      {"sector/ms", {"sector/s", 1e3}},
      {"sector/us", {"sector/s", 1e6}},
      {"sector/ns", {"sector/s", 1e9}},
      {"Kbyte/cycle", {"byte/cycle", 1e3}},
      {"Mbyte/cycle", {"byte/cycle", 1e6}},
      {"Kbyte/block", {"byte/block", 1e3}},
      {"Mbyte/block", {"byte/block", 1e6}},
      {"%/Kbyte", {"%/byte", 1e3}},
      {"request/ns", {"request/s", 1e9}},
      {"inst/ns", {"inst/s", 1e9}},
  }};
  for (const auto& [name, scale] : kScales)
    if (name == unit) return scale;
  return std::nullopt;
}

}  // namespace kda::ncu
