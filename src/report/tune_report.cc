// The page of a kda tune output directory: the performance map as a heat map (each regime's measured
// configurations against its best), where the dispatcher routes, and the final geomeans.
#include <fmt/format.h>

#include "report/run_report.h"
#include "report/svg.h"

namespace kda::report {

namespace {

using nlohmann::json;

std::string ms_card(const char* key, const json& map, const std::string& pointer) {
  auto v = number_at(map, pointer);
  if (!v) return "";
  return fmt::format("<div class=\"card\"><div class=\"k\">{}</div><div class=\"v\">{}</div></div>", key,
                     number(*v, fmt::format("{:.4g} ms", *v), {"map.json", 0, pointer}));
}

// The no-regression guard's plan (map.json /result/guard): per regime where the dispatcher sends it
// and why, the fallback, and how shapes outside every regime are routed. "" when the map has none.
std::string guard_section(const json& map) {
  const json guard = map.value("/result/guard"_json_pointer, json());
  if (!guard.is_object() || !guard.contains("ran")) return {};
  if (!guard.value("ran", false))
    return "<p class=\"detail\">Not run: " + escape(guard.value("skipped", std::string())) + "</p>\n";
  auto target = [](const std::string& id) { return id == "baseline" ? std::string("the baseline") : id.substr(0, 12); };
  std::vector<std::vector<std::string>> rows;
  for (const auto& g : guard.value("regimes", json::array()))
    rows.push_back({escape(g.value("regime", "")), std::to_string(g.value("workloads", json::array()).size()),
                    "<code>" + escape(target(g.value("target", ""))) + "</code>",
                    "<span class=\"detail\">" + escape(g.value("why", "")) + "</span>"});
  return table({"regime", "visible workloads", "routed to", "why"}, rows) + "<p>Fallback: <code>" +
         escape(target(guard.value("fallback", ""))) + "</code> (" + escape(guard.value("fallback_why", "")) +
         ").</p>\n<p>Shapes outside every regime: " + escape(guard.value("unseen_why", "")) + ".</p>\n";
}

}  // namespace

Result<Report> render_tune(const std::filesystem::path& dir) {
  Files files(dir);
  KDA_ASSIGN_OR_RETURN(const json* map, files.json_file("map.json"));
  if (map->value("kind", "") != "kda-tune-map" || !map->contains("regimes"))
    return Status::bad_input((dir / "map.json").string() + ": not a kda tune map (kind is not \"kda-tune-map\")");
  Report r{ReportKind::kTune, dir, "", "", 0};
  r.title = "kda tune " + std::filesystem::path(dir).lexically_normal().filename().string();
  Page page(r.title);

  std::string cards = "<div class=\"cards\">";
  cards += ms_card("baseline (geomean)", *map, "/result/baseline_geomean_ms");
  cards += ms_card("best single configuration", *map, "/result/best_single_geomean_ms");
  cards += ms_card("dispatcher", *map, "/result/dispatcher_geomean_ms");
  if (auto h = number_at(*map, "/result/dispatcher_vs_best_single"))
    cards += "<div class=\"card\"><div class=\"k\">dispatcher vs best single, head-to-head</div><div class=\"v\">" +
             number(*h, fmt::format("{:.3f}x", *h), {"map.json", 0, "/result/dispatcher_vs_best_single"}) +
             "</div></div>";
  if (auto m = number_at(*map, "/result/configs_measured"))
    cards += "<div class=\"card\"><div class=\"k\">configurations measured</div><div class=\"v\">" +
             number(*m, fmt::format("{:g}", *m), {"map.json", 0, "/result/configs_measured"}) + "</div></div>";
  page.section("summary", "Summary", cards + "</div>\n");

  // Columns: every configuration the map names (best and runners-up of any regime), in first-seen order.
  const json& regimes = (*map)["regimes"];
  std::vector<std::string> cols, row_labels;
  auto col_of = [&](const std::string& label) {
    for (size_t i = 0; i < cols.size(); ++i)
      if (cols[i] == label) return i;
    cols.push_back(label);
    return cols.size() - 1;
  };
  for (const auto& g : regimes) {
    col_of(g.value("/best/label"_json_pointer, std::string("?")));
    for (const auto& ru : g.value("runners_up", json::array())) col_of(ru.value("label", "?"));
  }
  std::vector<std::vector<HeatCell>> cells;
  std::vector<std::vector<std::string>> rows;
  double worst = 1;
  for (size_t i = 0; i < regimes.size(); ++i) {
    const json& g = regimes[i];
    row_labels.push_back(g.value("regime", "?"));
    std::vector<HeatCell> row(cols.size());
    const std::string best_p = fmt::format("/regimes/{}/best/latency_ms", i);
    const auto best = number_at(*map, best_p);
    auto put = [&](const std::string& label, const std::string& p) {
      const auto v = number_at(*map, p);
      if (!v || !best || *best <= 0) return;
      const double rel = *v / *best;
      worst = std::max(worst, rel);
      row[col_of(label)] = {
          rel,
          fmt::format("{:.2f}x", rel),
          fmt::format("{}: {} {:.4g} ms ({:.2f}x the regime's best)", g.value("regime", ""), label, *v, rel),
          {{"map.json", 0, p}, {"map.json", 0, best_p}},
          Derivation::kRatio};
    };
    put(g.value("/best/label"_json_pointer, std::string("?")), best_p);
    const json& ru = g.value("runners_up", json::array());
    for (size_t k = 0; k < ru.size(); ++k)
      put(ru[k].value("label", "?"), fmt::format("/regimes/{}/runners_up/{}/latency_ms", i, k));
    cells.push_back(std::move(row));
    std::string interval = "-";
    auto lo = number_at(*map, fmt::format("/regimes/{}/best/ci_low_ms", i)),
         hi = number_at(*map, fmt::format("/regimes/{}/best/ci_high_ms", i));
    if (lo && hi)
      interval =
          number(*lo, fmt::format("{:.4g}", *lo), {"map.json", 0, fmt::format("/regimes/{}/best/ci_low_ms", i)}) +
          " - " +
          number(*hi, fmt::format("{:.4g} ms", *hi), {"map.json", 0, fmt::format("/regimes/{}/best/ci_high_ms", i)});
    rows.push_back(
        {escape(g.value("regime", "")), escape(g.value("bound", "")),
         std::to_string(g.value("workloads", json::array()).size()),
         "<code>" + escape(g.value("/best/label"_json_pointer, std::string())) + "</code>",
         best ? "<td class=\"num\">" + number(*best, fmt::format("{:.4g} ms", *best), {"map.json", 0, best_p}) + "</td>"
              : "-",
         "<td class=\"num\">" + interval + "</td>",
         "<code>" + escape(g.value("/routed_to/label"_json_pointer, std::string("best single"))) + "</code>",
         "<span class=\"detail\">" + escape(g.value("/routed_to/why"_json_pointer, std::string())) + "</span>"});
  }
  page.section(
      "map", "Performance map",
      heat_map(row_labels, cols, cells, std::min(worst, 3.0)) +
          "<p class=\"detail\">Each cell: a configuration's latency in a regime over that regime's best (1.00x, "
          "green); "
          "grey: not among the regime's best four.</p>\n" +
          table({"regime", "bound", "workloads", "best", "latency", "95 % interval", "routed to", "why"}, rows));
  if (auto bs = map->value("/best_single/label"_json_pointer, std::string()); !bs.empty())
    page.section("best-single", "Best single configuration", "<p><code>" + escape(bs) + "</code></p>\n");
  if (std::string guard = guard_section(*map); !guard.empty())
    page.section("guard", "Guard: routes checked against the baseline", guard);
  r.html = page.html();
  return r;
}

}  // namespace kda::report
