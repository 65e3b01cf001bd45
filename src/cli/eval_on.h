// kda eval --on <pool>: the selected workloads spread over a pool of `kda serve` instances.
#pragma once

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "eval/evaluator.h"
#include "task/solution.h"
#include "task/task_pack.h"

namespace kda::cli {

// What the pool gave back: the report assembled from the servers' traces (for the table and the
// score, as one process computes them), the traces as the servers wrote them, and how the dispatch
// went (servers, retries, the failed tasks).
struct OnResult {
  eval::EvalReport report;
  nlohmann::json traces = nlohmann::json::array();
  nlohmann::json dispatch = nlohmann::json::object();
  bool complete = true;  // every task finished with a trace (none failed at the task level)
};

// Errors: bad options for a pool (named), a pool that cannot be reached, a queue that cannot be
// opened; the candidate's own failures are verdicts in the report.
Result<OnResult> evaluate_on(const Args& args, Io& io, const task::TaskPack& pack, const task::Solution& solution);

}  // namespace kda::cli
