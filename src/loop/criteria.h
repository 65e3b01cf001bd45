// Acceptance criteria of a run. The machine-checkable ones come from --target and are checked by
// kda on an evaluation report: every workload PASSED, geomean speedup vs the pack's baseline at
// least the target, and optional per-regime targets (geomean over the workloads whose axis
// satisfies a comparison). Reviewer-judged criteria are text the reviewer must weigh.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/evaluator.h"
#include "util/status.h"

namespace kda::loop {

struct RegimeTarget {
  std::string axis;  // workload axis name, e.g. "M"
  std::string op;    // ">=", "<=", ">", "<", "=="
  double value = 0;
  double min_speedup = 1;
  std::string text() const;  // "M>=128:2x"
};

// No workload may end far slower than the baseline: the completion check fails when a PASSED
// workload's speedup over the baseline is below this (issue 45: a candidate 2x faster on the dev
// workloads was 0.17x of the baseline on a shape the dev set did not hold). Not 0.95: on the 2-core
// host a shape served by the baseline itself (compiled into the tuner's dispatcher) read 0.88-0.98x
// of the separately built baseline across runs, and a floor inside that noise failed honest runs.
inline constexpr double kMinWorkloadSpeedup = 0.8;

struct Criteria {
  double min_geomean_speedup = 1.0;
  double min_workload_speedup = kMinWorkloadSpeedup;  // every workload; 0: not checked
  std::vector<RegimeTarget> regimes;
  std::vector<std::string> reviewer;  // reviewer-judged
  nlohmann::json to_json() const;
  static Result<Criteria> from_json(const nlohmann::json& j);
};

// "1.5", "1.5x", "1.5x,M>=128:2x,N<64:1.2". Errors name the bad item.
Result<Criteria> parse_target(const std::string& spec);

struct CriterionResult {
  std::string id;  // "all_passed", "geomean_speedup", "no_workload_slower", "regime:M>=128:2x"
  bool met = false;
  std::string detail;
  // Where it failed, the workloads that made it fail (not PASSED; below the floor; a failed regime's
  // workloads): what a repair of the check is measured on. Empty where met, and for the geomean.
  std::vector<std::string> workloads;
};
std::vector<CriterionResult> check_criteria(const Criteria& c, const eval::EvalReport& report);
bool all_met(const std::vector<CriterionResult>& results);
nlohmann::json criteria_results_json(const std::vector<CriterionResult>& results);

}  // namespace kda::loop
