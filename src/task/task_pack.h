// The kda task pack: a directory with a FlashInfer-Bench definition, workloads (and hidden holdout
// workloads), a trusted reference solution, baselines and task.toml settings.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "task/definition.h"
#include "task/settings.h"
#include "task/solution.h"
#include "task/workload.h"
#include "util/diagnostics.h"
#include "util/status.h"

namespace kda::task {

struct TaskPack {
  std::filesystem::path root;
  Definition definition;
  std::vector<Workload> workloads;  // workloads.jsonl, in file order
  std::vector<Workload> holdout;    // holdout.jsonl (never shown to agents); may be empty
  Solution reference;               // <reference_dir>/ (settings.reference_dir)
  std::optional<Solution> cpu_reference;    // <cpu_reference_dir>/ when configured
  std::map<std::string, Solution> baselines;  // baselines/<name>/
  std::string baseline_name;        // the baseline speedups are measured against ("" when none)
  TaskSettings settings;
  Backend backend = Backend::kHost;  // settings.backend, else implied by the reference language
  std::vector<std::string> dev_uuids;  // settings.dev_workloads, else 8 evenly spaced workloads

  const Workload* workload(const std::string& uuid) const;  // searches workloads then holdout
  const Solution* baseline() const;                          // nullptr when none
};

// True when `dir` looks like a task pack (has definition.json).
bool is_task_pack(const std::filesystem::path& dir);

// Loads and checks a pack, recording every problem (nullopt if any).
std::optional<TaskPack> load_task_pack(const std::filesystem::path& dir, Diagnostics& diags);
// Same; the error lists every problem (kBadInput) or names the missing pack (kNotFound).
Result<TaskPack> load_task_pack(const std::filesystem::path& dir);

// The default development subset: all uuids when there are at most `count`, else `count` evenly spaced
// ones including the first and the last.
std::vector<std::string> default_dev_uuids(const std::vector<Workload>& workloads, size_t count = 8);

// Task packs under `dir`, recursively (a pack's own subdirectories are not searched), sorted.
std::vector<std::filesystem::path> find_task_packs(const std::filesystem::path& dir);

}  // namespace kda::task
