// A round's records as types: verify.json (what kda's verifier found: its checks, the writer's claims
// against the measurement, the verdict, the lanes) and verdict.json (the reviewer's decision). The verify
// step writes them and the review, the decision, the rules reviewer and the round table read them, each
// through these structs and one serialiser, so no reader spells its own keys.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/stats.h"
#include "loop/verdict.h"
#include "util/status.h"

namespace kda::loop {

// One verifier check (protected_files, finish_round, solution_loads, definition, diff_scope, eval, claim,
// error_budget, ...).
struct VerifyCheck {
  std::string name;
  bool passed = false;
  std::string detail;
};

// A writer's claim against kda's measurement. status: confirmed | false | invalid | unverifiable.
struct ClaimRecord {
  std::string metric;  // geomean_speedup | speedup | latency_ms
  double claimed = 0;
  std::string workload;  // "" for the geomean
  std::string status;
  std::string detail;
  std::optional<double> measured, remeasured;
  std::optional<eval::Interval> accepted_range, measured_ci95;
  bool conservative = false;  // confirmed, and below what kda measured (for a speedup)
};

// One writer lane of a round with lanes.
struct LaneRecord {
  int lane = 0;
  std::string commit;
  bool verified = false, improvement = false;
  std::string improvement_detail;
  double geomean = 0;
  std::vector<std::string> rejections;
  std::string summary;  // the lane writer's finish_round summary
  bool chosen = false;
};

struct VerifyRecord {
  std::vector<VerifyCheck> checks;
  std::vector<ClaimRecord> claims;
  bool verified = false;     // every check passed
  bool improvement = false;  // better than the incumbent, confirmed
  std::string improvement_detail;
  double incumbent_speedup = 0;
  double geomean = 0;                   // the candidate's dev geomean speedup (0 when not evaluated)
  nlohmann::json eval;                  // the official evaluation's summary (runner.h eval_summary), null when none ran
  std::vector<std::string> rejections;  // "check: detail" of each failed check
  nlohmann::json profiles;              // the round's ncu profiles
  std::optional<eval::Interval> geomean_ci95, incumbent_ci95;
  nlohmann::json head_to_head;           // the confirmation of an improvement (object), null when none
  nlohmann::json repair;                 // the repair of a failed completion check (object), null when none tried
  std::optional<std::string> violation;  // a protected file changed: the round stopped the run
  int lane = 0;                          // the chosen lane (0: the round had one writer)
  std::vector<LaneRecord> lanes;

  void add_check(const std::string& name, bool passed, const std::string& detail);
  bool finished() const;    // the writer called finish_round
  bool all_passed() const;  // the evaluation passed every workload
  const VerifyCheck* first_failed() const;

  nlohmann::json to_json() const;
  static Result<VerifyRecord> from_json(const nlohmann::json& j);  // an object; absent fields default
  static Result<VerifyRecord> read(const std::filesystem::path& file);
};

// verdict.json: the reviewer's verdict on the round.
struct VerdictRecord {
  Decision decision = Decision::kContinue;
  Progress progress = Progress::kStalled;
  bool well_formed = false;
  std::string complaint;
  bool alignment = false;  // an alignment review (the whole trajectory)

  nlohmann::json to_json() const;
  static Result<VerdictRecord> from_json(const nlohmann::json& j);  // unknown names: CONTINUE / STALLED
  static Result<VerdictRecord> read(const std::filesystem::path& file);
};

}  // namespace kda::loop
