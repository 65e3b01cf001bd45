#include "tune/guard.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "tune/regimes.h"

namespace kda::tune {

namespace {

struct Summary {
  double ms = 0, low = 0, high = 0;  // geomeans over the workloads
  bool complete = false;             // a time for every workload
};

Summary summarise(const Measurement* m, const std::vector<std::string>& workloads) {
  Summary s;
  if (m == nullptr || workloads.empty()) return s;
  double a = 0, b = 0, c = 0;
  for (const auto& w : workloads) {
    auto it = m->times.find(w);
    if (it == m->times.end() || it->second.ms <= 0) return s;
    a += std::log(it->second.ms);
    b += std::log(std::max(it->second.ci_low_ms, 1e-12));
    c += std::log(std::max(it->second.ci_high_ms, 1e-12));
  }
  const double n = static_cast<double>(workloads.size());
  return {std::exp(a / n), std::exp(b / n), std::exp(c / n), true};
}

const Measurement* find(const std::map<std::string, Measurement>& measured, const std::string& id) {
  auto it = measured.find(id);
  return it == measured.end() ? nullptr : &it->second;
}

// The first workload where `target` is slower than the baseline beyond noise, or "".
std::string first_regression(const Measurement& target, const Measurement& base, const std::vector<std::string>& ws,
                             double* ratio) {
  for (const auto& w : ws) {
    const WorkloadTime& t = target.times.at(w);
    const WorkloadTime& b = base.times.at(w);
    if (t.ms > b.ms * (1 + kGuardTolerance) || t.ci_low_ms > b.ci_high_ms) {
      *ratio = b.ms / t.ms;
      return w;
    }
  }
  return {};
}

// Whether `id` may serve `ws`: a time on each, faster than the baseline with the geomeans' intervals
// apart and by kRouteMargin, and slower on none. `why` says what failed, or by how much it is faster.
bool beats_baseline(const std::map<std::string, Measurement>& measured, const std::string& id,
                    const std::vector<std::string>& ws, std::string* why) {
  const Measurement* t = find(measured, id);
  const Measurement* b = find(measured, kBaselineTarget);
  const Summary st = summarise(t, ws), sb = summarise(b, ws);
  if (!st.complete) {
    *why = "not timed on every workload here" + (t != nullptr && !t->reason.empty() ? " (" + t->reason + ")" : "");
    return false;
  }
  if (!sb.complete) {  // the baseline failed somewhere here: nothing to hold the target to
    *why = "the baseline has no time on every workload here";
    return true;
  }
  double ratio = 0;
  if (const std::string w = first_regression(*t, *b, ws, &ratio); !w.empty()) {
    *why = fmt::format("slower than the baseline on {} ({:.2f}x of its speed)", w.substr(0, 8), ratio);
    return false;
  }
  if (!(st.high < sb.low)) {
    *why = fmt::format("{:.2f}x the baseline's speed here, intervals overlapping", sb.ms / st.ms);
    return false;
  }
  if (sb.ms < st.ms * (1 + kRouteMargin)) {
    *why = fmt::format("{:.2f}x the baseline's speed here, less than the {:.0f} % margin a route needs", sb.ms / st.ms,
                       kRouteMargin * 100);
    return false;
  }
  *why = fmt::format("{:.2f}x the baseline's speed here, intervals apart, slower on no workload", sb.ms / st.ms);
  return true;
}

// Routes `g`: its preferred configuration when it beats the baseline, else the fastest finalist
// that does, else the baseline.
void decide(const std::map<std::string, Measurement>& measured, const std::vector<std::string>& finalists,
            GuardRegime& g) {
  std::string why_preferred;
  if (g.preferred != kBaselineTarget && beats_baseline(measured, g.preferred, g.workloads, &why_preferred)) {
    g.target = g.preferred;
    g.why = why_preferred;
    return;
  }
  std::vector<std::pair<double, std::string>> others;
  for (const auto& id : finalists) {
    if (id == g.preferred) continue;
    const Summary s = summarise(find(measured, id), g.workloads);
    if (s.complete) others.emplace_back(s.ms, id);
  }
  std::sort(others.begin(), others.end());
  for (const auto& [ms, id] : others) {
    std::string why;
    if (!beats_baseline(measured, id, g.workloads, &why)) continue;
    g.target = id;
    g.why = g.preferred == kBaselineTarget
                ? fmt::format("{} (preferred over the fallback, the baseline)", why)
                : fmt::format("{} (the search's choice {}: {})", why, g.preferred.substr(0, 8), why_preferred);
    return;
  }
  g.target = kBaselineTarget;
  g.why = g.preferred == kBaselineTarget
              ? std::string("kept on the baseline (the fallback): no finalist beats it")
              : fmt::format("kept on the baseline: the search's choice {} is {}, and no other finalist beats it",
                            g.preferred.substr(0, 8), why_preferred);
}

// The finalist with the smallest geomean over `ws` (a time on each), else `otherwise`.
std::string fastest(const std::map<std::string, Measurement>& measured, const std::vector<std::string>& finalists,
                    const std::vector<std::string>& ws, const std::string& otherwise) {
  std::string best = otherwise;
  double best_ms = 0;
  for (const auto& id : finalists) {
    const Summary s = summarise(find(measured, id), ws);
    if (s.complete && (best_ms == 0 || s.ms < best_ms)) {
      best = id;
      best_ms = s.ms;
    }
  }
  return best;
}

std::map<std::string, int64_t> axes_of(const task::TaskPack& pack, const task::Workload& w) {
  std::map<std::string, int64_t> axes = pack.definition.const_axes();
  for (const auto& [k, v] : w.axes) axes[k] = v;
  return axes;
}

}  // namespace

bool in_ranges(const std::map<std::string, std::pair<int64_t, int64_t>>& ranges,
               const std::map<std::string, int64_t>& axes) {
  for (const auto& [axis, r] : ranges) {
    auto it = axes.find(axis);
    if (it == axes.end() || it->second < r.first || it->second > r.second) return false;
  }
  return true;
}

double shape_distance(const std::map<std::string, std::pair<int64_t, int64_t>>& ranges,
                      const std::map<std::string, int64_t>& axes) {
  // The product of the ratios, then one log2: the generated dispatcher compares the same products.
  double product = 1;
  for (const auto& [axis, r] : ranges) {
    auto it = axes.find(axis);
    if (it == axes.end()) continue;
    const double v = it->second >= 1 ? static_cast<double>(it->second) : 0.5;
    if (it->second < r.first) product *= static_cast<double>(r.first) / v;
    if (it->second > r.second) product *= v / (r.second >= 1 ? static_cast<double>(r.second) : 0.5);
  }
  return std::log2(product);
}

std::string margin_target(const GuardPlan& plan, const std::map<std::string, int64_t>& axes, const std::string& skip,
                          double* distance_out) {
  auto distance = [&](const std::map<std::string, int64_t>& at) {
    std::map<std::string, std::pair<int64_t, int64_t>> point;
    for (const auto& [axis, v] : at) point[axis] = {v, v};
    return shape_distance(point, axes);
  };
  const GuardPoint* near = nullptr;
  double near_d = 0;
  for (const auto& p : plan.points) {
    if (p.workload == skip) continue;
    const double d = distance(p.axes);
    if (near == nullptr || d < near_d) {
      near = &p;
      near_d = d;
    }
  }
  if (near == nullptr) return {};
  if (distance_out != nullptr) *distance_out = near_d;
  if (!within_reach(near_d, plan.reach)) return {};
  if (std::find(plan.vetoed.begin(), plan.vetoed.end(), near->workload) != plan.vetoed.end()) return {};
  auto it = plan.slower_on.find(near->target);
  if (it == plan.slower_on.end()) return near->target;  // the baseline, or slower nowhere
  for (const auto& w : it->second) {
    if (w == skip) continue;
    for (const auto& p : plan.points)
      if (p.workload == w && !(kMarginFactor * near_d < distance(p.axes))) return {};
  }
  return near->target;
}

std::vector<std::string> guard_finalists(const PerfMap& pm, const std::string& start) {
  std::vector<std::string> out;
  if (!pm.best_single.empty()) out.push_back(pm.best_single);
  for (const auto& e : pm.entries)
    if (!e.chosen.empty() && std::find(out.begin(), out.end(), e.chosen) == out.end()) out.push_back(e.chosen);
  if (!start.empty() && std::find(out.begin(), out.end(), start) == out.end()) out.push_back(start);
  return out;
}

namespace {

// The fallback: the best single configuration unless it is slower than the baseline on a visible
// workload; then the fastest finalist over them that is slower on none; else the baseline.
void choose_fallback(const PerfMap& pm, const std::vector<std::string>& finalists,
                     const std::vector<std::string>& visible, const std::map<std::string, Measurement>& measured,
                     GuardPlan& plan) {
  plan.fallback = pm.best_single;
  const Measurement* base = find(measured, kBaselineTarget);
  auto regression = [&](const std::string& id, double* ratio) -> std::string {
    const Measurement* t = find(measured, id);
    if (!summarise(t, visible).complete || !summarise(base, visible).complete) return "not timed on every workload";
    return first_regression(*t, *base, visible, ratio);
  };
  double ratio = 0;
  const std::string lost = regression(pm.best_single, &ratio);
  if (lost.empty()) {
    plan.fallback_why = "the best single configuration: slower than the baseline on no visible workload";
    return;
  }
  std::vector<std::pair<double, std::string>> safe;
  for (const auto& id : finalists) {
    double r = 0;
    if (id != pm.best_single && regression(id, &r).empty())
      safe.emplace_back(summarise(find(measured, id), visible).ms, id);
  }
  std::sort(safe.begin(), safe.end());
  const std::string what =
      lost.size() == 36 ? fmt::format("{} ({:.2f}x of its speed)", lost.substr(0, 8), ratio) : lost;
  if (safe.empty()) {
    plan.fallback = kBaselineTarget;
    plan.fallback_why =
        "the baseline: every finalist is slower than it on some visible workload (the best single "
        "configuration on " +
        what + ")";
    return;
  }
  plan.fallback = safe.front().second;
  plan.fallback_why =
      "the fastest finalist slower than the baseline on no visible workload (the best single "
      "configuration is slower on " +
      what + ")";
}

// Whether `target` is slower than the baseline on workload `w`, or has no time there: by
// first_regression's rule (kRegression), or by more than kRuleTolerance on the point estimates
// (kBeyondNoise, a rule's check); `ratio`: the baseline's time over the target's (0 without a time).
enum class Bar { kRegression, kBeyondNoise };
bool slower_on(const std::map<std::string, Measurement>& measured, const std::string& target, const std::string& w,
               double* ratio, Bar bar = Bar::kRegression) {
  const Measurement* t = find(measured, target);
  const Measurement* base = find(measured, kBaselineTarget);
  *ratio = 0;
  if (t == nullptr || base == nullptr || !t->times.contains(w) || !base->times.contains(w)) return true;
  const double t_ms = t->times.at(w).ms, base_ms = base->times.at(w).ms;
  *ratio = base_ms / t_ms;
  if (bar == Bar::kBeyondNoise) return t_ms > base_ms * (1 + kRuleTolerance);
  double regression_ratio = 0;
  return !first_regression(*t, *base, {w}, &regression_ratio).empty();
}

// One rule for unseen shapes checked on `checked` visible workloads: `route(w)` gives what it routed
// by, the target and, when the rule itself chose the target (not the fallback), its distance; each
// routed target must be slower than the baseline on none of them. Returns the first failure ("" when
// the rule holds) and the rule's reach (the farthest distance it routed at), and appends each check
// to plan.unseen_checks.
struct RuleRoute {
  std::string by, target;
  double distance = -1;  // < 0: the fallback served it, not the rule
};
struct RuleCheck {
  size_t checked = 0;
  std::string slower;               // the first workload where it failed, and how
  std::vector<std::string> failed;  // every such workload
  double reach = 0;
  // Checks the rule itself routed (not to the fallback), those of them it held on, and the farthest
  // of those: what kLocalQuorum counts and how far a rule standing where it held reaches.
  size_t routed = 0, routed_held = 0;
  double held_reach = 0;
};
RuleCheck check_rule(const std::string& rule, const std::vector<const task::Workload*>& checked,
                     const std::function<RuleRoute(const task::Workload&)>& route,
                     const std::map<std::string, Measurement>& measured, GuardPlan& plan) {
  RuleCheck out;
  for (const auto* w : checked) {
    const RuleRoute r = route(*w);
    if (r.target.empty()) continue;
    double ratio = 0;
    const bool is_slower = slower_on(measured, r.target, w->uuid, &ratio, Bar::kBeyondNoise);
    ++out.checked;
    out.reach = std::max(out.reach, r.distance);
    if (r.distance >= 0) {
      ++out.routed;
      if (!is_slower) {
        ++out.routed_held;
        out.held_reach = std::max(out.held_reach, r.distance);
      }
    }
    plan.unseen_checks.push_back({{"rule", rule},
                                  {"workload", w->uuid},
                                  {"nearest", r.by},
                                  {"target", r.target},
                                  {"distance", r.distance},
                                  {"ratio", ratio},
                                  {"slower", is_slower}});
    if (is_slower) out.failed.push_back(w->uuid);
    if (is_slower && out.slower.empty())
      out.slower =
          fmt::format("{} ({}: {} there, {})", w->uuid.substr(0, 8), r.by,
                      r.target == kBaselineTarget ? std::string("the baseline") : r.target.substr(0, 8),
                      ratio > 0 ? fmt::format("{:.2f}x of the baseline's speed", ratio) : std::string("no time"));
  }
  return out;
}

// The nearest-regime rule, checked on the visible workloads no tuned regime covers: each
// visible-only regime left out in turn, its workloads go to the nearest other regime's target.
RuleCheck check_nearest(const task::TaskPack& pack, const std::vector<const task::Workload*>& visible,
                        const std::map<std::string, Measurement>& measured, GuardPlan& plan) {
  std::vector<const task::Workload*> checked;
  std::map<std::string, size_t> regime_of;
  for (size_t gi = 0; gi < plan.regimes.size(); ++gi) {
    if (!plan.regimes[gi].visible_only) continue;
    for (const auto* w : visible) {
      const auto& ws = plan.regimes[gi].workloads;
      if (std::find(ws.begin(), ws.end(), w->uuid) == ws.end()) continue;
      checked.push_back(w);
      regime_of[w->uuid] = gi;
    }
  }
  auto route = [&](const task::Workload& w) -> RuleRoute {
    const auto axes = axes_of(pack, w);
    size_t best = plan.regimes.size();
    double best_d = 0;
    for (size_t k = 0; k < plan.regimes.size(); ++k) {
      if (k == regime_of.at(w.uuid) || plan.regimes[k].ranges.empty()) continue;
      const double d = shape_distance(plan.regimes[k].ranges, axes);
      if (best == plan.regimes.size() || d < best_d) {
        best = k;
        best_d = d;
      }
    }
    if (best == plan.regimes.size()) return {};
    return {plan.regimes[best].regime, plan.regimes[best].target, best_d};
  };
  return check_rule("nearest", checked, route, measured, plan);
}

// The margin rule, checked on every visible workload, each left out of the points in turn.
RuleCheck check_margin(const std::vector<const task::Workload*>& visible,
                       const std::map<std::string, Measurement>& measured, GuardPlan& plan) {
  auto route = [&](const task::Workload& w) -> RuleRoute {
    std::map<std::string, int64_t> axes(w.axes.begin(), w.axes.end());
    double d = 0;
    const std::string t = margin_target(plan, axes, w.uuid, &d);
    if (t.empty()) return {"no target with the margin: the fallback", plan.fallback, -1};
    return {"the nearest visible workload", t, d};
  };
  return check_rule("margin", visible, route, measured, plan);
}

// How unseen shapes are routed: the nearest-regime rule if it holds, else the margin rule if it
// holds, else the fallback; unseen_why says which and why.
void choose_unseen_rule(const task::TaskPack& pack, const std::vector<const task::Workload*>& visible,
                        const std::map<std::string, Measurement>& measured, GuardPlan& plan) {
  const RuleCheck nearest = check_nearest(pack, visible, measured, plan);
  if (nearest.checked > 0 && nearest.slower.empty()) {
    plan.unseen = "nearest";
    plan.reach = nearest.reach;
    plan.unseen_why = fmt::format(
        "the nearest regime's target up to a distance of {:.2f} (log2), the farthest it was checked at (farther "
        "out, the baseline), else the fallback: checked on {} visible workload(s) outside the tuned regimes (each "
        "one's regime left out), slower than the baseline on none",
        nearest.reach, nearest.checked);
    return;
  }
  const std::string why_not_nearest =
      nearest.checked == 0
          ? std::string("no visible workload outside the tuned regimes to check the nearest-regime rule on")
          : fmt::format(
                "the nearest-regime rule, checked on {} visible workload(s) outside the tuned regimes, is "
                "slower than the baseline on {}",
                nearest.checked, nearest.slower);
  const RuleCheck margin = check_margin(visible, measured, plan);
  if (margin.checked > 0 && margin.slower.empty()) {
    plan.unseen = "margin";
    plan.reach = margin.reach;
    plan.unseen_why = fmt::format(
        "the nearest visible workload's target where the shape is {}x nearer to it than to every visible workload "
        "where that target is slower than the baseline and within {:.2f} (log2) of it, the farthest the rule was "
        "checked at (farther out, the baseline), else the fallback: checked on {} visible workload(s), each left out, "
        "slower than the baseline on none ({})",
        kMarginFactor, margin.reach, margin.checked, why_not_nearest);
    return;
  }
  const size_t held = margin.routed_held;  // where the rule routed by itself: the fallback's checks prove nothing
  if (held > 0 && static_cast<double>(held) >= kLocalQuorum * static_cast<double>(margin.routed)) {
    plan.unseen = "margin";
    plan.reach = margin.held_reach;
    plan.vetoed = margin.failed;
    plan.unseen_why = fmt::format(
        "the margin rule where it held: the nearest visible workload's target where the shape is {}x nearer to it than "
        "to every visible workload where that target is slower than the baseline and within {:.2f} (log2) of it "
        "(farther out, the baseline), unless that nearest workload is one of the {} where the rule's check failed "
        "(first {}), else the fallback: "
        "checked on {} visible workload(s), each left out, routed {} of them by itself and held on {} ({})",
        kMarginFactor, margin.held_reach, margin.failed.size(), margin.slower, margin.checked, margin.routed, held,
        why_not_nearest);
    return;
  }
  plan.unseen_why = fmt::format("the fallback: {}; the margin rule is slower than the baseline on {}", why_not_nearest,
                                margin.slower.empty() ? std::string("(nothing to check)")
                                                      : fmt::format("{} of {} checked, first {}", margin.failed.size(),
                                                                    margin.checked, margin.slower));
}

// The margin rule's data: each visible workload's target as routed, and where each target is slower.
void place_points(const task::TaskPack& pack, const std::vector<const task::Workload*>& visible,
                  const std::map<std::string, Measurement>& measured, GuardPlan& plan) {
  for (const auto* w : visible) {
    std::string target = plan.fallback;
    for (const auto& g : plan.regimes)
      if (in_ranges(g.ranges, axes_of(pack, *w))) {
        target = g.target;
        break;
      }
    plan.points.push_back({w->uuid, {w->axes.begin(), w->axes.end()}, target});
  }
  for (const auto& p : plan.points) {
    if (p.target == kBaselineTarget || plan.slower_on.contains(p.target)) continue;
    auto& list = plan.slower_on[p.target];
    for (const auto* w : visible) {
      double ratio = 0;
      if (slower_on(measured, p.target, w->uuid, &ratio)) list.push_back(w->uuid);
    }
  }
}

// What the dispatcher will do on each visible workload (its point's target), and the best single
// configuration alone, predicted from the guard's times.
void predict(const PerfMap& pm, const std::map<std::string, Measurement>& measured, GuardPlan& plan) {
  const Measurement* base = find(measured, kBaselineTarget);
  auto ratio_of = [&](const std::string& target, const std::string& w, double* ratio) {
    const Measurement* t = find(measured, target);
    auto it = t != nullptr ? t->times.find(w) : std::map<std::string, WorkloadTime>::const_iterator{};
    auto bt = base->times.find(w);
    if (t == nullptr || it == t->times.end() || bt == base->times.end() || it->second.ms <= 0) return false;
    *ratio = bt->second.ms / it->second.ms;
    return true;
  };
  for (const auto& p : plan.points) {
    double ratio = 0;
    if (!ratio_of(p.target, p.workload, &ratio)) continue;
    plan.ratio_by_workload[p.workload] = ratio;
    if (plan.worst_workload.empty() || ratio < plan.worst_ratio) {
      plan.worst_ratio = ratio;
      plan.worst_workload = p.workload;
    }
    double single_ratio = 0;
    if (!ratio_of(pm.best_single, p.workload, &single_ratio)) continue;
    if (plan.best_single_worst_workload.empty() || single_ratio < plan.best_single_worst_ratio) {
      plan.best_single_worst_ratio = single_ratio;
      plan.best_single_worst_workload = p.workload;
    }
  }
}

}  // namespace

Result<GuardPlan> plan_guard(const task::TaskPack& pack, const PerfMap& pm, const std::vector<std::string>& finalists,
                             const std::vector<const task::Workload*>& visible,
                             const std::map<std::string, Measurement>& measured) {
  GuardPlan plan;
  if (pm.best_single.empty()) return Status::internal("guard: no best single configuration");
  const Measurement* base = find(measured, kBaselineTarget);
  if (base == nullptr || !base->passed) {
    plan.skipped = base == nullptr ? "no baseline measured" : "the baseline did not pass: " + base->reason;
    return plan;
  }
  std::vector<std::string> uuids;
  for (const auto* w : visible) uuids.push_back(w->uuid);
  choose_fallback(pm, finalists, uuids, measured, plan);

  // Tuned regimes (with ranges) take the visible workloads their ranges contain.
  std::vector<const task::Workload*> uncovered;
  for (const auto& e : pm.entries) {
    if (e.regime->fallback_only || e.chosen.empty()) continue;
    plan.regimes.push_back({e.regime->name, e.regime->ranges, {}, e.chosen, {}, {}, false});
  }
  for (const auto* w : visible) {
    bool covered = false;
    for (auto& g : plan.regimes)
      if (in_ranges(g.ranges, axes_of(pack, *w))) {
        g.workloads.push_back(w->uuid);
        covered = true;
        break;
      }
    if (!covered) uncovered.push_back(w);
  }
  // The rest: regimes of their own by the default shape buckets, the finalist fastest on their
  // workloads preferred (the search chose nothing there; preferring the fallback sent main-job run K2's
  // 4 x 512 .. 64 x 4096 to a short-row configuration at 1.2x-1.4x where a long-row finalist read 2.3x-3.8x).
  for (const auto& r : group_regimes(pack, uncovered, {}))
    plan.regimes.push_back({"visible " + r.name,
                            r.ranges,
                            r.workloads,
                            fastest(measured, finalists, r.workloads, plan.fallback),
                            {},
                            {},
                            true});

  for (auto& g : plan.regimes) {
    if (g.workloads.empty()) {
      g.target = g.preferred;
      g.why = "no visible workload in its ranges to check";
      continue;
    }
    decide(measured, finalists, g);
  }
  place_points(pack, visible, measured, plan);
  choose_unseen_rule(pack, visible, measured, plan);
  predict(pm, measured, plan);
  plan.ran = true;
  return plan;
}

nlohmann::json reroute_shipped_regressions(GuardPlan& plan, const std::vector<const task::Workload*>& visible,
                                           const Measurement& shipped, const Measurement& base) {
  nlohmann::json slower = nlohmann::json::array();
  std::vector<GuardRegime> routes;
  for (const task::Workload* w : visible) {
    double ratio = 0;
    const bool timed = shipped.times.contains(w->uuid) && base.times.contains(w->uuid);
    if (timed && first_regression(shipped, base, {w->uuid}, &ratio).empty()) continue;
    std::map<std::string, std::pair<int64_t, int64_t>> point;
    for (const auto& [axis, v] : w->axes) point[axis] = {v, v};
    const bool routed = std::any_of(plan.regimes.begin(), plan.regimes.end(), [&](const GuardRegime& g) {
      return g.ranges == point && g.target == kBaselineTarget;
    });
    slower.push_back({{"workload", w->uuid}, {"axes", w->axes}, {"ratio", ratio}, {"rerouted", !routed}});
    if (routed) continue;
    GuardRegime g;
    g.regime = "shipped " + w->uuid.substr(0, 8);
    g.ranges = point;
    g.workloads = {w->uuid};
    g.target = kBaselineTarget;
    g.shipped = true;
    g.why = timed ? fmt::format("the dispatcher as built ran {:.2f}x the baseline's speed here", ratio)
                  : std::string("the dispatcher as built has no time here");
    routes.push_back(std::move(g));
  }
  plan.regimes.insert(plan.regimes.begin(), routes.begin(), routes.end());
  return slower;
}

nlohmann::json GuardPlan::to_json() const {
  nlohmann::json j{{"ran", ran}};
  if (!ran) {
    j["skipped"] = skipped;
    return j;
  }
  nlohmann::json rs = nlohmann::json::array();
  for (const auto& g : regimes) {
    nlohmann::json ranges = nlohmann::json::object();
    for (const auto& [axis, r] : g.ranges) ranges[axis] = {r.first, r.second};
    rs.push_back({{"regime", g.regime},
                  {"ranges", ranges},
                  {"workloads", g.workloads},
                  {"preferred", g.preferred},
                  {"target", g.target},
                  {"why", g.why},
                  {"visible_only", g.visible_only},
                  {"shipped", g.shipped}});
  }
  j["regimes"] = rs;
  j["fallback"] = fallback;
  j["fallback_why"] = fallback_why;
  j["unseen"] = unseen;
  j["unseen_why"] = unseen_why;
  if (std::isfinite(reach)) j["reach"] = reach;
  j["unseen_checks"] = unseen_checks;
  if (!vetoed.empty()) j["vetoed"] = vetoed;
  nlohmann::json ps = nlohmann::json::array();
  for (const auto& p : points) ps.push_back({{"workload", p.workload}, {"axes", p.axes}, {"target", p.target}});
  j["points"] = ps;
  j["slower_on"] = slower_on;
  j["ratio_by_workload"] = ratio_by_workload;
  if (!shipped.empty()) j["shipped"] = shipped;
  j["worst_ratio"] = worst_ratio;
  j["worst_workload"] = worst_workload;
  j["best_single_worst_ratio"] = best_single_worst_ratio;
  j["best_single_worst_workload"] = best_single_worst_workload;
  return j;
}

}  // namespace kda::tune
