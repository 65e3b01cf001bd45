// What a round's evidence decides, as pure functions: Runner::round_decide reads verify.json, verdict.json
// and the last completion check, calls these, and carries out the result (ledger, workspace, state).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "loop/verdict.h"

namespace kda::loop {

struct RoundEvidence {
  bool verified = false;                    // verify.json: every verifier check passed
  bool improvement = false;                 // verify.json: better than the incumbent, and confirmed
  Decision decision = Decision::kContinue;  // the reviewer's
  Progress progress = Progress::kStalled;   // the reviewer's
  int stalls_before = 0;                    // consecutive rounds without ADVANCED before this one
};

struct RoundDecision {
  enum class Next { kNextRound, kCompletionCheck, kStop };
  bool accepted = false;  // the candidate becomes the incumbent
  int stalls = 0;         // consecutive rounds without ADVANCED, this one included
  Next next = Next::kNextRound;
  std::string stop_reason;  // kStop only
};

// Accepted when verified, improved and ADVANCED; three stalled rounds in a row stop the run before the
// reviewer's STOP does; COMPLETE asks for the completion check.
RoundDecision decide_round(const RoundEvidence& e);

// What the completion check would be judged on.
struct IncumbentScore {
  std::string id;
  double speedup = 0;          // geomean vs the baseline, as verified
  double ci_high = 0;          // top of its 95 % interval (0: none)
  double claim_tolerance = 0;  // relative widening of the interval (LoopOptions::claim_tolerance)
};

// Why a completion check after a round that was not accepted could not pass, or nullopt (run it): the
// incumbent is the one the last failed check (`last_check`, final/check.json; null when none) measured,
// or its geomean, widened by its interval and the claim tolerance, is below `target`.
std::optional<std::string> futile_completion(bool accepted, const nlohmann::json& last_check,
                                             const IncumbentScore& incumbent, double target);

}  // namespace kda::loop
