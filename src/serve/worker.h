// One device's worker: takes the next task and evaluates it with kda's official evaluator, `kda eval`,
// in a child process of its own (its runners pinned to the worker's GPU by CUDA_VISIBLE_DEVICES), so
// a task's verdicts are exactly what `kda eval` gives on that machine, a crash in one evaluation
// cannot take the server down, and the server's --timeout kills the evaluation's whole process group.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/dataset.h"
#include "serve/tasks.h"

namespace kda::serve {

// A device as `--devices` names it: "cuda:N" (a GPU) or "cpu:N" (a host worker).
struct Device {
  std::string name;
  bool cuda = false;
  int index = 0;
};

// "cuda:0,cuda:1", "cpu" (one host worker) or "cpu:N" (N host workers). kBadInput naming the item
// that is neither, or a device named twice.
Result<std::vector<Device>> parse_devices(const std::string& text);

struct EvalSettings {
  std::filesystem::path kda_binary;               // the `kda` that runs `kda eval`
  std::filesystem::path work_dir;                 // one directory per task under it (solution.json, traces.jsonl)
  double timeout_s = 300;                         // per task: the evaluation's whole wall time
  std::optional<int> warmup, iterations, trials;  // override task.toml [timing]
  bool allow_holdout = false;
};

// What became of one task: traces (completed) or an error (failed).
struct Outcome {
  std::optional<nlohmann::json> traces;
  std::string error;
  double wall_s = 0;
};

// The argv of the `kda eval` that evaluates `task` (tested on its own).
std::vector<std::string> eval_argv(const EvalSettings& s, const Entry& entry, const Task& task,
                                   const std::filesystem::path& dir);

// Evaluates one task on `device`. `cancelled` is polled; when it turns true the evaluation is killed.
Outcome evaluate_task(const EvalSettings& s, const Dataset& data, const Device& device, const Task& task,
                      const std::atomic<bool>& cancelled);

// A worker's loop: next task, evaluate, record; returns when the store closes. `log`: one line per
// task started and finished.
void run_worker(const EvalSettings& s, const Dataset& data, const Device& device, TaskStore& store,
                const std::atomic<bool>& cancelled, const std::function<void(const std::string&)>& log);

}  // namespace kda::serve
