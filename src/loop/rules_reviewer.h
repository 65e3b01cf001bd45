// `--reviewer rules`: an offline reviewer with no LLM. It judges a round only from kda's own
// evidence (rounds/NNN/verify.json and finish.json, which the loop makes readable to reviewers)
// by explicit rules, and answers in the loop's verdict grammar (loop/verdict.h), so `kda run`
// works end to end without any model. A plan is approved when it names tunables and regimes.
//
// Lives in src/loop beside the verdict grammar and the verify.json it reads: both are the loop's
// contracts, and the agent library must not know them.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/backend.h"
#include "loop/verdict.h"
#include "util/status.h"

namespace kda::loop {

// Relative geomean gain over the incumbent that counts as progress. 3 %: above the run-to-run
// noise of the host timer on the dev workloads (1-2 % between two evaluations of one solution) and
// above the loop's default --min-improvement (2 %), so ADVANCED is never called on noise and a
// round below it is a real stall.
inline constexpr double kRulesAdvanceGain = 0.03;
// Relative loss beyond which a verified round counts as REGRESSED rather than STALLED: the same
// noise margin the other way.
inline constexpr double kRulesRegressLoss = 0.03;

// The facts of one round the rules look at (from verify.json and finish.json).
struct ReviewEvidence {
  bool have_verify = false;        // verify.json was readable
  bool violation = false;          // an integrity violation (protected files changed)
  bool finished = false;           // the writer called finish_round
  bool verified = false;           // every verify check passed (no rejections)
  bool all_passed = false;         // every dev workload PASSED
  bool improvement = false;        // the loop's own improvement test (--min-improvement)
  bool repaired = false;           // an improvement as a repair of the last failed completion check
  std::string improvement_detail;  // verify.json's: why the gain does or does not count
  double geomean = 0;              // measured geomean speedup vs the baseline
  double incumbent_speedup = 0;    // the incumbent's, when the round started
  int claims_confirmed = 0, claims_false = 0, claims_unverifiable = 0;
  std::vector<std::string> rejections;
  // The writer's own account of what is left: the value of a `NEXT:` line in its summary ("" when
  // it wrote none; "none" when it has nothing left to try).
  std::string next;
};

// verify.json (required) and finish.json (may be absent) of one round.
Result<ReviewEvidence> read_round_evidence(const std::filesystem::path& round_dir);

// Which rule decided, for the review text and the tests.
enum class Rule {
  kIntegrity,   // violation -> STOP, REGRESSED
  kNoEvidence,  // verify.json unreadable or finish_round not called -> CONTINUE, REGRESSED
  kFalseClaim,  // a claim kda measured as false -> CONTINUE, REGRESSED
  kNotPassed,   // a workload not PASSED -> CONTINUE, REGRESSED
  kRejected,    // another verify check failed (diff scope, solution loads) -> CONTINUE, REGRESSED
  kRepaired,    // verified repair of the last failed completion check (kda measured it) -> COMPLETE (CONTINUE
                // while the writer names a next step), ADVANCED
  kUnclaimed,   // no claim confirmed by kda: the gain is not evidenced -> as a stall
  kAdvanced,    // verified gain >= kRulesAdvanceGain -> CONTINUE (COMPLETE when NEXT: none), ADVANCED
  kSlower,      // verified loss > kRulesRegressLoss -> as a stall, but REGRESSED
  kStalled,     // gain below the threshold -> COMPLETE (CONTINUE while the writer names a next step)
};
const char* rule_name(Rule r);

struct RulesVerdict {
  Decision decision = Decision::kContinue;
  Progress progress = Progress::kStalled;
  Rule rule = Rule::kStalled;
  std::string reason;
  // The review's final text: the reason, then the DECISION and PROGRESS lines.
  std::string text() const;
};

RulesVerdict review_round(const ReviewEvidence& e);

struct PlanCheck {
  bool approve = false;
  std::vector<std::string> missing;  // what the plan lacks ("tunables", "regimes")
  std::string text() const;          // ends with the PLAN: line
};
// Approves a plan that has a `Tunables:` line naming at least one parameter and a `Regimes:` line
// (or a table under it) naming at least one regime (case-insensitive keys at a line's start).
PlanCheck review_plan(const std::string& plan);

// The backend: plan_review reads the draft from the prompt's plan block (plan/draft_<k>.md);
// review/alignment read rounds/<NNN>/ under the session's readable paths.
std::unique_ptr<agent::Backend> make_rules_reviewer();

}  // namespace kda::loop
