// Why each round of a run ended as it did, read from the run directory's files (verify.json,
// verdict.json, the ledger). The next round's contract, `kda run`'s table of rounds and
// `kda report` all say it in this one vocabulary.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "loop/run_state.h"

namespace kda::loop {

std::string round_name(int round);                   // "007"
std::string candidate_id(int round);                 // "c007"
std::string lane_candidate_id(int round, int lane);  // "c007.lane2": a lane the round did not choose

// The fixed vocabulary of round outcomes (a code for machines, a sentence for people).
struct RoundOutcome {
  const char* code;
  const char* what;
};

struct RoundExplanation {
  bool measured = false;  // false when the round has no verify.json (not reached, or killed before)
  bool accepted = false;
  RoundOutcome outcome{"", ""};
  std::string detail;  // the first failed check's detail, or the improvement's
  std::string review;  // "DECISION, PROGRESS" (and a malformed verdict's complaint)
  double geomean = 0;
};

// Round `round` of the run in `run_dir`: the first verifier check that failed decides (in the order
// kda runs them), then the improvement, then the reviewer.
RoundExplanation explain_round(const std::filesystem::path& run_dir, int round, const Ledger& ledger);

// One row per measured round 1..last_round: round, candidate, accepted, reason (an outcome code),
// detail, geomean, review.
nlohmann::json round_table(const std::filesystem::path& run_dir, int last_round, const Ledger& ledger);

}  // namespace kda::loop
