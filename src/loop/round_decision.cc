#include "loop/round_decision.h"

#include <algorithm>

#include <fmt/format.h>

namespace kda::loop {

RoundDecision decide_round(const RoundEvidence& e) {
  RoundDecision d;
  d.accepted = e.verified && e.improvement && e.progress == Progress::kAdvanced;
  d.stalls = e.progress == Progress::kAdvanced ? 0 : e.stalls_before + 1;
  if (d.stalls >= 3) {
    d.next = RoundDecision::Next::kStop;
    d.stop_reason = "three stalled rounds in a row";
  } else if (e.decision == Decision::kStop) {
    d.next = RoundDecision::Next::kStop;
    d.stop_reason = "the reviewer decided STOP";
  } else if (e.decision == Decision::kComplete) {
    d.next = RoundDecision::Next::kCompletionCheck;
  }
  return d;
}

std::optional<std::string> futile_completion(bool accepted, const nlohmann::json& last_check,
                                             const IncumbentScore& incumbent, double target) {
  if (accepted) return std::nullopt;
  if (last_check.is_object() && !last_check.value("met", false) && last_check.value("incumbent", "") == incumbent.id)
    return fmt::format("the incumbent {} is unchanged since the last completion check, which failed", incumbent.id);
  const double bound = std::max(incumbent.ci_high, incumbent.speedup * (1 + incumbent.claim_tolerance));
  if (bound < target)
    return fmt::format(
        "this round was not accepted, and the incumbent {} measured {:.3f}x (at most {:.3f}x within its "
        "interval and the claim tolerance) against the target {:.3f}x",
        incumbent.id, incumbent.speedup, bound, target);
  return std::nullopt;
}

}  // namespace kda::loop
