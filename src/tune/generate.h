// Turns configurations into plain solutions that the unchanged evaluator builds: one configuration
// (a #define block at the top of each translation unit), or a dispatcher that compiles several
// configurations in, each under its own directory with a renamed entry symbol, behind a generated
// entry point that reads the axes from the tensors' shapes and looks the configuration up in a
// compiled-in table. Shape-keyed only: the dispatcher never reads tensor data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "task/definition.h"
#include "task/solution.h"
#include "tune/tunables.h"
#include "util/status.h"

namespace kda::tune {

// The solution of one configuration: the variant's sources, each translation unit prefixed with
// the configuration's macros; the variant's entry point.
Result<task::Solution> config_solution(const task::Solution& base, const Tunables& t, const Config& c);

// `kda eval --param NAME=VALUE ...`: the solution in `dir` with some of its tunables.toml parameters set (NAME
// `variant` picks a variant), every other parameter the variant varies at its first value, built as kda tune
// builds that configuration. A VALUE reads as declared values do: an integer, true or false, else macro
// text. One outside the parameter's declared values is built as given (an experiment beyond the search
// space) and said in `notes`; the parameter-only constraints must hold either way. Errors (kBadInput) name
// the assignment, the file and what it has.
struct Configured {
  task::Solution solution;
  Config config;
  std::vector<std::string> notes;
};
Result<Configured> configured_solution(const task::Solution& base, const std::filesystem::path& dir,
                                       const task::Definition& def, const std::vector<std::string>& assignments);

// One row of the dispatch table: inclusive ranges over var axes (an axis not named matches all).
struct Route {
  std::string regime;
  std::map<std::string, std::pair<int64_t, int64_t>> ranges;
  size_t config = 0;  // index into the configurations passed to dispatcher_solution
};

// Where the dispatcher reads each var axis at call time: the first input (else output) whose
// shape names it, and the dimension.
struct AxisSource {
  std::string axis;
  bool output = false;
  size_t tensor = 0;
  size_t dim = 0;
};
Result<std::vector<AxisSource>> axis_sources(const task::Definition& def);

// How a shape that no route matches is served (tune/guard.h, GuardPlan::unseen).
struct Unmatched {
  enum class Rule { kFallback, kNearest, kMargin };
  Rule rule = Rule::kFallback;
  // kMargin: the visible workloads (axes, and the target each is routed to, an index as Route::config)
  // and, per target, the visible workloads where it is slower than the baseline: the nearest point's
  // target serves when every such workload lies `factor` times farther away (tune::margin_target).
  struct Point {
    std::map<std::string, int64_t> axes;
    size_t config = 0;
    bool vetoed = false;  // the rule's check failed here: a shape nearest to it goes to the fallback
  };
  std::vector<Point> points, slower;
  int factor = 2;
  // kNearest / kMargin: the rule serves a shape only within this shape_distance (log2) of what it
  // routes by (tune::GuardPlan::reach); farther, `beyond`. Infinite: no limit.
  double reach = std::numeric_limits<double>::infinity();
  // What serves a shape beyond the reach, an index as Route::config: kda tune gives the baseline where
  // the pack has one (nothing was checked that far out; the baseline is what the shape runs untuned).
  // Unset: the fallback.
  std::optional<size_t> beyond;
};

// Routes are tried in order, the first whose ranges all hold wins; a shape no route matches goes to
// the route whose ranges are nearest (tune::shape_distance, the first on a tie) under kNearest, to
// the margin rule's target under kMargin (either within unmatched.reach), else to `fallback`, as does
// a call whose tensors do not have the definition's ranks. The routing of the last shape is kept (a
// seqlock, so concurrent callers stay exact), so that a call repeating the shape pays a compare of
// its axes instead of the route search. `baseline` (optional): another solution of the same language compiled
// in under baseline/ with its entry renamed, routed to by index configs.size() (the no-regression
// guard's target, tune/guard.h), also as the fallback; like the configurations, everything but its
// entry must have internal linkage.
Result<task::Solution> dispatcher_solution(const task::Solution& base, const task::Definition& def, const Tunables& t,
                                           const std::vector<Config>& configs, const std::vector<Route>& routes,
                                           size_t fallback, const task::Solution* baseline = nullptr,
                                           const Unmatched& unmatched = {});

// solution.json (sources listed without content) and every source file under `dir`, replacing it.
Status write_solution_dir(const task::Solution& s, const std::filesystem::path& dir);

}  // namespace kda::tune
