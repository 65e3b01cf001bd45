// `kda task validate`: checks FlashInfer-Bench datasets, kda task packs and single files, collecting every
// problem (file, JSONL line, JSON pointer) rather than stopping at the first.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/diagnostics.h"

namespace kda::task {

enum class PathKind {
  kDataset,      // definitions/ workloads/ solutions/ traces/ blob/
  kTaskPack,     // definition.json + workloads.jsonl + reference/ ...
  kSolutionDir,  // solution.json + sources
  kDefinition,
  kSolution,
  kWorkloads,  // JSONL of workload-only traces
  kTraces,     // JSONL of traces
  kSettings,   // task.toml
  kUnknown,
};
std::string_view path_kind_name(PathKind k);

// Detected from the location (directory layout, file name, extension) and, for JSON/JSONL, the content.
PathKind detect_path_kind(const std::filesystem::path& path);

struct ValidationCounts {
  int definitions = 0;
  int workloads = 0;
  int solutions = 0;
  int traces = 0;
  int packs = 0;
  int blobs = 0;  // safetensors inputs checked
  int settings = 0;
  nlohmann::json to_json() const;
};

struct ValidationReport {
  Diagnostics problems;
  // Valid FlashInfer-Bench that this kda cannot evaluate (a solution's language or binding); they do
  // not make the report invalid.
  Diagnostics warnings;
  ValidationCounts counts;
  bool valid() const { return problems.empty(); }
  nlohmann::json to_json() const;  // {valid, problems:[{file,line,pointer,message}], warnings:[...], counts}
};

struct ValidationOptions {
  // Schemas and cross-references only: safetensors inputs are not opened (a dataset without its blobs).
  bool schema_only = false;
  // The input generators this kda has, and each one's stresses: a pack's [inputs] generator and stress
  // are checked against it (nullopt: no such generator). Empty: not checked (the task module knows no
  // generators; `kda task validate` passes the contest module's registries).
  std::function<std::optional<std::vector<std::string>>(std::string_view generator)> generator_stresses;
};

// Validates each path (dataset directory, task pack, solution directory, or a single file). Single
// workload/trace/solution files are also checked against the definitions of the pack or dataset they sit in.
ValidationReport validate_paths(const std::vector<std::filesystem::path>& paths, const ValidationOptions& options = {});

}  // namespace kda::task
