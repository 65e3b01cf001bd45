// `kda run`: the plan -> implement -> verify -> review loop as a resumable state machine.
//
//   setup -> plan (draft <-> plan review, bounded) -> frozen plan
//         -> round* (writer -> verify -> review -> decide) -> finalize -> done | stopped
//
// Every transition writes state.json atomically (with the audit log head) after the step's
// artifacts, and every step is idempotent: a resumed run redoes at most the step it was killed
// in (a writer step restarts from the incumbent commit), never an accepted round. See docs/run.md.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/backend.h"
#include "eval/evaluator.h"
#include "loop/run_state.h"
#include "task/solution.h"
#include "task/task_pack.h"
#include "util/status.h"

namespace kda::loop {

using EvaluateFn =
    std::function<Result<eval::EvalReport>(const task::TaskPack&, const task::Solution&, const eval::EvalOptions&)>;
// Several solutions evaluated as one batch, their reports in the same order (a pool spreads the
// batch over its devices at once).
using EvaluateManyFn = std::function<Result<std::vector<eval::EvalReport>>(
    const task::TaskPack&, const std::vector<task::Solution>&, const eval::EvalOptions&)>;
using BackendFactory = std::function<Result<std::unique_ptr<agent::Backend>>(const std::string& spec)>;

// The run's external effects, replaceable in tests.
struct LoopEnv {
  std::filesystem::path runner_binary;  // kda-runner
  EvaluateFn evaluate;                  // empty: eval::evaluate
  // Where set (kda run --on), a round's lanes have their official evaluations taken as one batch
  // before each lane is verified in turn; empty: each lane's evaluation is taken when it is verified.
  EvaluateManyFn evaluate_many;
  BackendFactory make_backend;                     // empty: loop::make_backend
  std::function<void(const std::string&)> status;  // one live status line per event (stderr); may be empty
  std::string ncu;                                 // the writer's `profile` tool: ncu binary ("": PATH, CUDA)
};

struct RunOutcome {
  std::filesystem::path run_dir;
  std::string phase;             // "done" | "stopped"
  std::string stop_reason;       // "" when done
  std::string incumbent;         // candidate id of the exported solution
  double incumbent_speedup = 0;  // geomean vs the baseline (the final check's when done)
  int rounds = 0;                // rounds decided
  bool criteria_met = false;
  // Per measured round: round, candidate, accepted, reason, detail, geomean, review.
  nlohmann::json round_rows = nlohmann::json::array();
  nlohmann::json to_json() const;
};

// Creates `run_dir` (absent or empty), seals the task, measures the starting solution and drives
// the run until it is done or stopped. Errors are kda's own or a backend's failure; the run can
// then be resumed.
Result<RunOutcome> start_run(const std::filesystem::path& run_dir, const LoopOptions& options, const LoopEnv& env);
// New budgets for a resumed run (unset: unchanged). A run stopped by a budget or by max rounds
// continues where it stopped when the new budgets allow it; the change is in the audit log.
struct BudgetChange {
  std::optional<int> max_rounds;
  std::optional<int64_t> budget_tokens;
  std::optional<double> hours, budget_usd, gpu_minutes;
  bool any() const { return max_rounds || budget_tokens || hours || budget_usd || gpu_minutes; }
};

// Continues a run from its state.json (after a crash, kill -9 or a backend failure), with
// `budgets` applied first. Extending a run that is done, or stopped for anything but a budget or
// max rounds, is bad input (it names why).
Result<RunOutcome> resume_run(const std::filesystem::path& run_dir, const LoopEnv& env,
                              const BudgetChange& budgets = {});

}  // namespace kda::loop
