#include "loop/round_outcome.h"

#include <fmt/format.h>

#include "loop/round_record.h"
#include "util/fs.h"

namespace kda::loop {

namespace {

using nlohmann::json;

constexpr RoundOutcome kOutcomeAccepted{"accepted",
                                        "verified, an improvement, and the reviewer advanced it: the new incumbent"};
constexpr std::pair<const char*, RoundOutcome> kRejectedBy[] = {
    {"protected_files", {"integrity", "kda's own files were changed"}},
    {"finish_round", {"no_finish", "finish_round was not called"}},
    {"diff_scope", {"out_of_scope", "files outside the solution were changed"}},
    {"solution_loads", {"bad_solution", "solution.json did not load"}},
    {"definition", {"bad_solution", "the solution names another definition"}},
    {"all_passed", {"incorrect", "not every dev workload PASSED"}},
    {"claim", {"false_claim", "a claim did not match kda's measurement (or named what kda does not measure)"}},
};
constexpr RoundOutcome kOutcomeRejected{"rejected", "rejected by kda's verifier"};  // a check not in the table
constexpr RoundOutcome kOutcomeNotImproved{
    "not_improved", "verified, but not faster than the incumbent by the required margin, beyond the noise"};
constexpr RoundOutcome kOutcomeRegressed{"regression",
                                         "verified and measured, but the reviewer judged it a regression"};
constexpr RoundOutcome kOutcomeNotAdvanced{"not_advanced", "verified and faster, but the reviewer did not advance it"};

}  // namespace

std::string round_name(int round) { return fmt::format("{:03d}", round); }
std::string candidate_id(int round) { return "c" + round_name(round); }
std::string lane_candidate_id(int round, int lane) { return candidate_id(round) + ".lane" + std::to_string(lane); }

RoundExplanation explain_round(const std::filesystem::path& run_dir, int round, const Ledger& ledger) {
  const std::filesystem::path dir = run_dir / "rounds" / round_name(round);
  const auto v = VerifyRecord::read(dir / "verify.json");
  const auto d = VerdictRecord::read(dir / "verdict.json");
  RoundExplanation e;
  if (!v.ok()) return e;
  e.measured = true;
  const Candidate* c = ledger.find(candidate_id(round));
  e.accepted = c != nullptr && c->accepted;
  e.outcome = kOutcomeNotAdvanced;
  if (e.accepted) {
    e.outcome = kOutcomeAccepted;
    if (v->repair.is_object()) e.detail = v->improvement_detail;  // accepted as a repair, not for speed
  } else if (!v->verified) {
    e.outcome = kOutcomeRejected;
    if (const VerifyCheck* failed = v->first_failed()) {
      for (const auto& [check, outcome] : kRejectedBy)
        if (failed->name == check) e.outcome = outcome;
      e.detail = failed->detail;
    }
  } else if (!v->improvement) {
    e.outcome = kOutcomeNotImproved;
    e.detail = v->improvement_detail;
  } else if (d.ok() && d->progress == Progress::kRegressed) {
    e.outcome = kOutcomeRegressed;
  }
  if (e.detail.empty())
    e.detail = fmt::format("geomean {:.3f}x against the incumbent's {:.3f}x", v->geomean, v->incumbent_speedup);
  e.geomean = v->geomean;
  if (d.ok()) {
    e.review = std::string(decision_name(d->decision)) + ", " + progress_name(d->progress);
    if (!d->well_formed) e.review += "; malformed verdict: " + d->complaint;
  }
  return e;
}

json round_table(const std::filesystem::path& run_dir, int last_round, const Ledger& ledger) {
  json rows = json::array();
  for (int r = 1; r <= last_round; ++r) {
    const RoundExplanation e = explain_round(run_dir, r, ledger);
    if (!e.measured) continue;
    rows.push_back({{"round", r},
                    {"candidate", candidate_id(r)},
                    {"accepted", e.accepted},
                    {"reason", e.outcome.code},
                    {"detail", e.detail},
                    {"geomean", e.geomean},
                    {"review", e.review}});
  }
  return rows;
}

}  // namespace kda::loop
