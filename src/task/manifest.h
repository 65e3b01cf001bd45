// Content manifest of a directory (a task pack): sha256 of every file by sorted relative path, for sealing
// a pack and detecting changes to it.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace kda::task {

struct Manifest {
  std::map<std::string, std::string> files;  // relative generic path -> hex sha256 (symlinks: of "symlink:<target>")
  // One hash over the sorted (path, file hash) pairs.
  std::string digest() const;
  nlohmann::json to_json() const;  // {"digest", "files": {path: sha256}}
  // Parses to_json()'s form; the digest, when present, must match the files.
  static Result<Manifest> from_json(const nlohmann::json& j);
  bool operator==(const Manifest&) const = default;
};

struct ManifestDiff {
  std::vector<std::string> changed;
  std::vector<std::string> added;    // in b, not in a
  std::vector<std::string> removed;  // in a, not in b
  bool empty() const { return changed.empty() && added.empty() && removed.empty(); }
};

// Hashes every file under `dir` (symlinks are recorded, not followed).
Result<Manifest> pack_manifest(const std::filesystem::path& dir);
// The files of a pack manifest that decide a verdict where the holdout is not served: everything
// but holdout.jsonl (a run's sealed copy has none; a server never shows it) and solutions/ (starting
// points for kda tune and kda run, not part of any judgement). Two evaluators whose judged parts are
// equal judge a solution alike.
Manifest judged_part(const Manifest& m);
ManifestDiff manifest_diff(const Manifest& a, const Manifest& b);
// "changed: a, b; added: c; removed: d" (empty when no difference).
std::string describe(const ManifestDiff& d);

}  // namespace kda::task
