// The reviewer's verdict grammar, parsed strictly. A review's final text must contain exactly one
// line `DECISION: CONTINUE|COMPLETE|STOP` and exactly one line `PROGRESS: ADVANCED|STALLED|REGRESSED`
// (surrounding whitespace allowed, nothing else on the line). Anything else — missing, repeated,
// misspelled, lowercase — counts as CONTINUE with progress STALLED and a recorded complaint, so
// garbage can neither end a run nor move the incumbent. A plan review ends with exactly one line
// `PLAN: APPROVE|REVISE`; anything else counts as REVISE with a complaint.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kda::loop {

enum class Decision { kContinue, kComplete, kStop };
enum class Progress { kAdvanced, kStalled, kRegressed };
const char* decision_name(Decision d);                              // "CONTINUE" | "COMPLETE" | "STOP"
const char* progress_name(Progress p);                              // "ADVANCED" | "STALLED" | "REGRESSED"
std::optional<Decision> decision_from_name(std::string_view name);  // exact, upper case
std::optional<Progress> progress_from_name(std::string_view name);

struct ReviewVerdict {
  Decision decision = Decision::kContinue;
  Progress progress = Progress::kStalled;
  bool well_formed = false;
  std::string complaint;  // why it was not well formed ("" when it was)
};
ReviewVerdict parse_review_verdict(std::string_view text);

struct PlanVerdict {
  bool approve = false;
  bool well_formed = false;
  std::string complaint;
};
PlanVerdict parse_plan_verdict(std::string_view text);

}  // namespace kda::loop
