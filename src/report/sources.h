// The JSON files a report reads, relative to its root, each parsed once; a missing or broken file is
// an error naming it (the report never shows a number it could not read).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/page.h"
#include "util/status.h"

namespace kda::report {

class Files {
 public:
  explicit Files(std::filesystem::path root) : root_(std::move(root)) {}
  const std::filesystem::path& root() const { return root_; }
  bool exists(const std::string& rel) const { return std::filesystem::exists(root_ / rel); }
  Result<const nlohmann::json*> json_file(const std::string& rel);           // a .json file
  Result<const std::vector<nlohmann::json>*> lines(const std::string& rel);  // a .jsonl file

 private:
  std::filesystem::path root_;
  std::map<std::string, nlohmann::json> json_;
  std::map<std::string, std::vector<nlohmann::json>> lines_;
};

// A number at `pointer` in `j` (nullopt when absent or not a number).
std::optional<double> number_at(const nlohmann::json& j, const std::string& pointer);

// One trace (a FlashInfer-Bench trace line with kda's fields) and where it lives.
struct TraceRef {
  const nlohmann::json* trace = nullptr;
  Source at;  // file, line, and the pointer prefix of the trace ("" for a JSONL line)
  Source field(const std::string& pointer) const { return {at.file, at.line, at.pointer + pointer}; }
};

// The per-workload section: bars (baseline, solution with its p10-p90 spread, roofline floor) and a
// table with verdicts, latencies, speedups and the fraction of the floor reached.
std::string workloads_section(const std::vector<TraceRef>& traces, const std::string& solution_name);

// "M=256 K=64 N=128" from a workload's axes.
std::string axes_label(const nlohmann::json& axes);

}  // namespace kda::report
