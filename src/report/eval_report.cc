// The page of one evaluation (`kda eval --json` output): the score with its interval, the gates,
// and every workload with its spread, baseline and roofline floor.
#include <fmt/format.h>

#include "report/run_report.h"

namespace kda::report {

namespace {

using nlohmann::json;

std::string gate_counts(const json& report) {
  std::map<std::string, std::map<std::string, int>> by_gate;  // gate -> status -> workloads
  for (const auto& t : report.value("traces", json::array()))
    for (const auto& g : t.value("/evaluation/kda/gates"_json_pointer, json::array()))
      ++by_gate[g.value("gate", "?")][g.value("status", "?")];
  for (const auto& g : report.value("static_gates", json::array()))
    ++by_gate[g.value("gate", "?")][g.value("status", "?")];
  std::vector<std::vector<std::string>> rows;
  for (const auto& [gate, statuses] : by_gate) {
    std::string cells;
    for (const auto& [status, n] : statuses)
      cells += fmt::format("<span class=\"{}\">{} {}</span> ",
                           status == "pass"   ? "ok"
                           : status == "fail" ? "bad"
                                              : "muted",
                           n, escape(status));
    rows.push_back({"<code>" + escape(gate) + "</code>", cells});
  }
  return rows.empty() ? std::string() : table({"gate", "workloads by result"}, rows);
}

}  // namespace

Result<Report> render_eval(const std::filesystem::path& file) {
  Files files(file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path());
  const std::string name = file.filename().string();
  KDA_ASSIGN_OR_RETURN(const json* report, files.json_file(name));
  if (!report->is_object() || !report->contains("traces") || !(*report)["traces"].is_array())
    return Status::bad_input(file.string() + ": not a kda eval --json report (no \"traces\" array)");
  Report r{ReportKind::kEval, files.root(), "", "", 0};
  r.title = fmt::format("kda eval {} on {}", report->value("solution", "?"), report->value("definition", "?"));
  Page page(r.title);
  std::string s = fmt::format(
      "<p class=\"sub\">backend <code>{}</code> · baseline <code>{}</code> · seed {}</p>\n<div class=\"cards\">",
      escape(report->value("backend", "")), escape(report->value("baseline", "")),
      report->contains("seed") ? escape((*report)["seed"].dump()) : "-");
  const bool passed = report->value("all_passed", false);
  s += fmt::format(
      "<div class=\"card\"><div class=\"k\">all workloads</div><div class=\"v\"><span "
      "class=\"{}\">{}</span></div></div>",
      passed ? "ok" : "bad", passed ? "PASSED" : "not all PASSED");
  if (auto g = number_at(*report, "/score/geomean_speedup"))
    s += "<div class=\"card\"><div class=\"k\">geomean speedup vs the baseline</div><div class=\"v\">" +
         number(*g, fmt::format("{:.3f}x", *g), {name, 0, "/score/geomean_speedup"}) + "</div></div>";
  auto lo = number_at(*report, "/score/geomean_ci95/0"), hi = number_at(*report, "/score/geomean_ci95/1");
  if (lo && hi)
    s += "<div class=\"card\"><div class=\"k\">95 % interval over trials</div><div class=\"v\">" +
         number(*lo, fmt::format("{:.3f}x", *lo), {name, 0, "/score/geomean_ci95/0"}) + " - " +
         number(*hi, fmt::format("{:.3f}x", *hi), {name, 0, "/score/geomean_ci95/1"}) + "</div></div>";
  if (auto w = number_at(*report, "/wall_s"))
    s += "<div class=\"card\"><div class=\"k\">evaluation wall time</div><div class=\"v\">" +
         number(*w, fmt::format("{:.2f} s", *w), {name, 0, "/wall_s"}) + "</div></div>";
  page.section("summary", "Summary", s + "</div>\n");
  std::vector<TraceRef> refs;
  const json& traces = (*report)["traces"];
  for (size_t i = 0; i < traces.size(); ++i) refs.push_back({&traces[i], {name, 0, fmt::format("/traces/{}", i)}});
  page.section("workloads", "Per workload", workloads_section(refs, report->value("solution", "solution")));
  page.section("gates", "Integrity gates", gate_counts(*report));
  r.html = page.html();
  return r;
}

}  // namespace kda::report
