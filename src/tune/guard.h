// The no-regression guard (docs/tune.md, "No shape slower than the baseline"). Before the
// dispatcher is written, the finalists (the best single configuration and each regime's choice)
// and the pack's baseline are screened once more, in the same session, on every visible workload:
// the tuned ones and the visible ones the search never saw. From those times, plan_guard decides,
// per regime, where the dispatcher sends it:
//   * a tuned regime keeps its choice only when it beats the baseline there (geomean with 95 %
//     intervals apart) and is slower than the baseline on none of the regime's visible workloads;
//     otherwise the fastest finalist that does, otherwise the baseline itself;
//   * visible workloads that no tuned regime covers are grouped into regimes of their own by the same
//     shape buckets (power-of-two ranges per var axis) and routed by the same rule, the finalist fastest
//     there first;
//   (beating the baseline: by kRouteMargin, with the geomeans' 95 % intervals apart;)
//   * the fallback (a call whose axes cannot be read, shapes no rule below serves) is the best single
//     configuration when it is slower than the baseline on no visible workload, else the fastest
//     finalist that is, else the baseline itself;
//   * shapes outside every range go, by the first of two rules that holds on the visible workloads
//     (each left out in turn, routed by the rule over the rest, and slower than the baseline by more
//     than kRuleTolerance on none):
//       nearest: the target of the regime whose ranges are nearest (shape_distance), checked on the
//                visible workloads no tuned regime covers, each of their regimes left out in turn;
//       margin:  the target of the nearest visible workload, when the shape is at least
//                kMarginFactor times nearer to it than to every visible workload where that target
//                was slower than the baseline; otherwise the fallback (margin_target);
//     else the margin rule where at least half of its checks held (kLocalQuorum), serving only the
//     shapes whose nearest visible workload is one where it held (GuardPlan::vetoed lists the others),
//     else, or with nothing to check a rule on, to the fallback. A rule serves a shape only as far from
//     what it routes by (the nearest regime, the nearest visible workload) as the farthest of its checks
//     lay (GuardPlan::reach): farther out it was never checked, and the dispatcher gives the baseline
//     (Unmatched::beyond). The holdout judges.
// Pure: the measurements come in, the plan goes out, so the rule is tested without an evaluator.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "task/task_pack.h"
#include "tune/perf_map.h"
#include "tune/search.h"
#include "util/status.h"

namespace kda::tune {

// The target id that names the pack's baseline, compiled into the dispatcher beside the configurations.
inline constexpr const char* kBaselineTarget = "baseline";
// A target is slower than the baseline on a workload when its latency exceeds the baseline's by more
// than this fraction, or when its 95 % interval lies wholly above the baseline's.
inline constexpr double kGuardTolerance = 0.03;
// A route must also be this much faster than the baseline on its regime's geomean: the guard's
// intervals are one process pair's, and the same code in two runner processes reads up to 6 % apart at
// 50-500 us on the 2-core host; a configuration the screening read just faster than the baseline on
// 16384 x 4 (intervals apart) read 0.90x there in main-job run K2's final evaluation.
inline constexpr double kRouteMargin = 0.05;
// A rule for unseen shapes fails its check on a visible workload where its target is slower than the
// baseline by more than this fraction (the point estimates; the intervals are one process's and do
// not hold the spread between runner processes). The same code timed in two runner processes reads up
// to 6 % apart at 50-500 us on the 2-core host (docs/tune.md); a configuration no faster than the
// baseline on one short-row shape read 0.94x-0.96x there and failed the check at kGuardTolerance,
// which sent every unseen shape, the long rows far from it too, to the fallback.
inline constexpr double kRuleTolerance = 0.06;
// The margin rule routes an unseen shape to its nearest visible workload's target only when every
// visible workload where that target was slower than the baseline lies this many times farther away
// (in shape_distance, i.e. log2 of the ratios).
inline constexpr int kMarginFactor = 2;
// Where no rule holds on every visible workload, the margin rule still serves the unseen shapes nearest
// to the workloads where its check held, when those are at least this share of its checks: one short-row
// boundary (a configuration that wins 4096 x 24 and loses 8192 x 12, which left out no other workload
// reveals) had sent every unseen shape, the long rows far from it too, to the fallback.
inline constexpr double kLocalQuorum = 0.5;
// The guard screens at rung 1's timing (screen_trials + 1 trials of 3 x screen_iterations).
inline constexpr int kGuardRung = 1;

struct GuardRegime {
  std::string regime;
  std::map<std::string, std::pair<int64_t, int64_t>> ranges;  // empty: no route (the fallback serves it)
  std::vector<std::string> workloads;                         // the visible workloads checked here
  std::string preferred;                                      // what the search chose (config id)
  std::string target;                                         // config id or kBaselineTarget
  std::string why;
  bool visible_only = false;  // made of visible workloads that no tuned regime covers
  bool shipped = false;       // one visible shape, sent to the baseline by the shipped check
};

// A visible workload as the margin rule sees it: its axes and the target the dispatcher routes it to.
struct GuardPoint {
  std::string workload;
  std::map<std::string, int64_t> axes;
  std::string target;
};

struct GuardPlan {
  bool ran = false;
  std::string skipped;  // why the guard did not run (no baseline, ...)
  // What serves shapes outside every range: the best single configuration, unless it is slower than
  // the baseline on a visible workload; then the fastest finalist (over the visible workloads) that is
  // slower on none, where one is; else the baseline (kBaselineTarget).
  std::string fallback;
  std::string fallback_why;
  std::vector<GuardRegime> regimes;  // tuned regimes first (their order), then the visible-only ones
  // How shapes outside every regime's ranges are routed: "nearest" (the target of the regime at the
  // smallest shape_distance, the first on a tie), "margin" (margin_target) or "fallback"; why; and the
  // checks of each rule tried, one entry per visible workload checked ({rule, workload, nearest,
  // target, ratio, slower}).
  std::string unseen = "fallback";
  std::string unseen_why;
  // The rule's reach: the largest shape_distance at which one of its checks routed a visible workload
  // by the rule (not to the fallback). A shape farther than this from what the rule routes by goes to
  // the fallback. Infinite until a rule is chosen.
  double reach = std::numeric_limits<double>::infinity();
  nlohmann::json unseen_checks = nlohmann::json::array();
  // The margin rule standing locally (kLocalQuorum): the visible workloads where its check failed. A
  // shape whose nearest visible workload (the first on a tie) is one of these goes to the fallback.
  std::vector<std::string> vetoed;
  // The margin rule's data: every visible workload and where it is routed, and per target the
  // visible workloads where it was slower than the baseline (or has no time).
  std::vector<GuardPoint> points;
  std::map<std::string, std::vector<std::string>> slower_on;
  // Predicted from the guard's screening: per visible workload, baseline ms / the routed target's ms.
  std::map<std::string, double> ratio_by_workload;
  double worst_ratio = 0;
  std::string worst_workload;
  // The same for the best single configuration alone (what a caller gets that picks it instead of the
  // dispatcher): below 1 - kGuardTolerance it is slower than the baseline somewhere visible.
  double best_single_worst_ratio = 0;
  std::string best_single_worst_workload;
  // The shipped check (tune.cc): one entry per screening of the dispatcher as built, {pass, slower: [{workload,
  // axes, ratio, rerouted}]}; empty when it did not run.
  nlohmann::json shipped = nlohmann::json::array();
  nlohmann::json to_json() const;
};

// `measured`: the guard's screening per target (config id or kBaselineTarget; times of the workloads
// each passed). `visible`: every workload the pack shows (the tuned ones among them). `finalists`:
// the configurations that may serve a regime (guard_finalists).
Result<GuardPlan> plan_guard(const task::TaskPack& pack, const PerfMap& pm, const std::vector<std::string>& finalists,
                             const std::vector<const task::Workload*>& visible,
                             const std::map<std::string, Measurement>& measured);

// The shipped check's rule: `shipped` (the dispatcher as built) and `base` (the baseline), screened together
// on the visible workloads. Each visible workload where the dispatcher is slower than the baseline by
// first_regression's rule gets a route of its own shape to the baseline, first in `plan.regimes`, unless
// its shape already has one. Returns the workloads found slower ({workload, axes, ratio, rerouted}).
nlohmann::json reroute_shipped_regressions(GuardPlan& plan, const std::vector<const task::Workload*>& visible,
                                           const Measurement& shipped, const Measurement& base);

// The configuration ids the guard screens: the best single first, each regime's choice, then the
// configuration the tuner starts from (`start`: the default configuration; "" for none).
std::vector<std::string> guard_finalists(const PerfMap& pm, const std::string& start);

// How far a shape lies outside `ranges`: per named axis, log2(lo / v) below the range, log2(v / hi)
// above it, summed (0 inside every range; an axis not named adds nothing; v and hi below 1 count as
// 0.5). The generated dispatcher computes the same for a shape no route matches.
double shape_distance(const std::map<std::string, std::pair<int64_t, int64_t>>& ranges,
                      const std::map<std::string, int64_t>& axes);

// The margin rule for a shape outside every regime: the target of the nearest point (the first on a
// tie) when no point where that target is slower lies within kMarginFactor times its distance and the
// point lies within plan.reach and is not vetoed; "" otherwise or without points (the fallback serves; beyond the
// reach, the generated dispatcher gives the baseline: Unmatched::beyond). `skip`: a
// workload left out of both (the check). `distance`: where given, the nearest point's distance.
std::string margin_target(const GuardPlan& plan, const std::map<std::string, int64_t>& axes,
                          const std::string& skip = {}, double* distance = nullptr);

// Whether a shape at `distance` (shape_distance) lies within a rule's `reach` (GuardPlan::reach); a
// hair of slack, as the generated dispatcher compares the same products as exp2(reach).
inline bool within_reach(double distance, double reach) { return distance <= reach + 1e-9; }

// Whether `axes` lie in every one of `ranges` (an axis not named matches anything).
bool in_ranges(const std::map<std::string, std::pair<int64_t, int64_t>>& ranges,
               const std::map<std::string, int64_t>& axes);

}  // namespace kda::tune
