#include "tune/perf_map.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tune/guard.h"
#include "util/fs.h"

namespace kda::tune {

namespace {

constexpr size_t kRunnersUp = 3;

nlohmann::json ranked_json(const SearchSpace& space, const Ranked& r) {
  const Config* c = find_config(space, r.config);
  return {{"config", c ? c->to_json() : nlohmann::json(r.config)},
          {"label", c ? c->label() : r.config},
          {"latency_ms", r.geomean_ms},
          {"ci_low_ms", r.ci_low_ms},
          {"ci_high_ms", r.ci_high_ms},
          {"rung", r.rung}};
}

}  // namespace

const Config* find_config(const SearchSpace& space, const std::string& id) {
  for (const auto& c : space.configs)
    if (c.id() == id) return &c;
  return nullptr;
}

Result<PerfMap> build_perf_map(const SearchSpace& space, const State& state) {
  PerfMap pm;
  auto single = rank(space, state, space.workloads);
  if (!single.empty()) {
    pm.best_single = single.front().config;
    pm.best_single_geomean_ms = single.front().geomean_ms;
  }
  double log_sum = 0;
  size_t n = 0;
  for (const auto& r : space.regimes) {
    PerfMapEntry e{&r, r.fallback_only ? std::vector<Ranked>{} : rank(space, state, r.workloads), {}, {}};
    e.chosen = pm.best_single;
    e.why = r.fallback_only ? "fallback: the best single configuration" : "no configuration passed here";
    if (!e.ranked.empty()) {
      const Ranked& top = e.ranked.front();
      auto single_here =
          std::find_if(e.ranked.begin(), e.ranked.end(), [&](const Ranked& x) { return x.config == pm.best_single; });
      if (top.config == pm.best_single) {
        e.why = "its fastest is the best single configuration";
      } else if (single_here == e.ranked.end()) {
        e.chosen = top.config;
        e.why = "the best single configuration was not measured on every workload here";
      } else {
        const double gain = 1.0 - top.geomean_ms / single_here->geomean_ms;
        const bool apart = top.ci_high_ms < single_here->ci_low_ms;
        if (gain > kRouteMinGain && apart) {
          e.chosen = top.config;
          e.why = fmt::format("{:.1f} % faster than the best single configuration here, intervals apart", 100 * gain);
        } else {
          e.why = fmt::format(
              "its fastest is {:.1f} % faster than the best single configuration here{}: within noise, "
              "routed to the best single",
              100 * gain, apart ? "" : " with overlapping intervals");
        }
      }
    }
    const std::string& chosen = e.chosen;
    if (r.fallback_only && !pm.best_single.empty()) e.ranked = rank(space, state, r.workloads, {pm.best_single});
    // The dispatcher's predicted time: each workload at the chosen configuration's highest rung.
    for (const auto& w : r.workloads) {
      for (int rung = 16; rung >= 0 && !chosen.empty(); --rung) {
        const Measurement* m = state.find(chosen, rung);
        if (m == nullptr || !m->passed) continue;
        auto it = m->times.find(w);
        if (it == m->times.end()) continue;
        log_sum += std::log(std::max(it->second.ms, 1e-12));
        ++n;
        break;
      }
    }
    pm.entries.push_back(std::move(e));
  }
  if (n == space.workloads.size() && n > 0) pm.dispatcher_geomean_ms = std::exp(log_sum / static_cast<double>(n));
  return pm;
}

namespace {

// map.md's guard section (tune/guard.h's plan as TuneResult::guard holds it): where each regime is
// routed and why, what serves shapes outside every regime and why.
std::string guard_markdown(const nlohmann::json& g) {
  if (!g.is_object() || !g.contains("ran")) return {};
  if (!g.value("ran", false)) return fmt::format("\nGuard: not run ({}).\n", g.value("skipped", std::string()));
  auto short_id = [](const std::string& id) {
    return id == kBaselineTarget ? std::string("the baseline") : id.substr(0, 12);
  };
  std::string md =
      "\n## Guard: routes checked against the baseline on every visible workload\n\n"
      "| regime | visible workloads | routed to | why |\n|---|---|---|---|\n";
  for (const auto& r : g.value("regimes", nlohmann::json::array()))
    md += fmt::format("| {} | {} | {} | {} |\n", r.value("regime", std::string()),
                      r.value("workloads", nlohmann::json::array()).size(), short_id(r.value("target", std::string())),
                      r.value("why", std::string()));
  md += fmt::format("\nFallback: {} ({}).\nShapes outside every regime: {}.\n",
                    short_id(g.value("fallback", std::string())), g.value("fallback_why", std::string()),
                    g.value("unseen_why", std::string()));
  return md;
}

}  // namespace

Status write_perf_map(const PerfMap& pm, const SearchSpace& space, const std::filesystem::path& out_dir,
                      const TuneResult& result) {
  nlohmann::json regimes = nlohmann::json::array();
  std::string md = "# kda tune performance map\n\n";
  md += fmt::format("{} configurations in the space, {} measured ({} failed); {} tuned workloads.\n\n",
                    result.configs_total, result.configs_measured, result.configs_failed, space.workloads.size());
  md +=
      "| regime | routes on | bound | workloads | best configuration | latency ms (95% CI) | runners-up | routed to "
      "|\n";
  md += "|---|---|---|---|---|---|---|---|\n";
  for (const auto& e : pm.entries) {
    nlohmann::json ranges = nlohmann::json::object();
    std::string routes;
    for (const auto& [axis, r] : e.regime->ranges) {
      ranges[axis] = {r.first, r.second};
      routes += fmt::format("{}{}={}..{}", routes.empty() ? "" : " ", axis, r.first, r.second);
    }
    nlohmann::json j{{"regime", e.regime->name},
                     {"ranges", ranges},
                     {"bound", bound_name(e.regime->bound)},
                     {"workloads", e.regime->workloads},
                     {"fallback_only", e.regime->fallback_only}};
    if (!e.ranked.empty()) {
      j["best"] = ranked_json(space, e.ranked.front());
      nlohmann::json ru = nlohmann::json::array();
      for (size_t i = 1; i < e.ranked.size() && i <= kRunnersUp; ++i) ru.push_back(ranked_json(space, e.ranked[i]));
      j["runners_up"] = ru;
    }
    if (!e.chosen.empty()) {
      const Config* c = find_config(space, e.chosen);
      j["routed_to"] = {{"config", c ? c->to_json() : nlohmann::json(e.chosen)},
                        {"label", c ? c->label() : e.chosen},
                        {"why", e.why}};
    }
    regimes.push_back(j);
    std::string best = "-", lat = "-", ru;
    if (!e.ranked.empty()) {
      const auto& t = e.ranked.front();
      best = find_config(space, t.config) ? find_config(space, t.config)->label() : t.config;
      lat = fmt::format("{:.6g} ({:.6g}..{:.6g})", t.geomean_ms, t.ci_low_ms, t.ci_high_ms);
      for (size_t i = 1; i < e.ranked.size() && i <= kRunnersUp; ++i) {
        const Config* c = find_config(space, e.ranked[i].config);
        ru += fmt::format("{}{} {:.6g}", ru.empty() ? "" : "; ", c ? c->label() : e.ranked[i].config,
                          e.ranked[i].geomean_ms);
      }
    }
    const Config* routed = e.chosen.empty() ? nullptr : find_config(space, e.chosen);
    const std::string routed_to =
        routed == nullptr ? "-"
                          : fmt::format("{} ({})", e.chosen == pm.best_single ? "best single" : routed->label(), e.why);
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", e.regime->name,
                      e.regime->fallback_only ? "(fallback)" : (routes.empty() ? "*" : routes),
                      bound_name(e.regime->bound), e.regime->workloads.size(), best, lat, ru.empty() ? "-" : ru,
                      routed_to);
  }
  nlohmann::json j{{"kind", "kda-tune-map"},
                   {"version", 1},
                   {"regimes", regimes},
                   {"workloads", space.workloads},
                   {"result", result.to_json()}};
  if (!pm.best_single.empty()) {
    const Config* c = find_config(space, pm.best_single);
    j["best_single"] = {{"config", c->to_json()}, {"label", c->label()}, {"latency_ms", pm.best_single_geomean_ms}};
    md += fmt::format("\nBest single configuration: {} ({:.6g} ms geomean over the tuned workloads, screening).\n",
                      c->label(), pm.best_single_geomean_ms);
  }
  if (pm.dispatcher_geomean_ms > 0)
    md += fmt::format("Dispatcher, predicted from the screening: {:.6g} ms geomean.\n", pm.dispatcher_geomean_ms);
  if (result.final_timing)
    md += fmt::format(
        "\nFinal evaluation (task.toml timing, baseline interleaved): baseline {:.6g} ms, best single {:.6g} ms, "
        "dispatcher {:.6g} ms{} (geomeans over the tuned workloads).\n",
        result.baseline_geomean_ms, result.best_single_geomean_ms, result.dispatcher_geomean_ms,
        result.dispatcher_passed ? "" : " (dispatcher FAILED)");
  if (result.dispatcher_vs_best_single > 0)
    md += fmt::format(
        "Head-to-head (the best single configuration as the baseline, interleaved call by call): the "
        "dispatcher is {:.3f}x its speed (geomean over the tuned workloads).\n",
        result.dispatcher_vs_best_single);
  md += guard_markdown(result.guard);
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(out_dir / "map.json", j.dump(2) + "\n"));
  return fs::write_file_atomic(out_dir / "map.md", md);
}

}  // namespace kda::tune
