// What `kda serve --local DIR` serves: the definitions of a FlashInfer-Bench dataset root, or of the
// kda task packs at or under DIR, each with its visible workloads. A pack's holdout workloads are
// never listed or returned; the server evaluates them only when its operator allows it.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "task/manifest.h"
#include "util/status.h"

namespace kda::serve {

struct Entry {
  std::string name;
  nlohmann::ordered_json definition;      // the definition as FlashInfer-Bench serializes it
  std::vector<nlohmann::json> workloads;  // visible workloads: {uuid, axes, inputs}, in file order
  std::set<std::string> holdout;          // holdout uuids (kda packs only)
  // Where `kda eval` finds it: a kda pack (`--task pack_dir`), or a FlashInfer-Bench dataset's
  // definition (`--task fib_root --definition name`, judged by its Python reference).
  std::filesystem::path pack_dir;
  std::filesystem::path fib_root;
  // kda packs: the judged part of the pack's manifest (task::judged_part: no holdout.jsonl, no
  // solutions/), served at GET /definitions/{name}/manifest so that a client can check that this
  // server judges the pack it sealed. Null for a FlashInfer-Bench definition.
  nlohmann::json manifest;

  bool has_visible(const std::string& uuid) const;
};

struct Dataset {
  std::filesystem::path root;
  std::string kind;  // "packs" | "flashinfer-bench"
  std::map<std::string, Entry> entries;
  // sha256 over every definition's name, its pack manifest digest (kda packs: definition, workloads,
  // holdout, reference, baselines, task.toml) or its definition and workload files (FlashInfer-Bench):
  // servers with different ids must not share a router's work.
  std::string id;

  const Entry* find(const std::string& name) const;
  // The definition and the workload JSON of a visible workload; {nullptr, nullptr} when none.
  std::pair<const Entry*, const nlohmann::json*> find_workload(const std::string& uuid) const;
};

// Loads DIR: a FlashInfer-Bench dataset (definitions/ under it), one kda task pack, or a directory of
// packs (searched recursively). Errors: kNotFound when DIR holds none of these; kBadInput naming the
// file of every definition that does not load, or two packs that define the same name.
Result<Dataset> load_dataset(const std::filesystem::path& dir);

}  // namespace kda::serve
