#include "loop/criteria.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace kda::loop {

namespace {

Result<double> parse_speedup(std::string s, const std::string& item) {
  if (!s.empty() && (s.back() == 'x' || s.back() == 'X')) s.pop_back();
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != s.size() || !(v > 0) || !std::isfinite(v))
    return Status::bad_input("--target: '" + item + "': expected a positive speedup such as 1.5 or 1.5x");
  return v;
}

bool compare(double a, const std::string& op, double b) {
  if (op == ">=") return a >= b;
  if (op == "<=") return a <= b;
  if (op == ">") return a > b;
  if (op == "<") return a < b;
  return a == b;
}

}  // namespace

std::string RegimeTarget::text() const { return fmt::format("{}{}{}:{}x", axis, op, value, min_speedup); }

nlohmann::json Criteria::to_json() const {
  nlohmann::json regimes_j = nlohmann::json::array();
  for (const auto& r : regimes)
    regimes_j.push_back({{"axis", r.axis}, {"op", r.op}, {"value", r.value}, {"min_speedup", r.min_speedup}});
  return {{"machine",
           {{"all_passed", true},
            {"min_geomean_speedup", min_geomean_speedup},
            {"min_workload_speedup", min_workload_speedup},
            {"regimes", regimes_j}}},
          {"reviewer", reviewer}};
}

Result<Criteria> Criteria::from_json(const nlohmann::json& j) {
  Criteria c;
  try {
    const auto& m = j.at("machine");
    c.min_geomean_speedup = m.at("min_geomean_speedup").get<double>();
    // Runs started before the per-workload criterion existed read as checking it at the default.
    c.min_workload_speedup = m.value("min_workload_speedup", kMinWorkloadSpeedup);
    for (const auto& r : m.at("regimes"))
      c.regimes.push_back({r.at("axis").get<std::string>(), r.at("op").get<std::string>(), r.at("value").get<double>(),
                           r.at("min_speedup").get<double>()});
    c.reviewer = j.at("reviewer").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    return Status::bad_input(std::string("criteria: ") + e.what());
  }
  return c;
}

Result<Criteria> parse_target(const std::string& spec) {
  Criteria c;
  bool have_global = false;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(pos, end - pos);
    pos = end + 1;
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    if (colon == std::string::npos) {
      if (have_global) return Status::bad_input("--target: more than one global speedup ('" + item + "')");
      KDA_ASSIGN_OR_RETURN(c.min_geomean_speedup, parse_speedup(item, item));
      have_global = true;
      continue;
    }
    RegimeTarget r;
    KDA_ASSIGN_OR_RETURN(r.min_speedup, parse_speedup(item.substr(colon + 1), item));
    const std::string cond = item.substr(0, colon);
    size_t op_at = cond.find_first_of("<>=");
    if (op_at == std::string::npos || op_at == 0)
      return Status::bad_input("--target: '" + item + "': expected AXIS<op>VALUE:SPEEDUP, e.g. M>=128:2x");
    size_t op_len = op_at + 1 < cond.size() && cond[op_at + 1] == '=' ? 2 : 1;
    r.axis = cond.substr(0, op_at);
    r.op = cond.substr(op_at, op_len);
    if (r.op == "=") r.op = "==";
    size_t used = 0;
    try {
      r.value = std::stod(cond.substr(op_at + op_len), &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || op_at + op_len + used != cond.size())
      return Status::bad_input("--target: '" + item + "': the regime value is not a number");
    c.regimes.push_back(r);
  }
  return c;
}

std::vector<CriterionResult> check_criteria(const Criteria& c, const eval::EvalReport& report) {
  std::vector<CriterionResult> out;
  std::vector<std::string> not_passed;
  for (const auto& w : report.workloads)
    if (w.verdict != eval::Verdict::kPassed) not_passed.push_back(w.uuid);
  out.push_back(
      {"all_passed", report.all_passed && !report.workloads.empty(),
       fmt::format("{}/{} workloads PASSED", report.workloads.size() - not_passed.size(), report.workloads.size()),
       not_passed});
  out.push_back({"geomean_speedup", report.all_passed && report.score_geomean >= c.min_geomean_speedup,
                 fmt::format("geomean speedup {:.3f}x, target {:.3f}x", report.score_geomean, c.min_geomean_speedup)});
  if (c.min_workload_speedup > 0 && !report.baseline_name.empty()) {
    // One-sided, as the claim check: a workload is below the floor only when every trial says so
    // (each trial's candidate median against the baseline's, timed interleaved); one whose point
    // estimate is under the floor with a trial above it is within the machine's noise. The detail
    // names the slowest workload that is below, else the slowest one.
    auto best_trial = [](const eval::WorkloadResult& w) {
      double best = 0;
      if (w.trial_ms.size() >= 2 && w.trial_ms.size() == w.baseline_trial_ms.size())
        for (size_t i = 0; i < w.trial_ms.size(); ++i)
          if (w.trial_ms[i] > 0) best = std::max(best, w.baseline_trial_ms[i] / w.trial_ms[i]);
      return best;
    };
    const eval::WorkloadResult *worst = nullptr, *worst_below = nullptr;
    std::vector<std::string> below_floor;
    for (const auto& w : report.workloads) {
      if (w.verdict != eval::Verdict::kPassed || w.speedup <= 0) continue;
      if (worst == nullptr || w.speedup < worst->speedup) worst = &w;
      const bool below = w.speedup < c.min_workload_speedup && best_trial(w) < c.min_workload_speedup;
      if (below) below_floor.push_back(w.uuid);
      if (below && (worst_below == nullptr || w.speedup < worst_below->speedup)) worst_below = &w;
    }
    if (worst != nullptr) {
      const eval::WorkloadResult& shown = worst_below ? *worst_below : *worst;
      const bool noise = !worst_below && worst->speedup < c.min_workload_speedup;
      out.push_back({"no_workload_slower", worst_below == nullptr,
                     fmt::format("slowest against the baseline: workload {} ({}) at {:.3f}x, floor {:.2f}x{}",
                                 shown.uuid.substr(0, 8), shown.axes.dump(), shown.speedup, c.min_workload_speedup,
                                 noise ? fmt::format(" (within noise: one trial at {:.3f}x)", best_trial(*worst)) : ""),
                     below_floor});
    }
  }
  for (const auto& r : c.regimes) {
    double log_sum = 0;
    int n = 0;
    bool ok = true;
    std::vector<std::string> in_regime;
    for (const auto& w : report.workloads) {
      if (!w.axes.contains(r.axis) || !w.axes[r.axis].is_number()) continue;
      if (!compare(w.axes[r.axis].get<double>(), r.op, r.value)) continue;
      ok = ok && w.verdict == eval::Verdict::kPassed && w.speedup > 0;
      if (w.speedup > 0) log_sum += std::log(w.speedup);
      in_regime.push_back(w.uuid);
      ++n;
    }
    const double g = n > 0 ? std::exp(log_sum / n) : 0;
    if (n == 0) {
      out.push_back({"regime:" + r.text(), true, "no workload of this set is in the regime"});
    } else {
      const bool met = ok && g >= r.min_speedup;
      out.push_back({"regime:" + r.text(), met,
                     fmt::format("{} workloads, geomean speedup {:.3f}x, target {:.3f}x", n, g, r.min_speedup),
                     met ? std::vector<std::string>{} : in_regime});
    }
  }
  return out;
}

bool all_met(const std::vector<CriterionResult>& results) {
  for (const auto& r : results)
    if (!r.met) return false;
  return true;
}

nlohmann::json criteria_results_json(const std::vector<CriterionResult>& results) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json one = {{"id", r.id}, {"met", r.met}, {"detail", r.detail}};
    if (!r.workloads.empty()) one["workloads"] = r.workloads;
    a.push_back(std::move(one));
  }
  return a;
}

}  // namespace kda::loop
