// Evaluations spread over a pool of `kda serve` instances (src/exec): `kda eval --on` (one task per
// workload) and `kda tune --on` (one task per configuration and rung).
#pragma once

#include <filesystem>
#include <memory>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

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

// One evaluation for the pool: a solution on some workloads, with kda_timing (serve/tasks.h
// TaskTiming: trials, warmup, iterations, baseline) or the servers' own timing when empty.
struct PoolJob {
  task::Solution solution;
  std::vector<std::string> uuids;
  nlohmann::json timing = nlohmann::json::object();
};

// kBadInput naming the first of `names` the user gave: "--NAME cannot go with --on: WHY" (options a
// server's `kda eval` does not take from a request).
Status refuse_with_on(const Args& args, std::initializer_list<const char*> names, std::string_view why);

// The kda_timing (serve/tasks.h TaskTiming) that asks a server to evaluate as `o` says: its trials,
// warmup and iterations where set, whether the baseline is timed beside, and the solution timed in its
// place (o.baseline) where one is given.
nlohmann::json pool_timing(const eval::EvalOptions& o);

// The pool of one command: `--on` parsed, a local `kda serve` started where it names `local`, and a
// durable queue (--queue FILE, else one in the cache that goes with the pool). run() queues a batch,
// spreads it over the servers and rebuilds a report per job; a rerun with the same --queue finds the
// tasks it finished.
class Pool {
 public:
  // `uuids`: every workload the command may evaluate (a holdout one lets a local server serve it).
  // `command` names the command in progress lines ("kda eval").
  static Result<std::unique_ptr<Pool>> open(const Args& args, Io& io, const task::TaskPack& pack,
                                            const std::vector<std::string>& uuids, std::string command);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // The jobs' reports, in their order. Errors: the queue's, or no server up (the queue keeps the
  // tasks); a task that failed at the task level leaves its report incomplete.
  Result<std::vector<OnResult>> run(const std::vector<PoolJob>& jobs);
  // One solution on `uuids`, a task per workload (the devices take the shards in parallel), the report
  // put together as one process's: kda eval --on, kda run --on.
  Result<OnResult> evaluate(const task::Solution& solution, const std::vector<std::string>& uuids,
                            const nlohmann::json& timing = nlohmann::json::object());
  // Several solutions on the same `uuids` as one batch (a task per solution and workload, all queued
  // before the dispatch): kda run --on's lanes. Their results in the solutions' order.
  Result<std::vector<OnResult>> evaluate_many(const std::vector<task::Solution>& solutions,
                                              const std::vector<std::string>& uuids,
                                              const nlohmann::json& timing = nlohmann::json::object());
  size_t devices_hint() const;  // servers known so far (a local pool's devices), at least 1

 private:
  struct Impl;
  explicit Pool(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// kda eval --on: one task per selected workload. Errors: bad options for a pool (named), a pool that
// cannot be reached, a queue that cannot be opened; the candidate's own failures are verdicts.
Result<OnResult> evaluate_on(const Args& args, Io& io, const task::TaskPack& pack, const task::Solution& solution);

}  // namespace kda::cli
