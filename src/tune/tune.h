// `kda tune`: searches a tunable solution's configurations (tunables.toml beside solution.json) on
// the official evaluator, groups the workloads into regimes, writes the performance map
// (map.json, map.md) and generates a solution that dispatches each shape to its regime's best
// configuration. See docs/tune.md.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/evaluator.h"
#include "task/task_pack.h"
#include "util/status.h"

namespace kda::tune {

// One evaluation of a batch (kda tune --on): a solution and the options it is evaluated with (its
// workloads, trials, warmup, iterations and whether the pack's baseline is timed beside it).
struct EvalJob {
  task::Solution solution;
  eval::EvalOptions options;
};
// Evaluates a batch at once, the reports in the jobs' order (a pool of `kda serve` instances spreads it
// over its devices). Errors are the environment's; a solution's failures are verdicts.
using EvaluateMany = std::function<Result<std::vector<eval::EvalReport>>(const std::vector<EvalJob>&)>;

struct TuneOptions {
  eval::EvalOptions eval;         // runner binary, seed, sandbox, workloads ("dev" default for screening)
  std::filesystem::path out_dir;  // where state.json, map.json, map.md and dispatcher/ go
  int max_configs = 0;            // 0 = no limit
  double max_minutes = 0;         // 0 = no limit (wall)
  bool resume = false;            // continue from out_dir/state.json; nothing measured twice
  std::string strategy = "auto";  // auto | exhaustive | halving | model
  std::function<void(const std::string&)> progress;  // one line per event (configs done, best so far, budget)
  // Additions beyond the agreed API (defaults keep the agreed behaviour):
  std::filesystem::path regimes_file;  // a TOML file with [[regime]] tables; overrides tunables.toml's
  int jobs = 0;                        // parallel compiles; 0 = all cores
  // Screening timing (successive halving's first rung); later rungs and the final timing of the
  // best single configuration and the dispatcher use the pack's task.toml timing.
  int screen_trials = 1, screen_warmup = 2, screen_iterations = 10;
  // Measure in one screening session (eval::Screener: runners kept alive, reference outputs
  // reused); false: one official evaluate() per measurement (slower, each in fresh processes).
  bool screen = true;
  bool final_eval = true;  // time best single and dispatcher with the pack's timing at the end
  // The no-regression guard (tune/guard.h): the finalists and the baseline screened on every visible
  // workload, and no regime routed where it would be slower than the baseline.
  bool guard = true;
  int stop_after = 0;  // tests: stop as if killed after this many measurements (kFailed)
  // Set: every measurement goes through it instead of this process's evaluator, `parallelism` at a
  // time (the pool's devices); the screening session is not used, and the final head-to-head of the
  // dispatcher against the best single configuration is not run (a server times its pack's baseline).
  EvaluateMany evaluate_many;
  size_t parallelism = 1;
};

struct RegimeChoice {
  std::string regime;
  nlohmann::json config;  // {"variant": "...", "params": {...}, "id": "..."}
  double latency_ms = 0;  // geomean over the regime's workloads
  double ci_low_ms = 0, ci_high_ms = 0;
  std::vector<std::string> workloads;  // uuids
};

struct TuneResult {
  std::filesystem::path
      dispatcher_dir;  // a complete solution directory (solution.json + sources) dispatching per regime
  std::filesystem::path best_single_dir;  // the best single configuration as a plain solution directory
  std::vector<RegimeChoice> map;          // one entry per regime
  double best_single_geomean_ms = 0, dispatcher_geomean_ms = 0;  // screening geomeans over the tuned workloads
  int configs_measured = 0;
  // Additions:
  double baseline_geomean_ms = 0;  // the pack's baseline, timed interleaved in the final evaluation (0 without)
  // The lower ends of the final evaluations' 95 % intervals of the geomean speedup over the baseline
  // (0: no interval): what a claim may say and the official evaluation still confirm.
  double dispatcher_speedup_ci_low = 0, best_single_speedup_ci_low = 0;
  bool dispatcher_passed = false;  // the final evaluation passed every tuned workload (true when not run)
  bool final_timing = false;       // the geomeans come from the final evaluation, not the screening
  // The final head-to-head: geomean over the tuned workloads of best single / dispatcher latency,
  // timed interleaved in one evaluation (> 1: the dispatcher is faster; 0: not run).
  double dispatcher_vs_best_single = 0;
  // The screening's own geomeans of the same two solutions (the dispatcher's predicted from its
  // regimes' choices), to compare with the final evaluation's.
  double best_single_screen_ms = 0, dispatcher_screen_ms = 0;
  int configs_total = 0;   // valid configurations in the space
  int configs_failed = 0;  // did not compile or did not pass
  // The guard's plan (GuardPlan::to_json: per regime the target and why) and, predicted from its
  // screening, the dispatcher's worst baseline/latency ratio over the visible workloads (0: no guard).
  nlohmann::json guard = nlohmann::json::object();
  double worst_visible_ratio = 0;
  double wall_s = 0;
  nlohmann::json to_json() const;
};

// Errors: kBadInput for a bad tunables.toml (file, line, parameter named), kFailed when no
// configuration passed, evaluator errors passed through.
Result<TuneResult> tune(const task::TaskPack& pack, const std::filesystem::path& solution_dir,
                        const TuneOptions& options);

}  // namespace kda::tune
