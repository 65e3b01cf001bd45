#include "report/sources.h"

#include <fmt/format.h>

#include "report/svg.h"
#include "util/fs.h"

namespace kda::report {

using nlohmann::json;

Result<const json*> Files::json_file(const std::string& rel) {
  if (auto it = json_.find(rel); it != json_.end()) return &it->second;
  KDA_ASSIGN_OR_RETURN(std::string text, fs::read_file(root_ / rel));
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::bad_input((root_ / rel).string() + ": not valid JSON");
  return &(json_[rel] = std::move(j));
}

Result<const std::vector<json>*> Files::lines(const std::string& rel) {
  if (auto it = lines_.find(rel); it != lines_.end()) return &it->second;
  KDA_ASSIGN_OR_RETURN(std::string text, fs::read_file(root_ / rel));
  std::vector<json> out;
  size_t start = 0, n = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++n;
    if (end > start) {
      auto j = json::parse(text.substr(start, end - start), nullptr, false);
      if (j.is_discarded()) return Status::bad_input(fmt::format("{}:{}: not valid JSON", (root_ / rel).string(), n));
      out.push_back(std::move(j));
    }
    start = end + 1;
  }
  return &(lines_[rel] = std::move(out));
}

std::optional<double> number_at(const json& j, const std::string& pointer) {
  try {
    const json& v = j.at(json::json_pointer(pointer));
    if (v.is_number()) return v.get<double>();
  } catch (const json::exception&) {}
  return std::nullopt;
}

std::string axes_label(const json& axes) {
  std::string s;
  if (!axes.is_object()) return s;
  for (const auto& [k, v] : axes.items()) s += (s.empty() ? "" : " ") + k + "=" + v.dump();
  return s;
}

namespace {

std::string ms_text(double ms) {
  if (ms >= 100) return fmt::format("{:.1f} ms", ms);
  if (ms >= 1) return fmt::format("{:.3f} ms", ms);
  return fmt::format("{:.2f} us", ms * 1000);
}

}  // namespace

std::string workloads_section(const std::vector<TraceRef>& traces, const std::string& solution_name) {
  std::vector<BarRow> bars;
  std::vector<std::vector<std::string>> rows;
  for (const TraceRef& t : traces) {
    const json& tr = *t.trace;
    const std::string uuid = tr.value("/workload/uuid"_json_pointer, std::string());
    const std::string label =
        axes_label(tr.value("/workload/axes"_json_pointer, json::object())) + "  " + uuid.substr(0, 8);
    const std::string status = tr.value("/evaluation/status"_json_pointer, std::string("?"));
    const std::string lat_p = "/evaluation/kda/candidate/median_ms", base_p = "/evaluation/kda/baseline/latency_ms",
                      perf_p = "/evaluation/performance/latency_ms", floor_p = "/evaluation/kda/roofline_floor_ms",
                      speed_p = "/evaluation/kda/speedup_vs_baseline", p10_p = "/evaluation/kda/candidate/p10_ms",
                      p90_p = "/evaluation/kda/candidate/p90_ms";
    // The official latency where the workload PASSED (mean over trials of each trial's median),
    // else the median of what was timed, if anything was.
    const bool passed = number_at(tr, perf_p).has_value();
    const std::string used_p = passed ? perf_p : lat_p;
    const auto lat = number_at(tr, used_p), base = number_at(tr, base_p), floor = number_at(tr, floor_p),
               speed = number_at(tr, speed_p), p10 = number_at(tr, p10_p), p90 = number_at(tr, p90_p);
    BarRow row{label, {}};
    if (base)
      row.bars.push_back({"baseline", "#9aa4b5", *base, {}, {}, "baseline " + ms_text(*base), {t.field(base_p)}});
    if (lat)
      row.bars.push_back({solution_name,
                          status == "PASSED" ? "#2563eb" : "#b42318",
                          *lat,
                          p10,
                          p90,
                          fmt::format("{} {} ({})", solution_name, ms_text(*lat), status),
                          {t.field(used_p)}});
    if (floor)
      row.bars.push_back({"roofline floor", "#7a5af8", *floor, {}, {}, "floor " + ms_text(*floor), {t.field(floor_p)}});
    bars.push_back(std::move(row));
    auto cell = [&](const std::optional<double>& v, const std::string& p, const std::string& text) {
      return v ? "<td class=\"num\">" + number(*v, text, t.field(p)) + "</td>"
               : std::string("<td class=\"num muted\">-</td>");
    };
    std::string spread = "<td class=\"num muted\">-</td>";
    if (p10 && p90)
      spread = "<td class=\"num\">" + number(*p10, ms_text(*p10), t.field(p10_p)) + " - " +
               number(*p90, ms_text(*p90), t.field(p90_p)) + "</td>";
    std::string of_floor = "<td class=\"num muted\">-</td>";
    if (floor && lat && *lat > 0)
      of_floor = "<td class=\"num\">" +
                 ratio(*floor / *lat, fmt::format("{:.0f} %", 100 * *floor / *lat), t.field(floor_p), t.field(used_p)) +
                 "</td>";
    const std::string reason = tr.value("/evaluation/kda/message"_json_pointer, std::string());
    rows.push_back({"<code>" + escape(uuid.substr(0, 8)) + "</code>",
                    escape(axes_label(tr.value("/workload/axes"_json_pointer, json::object()))),
                    fmt::format("<span class=\"{}\">{}</span>", status == "PASSED" ? "ok" : "bad", escape(status)),
                    cell(lat, used_p, lat ? ms_text(*lat) : ""), spread, cell(base, base_p, base ? ms_text(*base) : ""),
                    cell(speed, speed_p, speed ? fmt::format("{:.3f}x", *speed) : ""),
                    cell(floor, floor_p, floor ? ms_text(*floor) : ""), of_floor,
                    status == "PASSED" ? "" : "<span class=\"detail\">" + escape(reason.substr(0, 300)) + "</span>"});
  }
  return bar_chart(bars, "ms") + table({"workload", "axes", "verdict", "latency", "p10 - p90", "baseline", "speedup",
                                        "roofline floor", "of floor", "why"},
                                       rows);
}

}  // namespace kda::report
