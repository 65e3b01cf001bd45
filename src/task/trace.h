// FlashInfer-Bench Trace and Evaluation (status, environment, correctness, performance) with the status
// rules; a workload line is a Trace whose solution and evaluation are null.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "task/json_reader.h"
#include "task/workload.h"
#include "util/diagnostics.h"
#include "util/status.h"

namespace kda::task {

enum class EvalStatus {
  kPassed,
  kIncorrectShape,
  kIncorrectNumerical,
  kIncorrectDtype,
  kRuntimeError,
  kCompileError,
  kTimeout,
};
std::string_view status_name(EvalStatus s);  // "PASSED", "INCORRECT_SHAPE", ...
std::optional<EvalStatus> status_from_name(std::string_view name);

struct Environment {
  std::string hardware;
  std::map<std::string, std::string> libs;  // name -> version
  bool operator==(const Environment&) const = default;
};

struct Correctness {
  double max_relative_error = 0;  // may be NaN/inf (written as strings)
  double max_absolute_error = 0;
  nlohmann::json extra;  // evaluator-specific (e.g. matched_ratio); null when absent
  bool operator==(const Correctness&) const = default;
};

struct Performance {
  double latency_ms = 0;
  double reference_latency_ms = 0;
  double speedup_factor = 0;  // reference_latency_ms / latency_ms (not the score)
  bool operator==(const Performance&) const = default;
};

struct Evaluation {
  EvalStatus status = EvalStatus::kRuntimeError;
  Environment environment;
  std::string timestamp;  // ISO 8601
  std::string log;
  std::optional<Correctness> correctness;  // PASSED and INCORRECT_NUMERICAL only
  std::optional<Performance> performance;  // PASSED only
  nlohmann::json kda;                      // kda's own fields (baseline, quantiles, integrity, ...); null when absent
  nlohmann::json to_json() const;
  bool operator==(const Evaluation&) const = default;
};

// Checks the status rules: PASSED needs correctness and performance; INCORRECT_NUMERICAL needs correctness
// and no performance; other statuses neither.
Status check_status_rules(const Evaluation& e);

struct Trace {
  std::string definition;
  Workload workload;
  std::optional<std::string> solution;   // null for a workload line
  std::optional<Evaluation> evaluation;  // null for a workload line
  bool is_workload_only() const { return !solution && !evaluation; }
  nlohmann::json to_json() const;
  bool operator==(const Trace&) const = default;
};

std::optional<Evaluation> evaluation_from_json(const ojson& j, const std::string& file, int line,
                                               const std::string& pointer, Diagnostics& diags);
std::optional<Trace> trace_from_json(const ojson& j, const std::string& file, int line, Diagnostics& diags);

// A trace with its 1-based line in a JSONL file.
struct NumberedTrace {
  int line = 0;
  Trace trace;
};

// One Trace per non-blank line; problems carry the line number and bad lines are skipped. With
// `workloads_only`, lines must have "solution": null and "evaluation": null (workloads/*.jsonl).
std::vector<NumberedTrace> trace_lines_from_jsonl(std::string_view text, const std::string& file, Diagnostics& diags,
                                                  bool workloads_only = false);
std::vector<NumberedTrace> load_trace_lines(const std::filesystem::path& path, Diagnostics& diags,
                                            bool workloads_only = false);
std::vector<Trace> load_traces(const std::filesystem::path& path, Diagnostics& diags);

// JSONL text of traces (one compact line each, newline-terminated).
std::string traces_to_jsonl(const std::vector<Trace>& traces);

}  // namespace kda::task
