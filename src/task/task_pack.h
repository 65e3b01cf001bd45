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
  std::vector<Workload> workloads;            // workloads.jsonl, in file order
  std::vector<Workload> holdout;              // holdout.jsonl (never shown to agents); may be empty
  Solution reference;                         // <reference_dir>/ (settings.reference_dir)
  std::optional<Solution> cpu_reference;      // <cpu_reference_dir>/ when configured
  std::map<std::string, Solution> baselines;  // baselines/<name>/
  std::string baseline_name;                  // the baseline speedups are measured against ("" when none)
  TaskSettings settings;
  Backend backend = Backend::kHost;       // settings.backend, else implied by the reference language
  std::vector<std::string> dev_uuids;     // settings.dev_workloads, else 8 evenly spaced workloads
  std::filesystem::path definition_file;  // root/definition.json, or the dataset's definitions/**/<name>.json
  // A FlashInfer-Bench definition taken as a task (load_fib_definition): no reference solution;
  // the definition's Python reference judges, through the torch oracle.
  bool python_reference_only = false;

  const Workload* workload(const std::string& uuid) const;  // searches workloads then holdout
  // The visible workload (never the holdout) with uuid `id` or, failing that, the only one whose uuid starts with
  // `id` (the 8 characters the result tables print); kBadInput "no workload '<id>' in <root>" when none, or
  // "'<id>' is the start of <n> workloads of <root> (<up to four>); give more of it" when several.
  Result<const Workload*> visible_workload(const std::string& id) const;
  const Solution* baseline() const;  // nullptr when none
};

// A FlashInfer-Bench dataset's definition as a task: definitions/**/<name>.json, its workloads from
// workloads/**/<name>.jsonl (blob paths relative to the dataset root), the FlashInfer-Bench default
// tolerances and timing (task.toml's defaults), no baseline, no holdout, 8 evenly spaced dev
// workloads, and python_reference_only. `backend`: the candidate's (cpp -> host, cuda -> CUDA).
// Errors: kNotFound naming the definitions present when `name` is not one; kBadInput listing every
// problem of the definition or its workloads.
Result<TaskPack> load_fib_definition(const std::filesystem::path& dataset_root, const std::string& name,
                                     Backend backend);
// The definitions of a dataset (definitions/**/*.json), by name: the file each is in.
std::map<std::string, std::filesystem::path> fib_definition_files(const std::filesystem::path& dataset_root);

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
