#include "loop/round_outcome.h"

#include <fmt/format.h>

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

json read_json_or_null(const std::filesystem::path& file) {
  auto text = fs::read_file(file);
  return text.ok() ? json::parse(*text, nullptr, false) : json();
}

}  // namespace

std::string round_name(int round) { return fmt::format("{:03d}", round); }
std::string candidate_id(int round) { return "c" + round_name(round); }
std::string lane_candidate_id(int round, int lane) { return candidate_id(round) + ".lane" + std::to_string(lane); }

RoundExplanation explain_round(const std::filesystem::path& run_dir, int round, const Ledger& ledger) {
  const std::filesystem::path dir = run_dir / "rounds" / round_name(round);
  const json v = read_json_or_null(dir / "verify.json");
  const json d = read_json_or_null(dir / "verdict.json");
  RoundExplanation e;
  if (!v.is_object()) return e;
  e.measured = true;
  const Candidate* c = ledger.find(candidate_id(round));
  e.accepted = c != nullptr && c->accepted;
  e.outcome = kOutcomeNotAdvanced;
  if (e.accepted) {
    e.outcome = kOutcomeAccepted;
  } else if (!v.value("verified", false)) {
    e.outcome = kOutcomeRejected;
    for (const auto& chk : v.value("checks", json::array())) {
      if (chk.value("passed", true)) continue;
      for (const auto& [check, outcome] : kRejectedBy)
        if (chk.value("name", "") == check) e.outcome = outcome;
      e.detail = chk.value("detail", "");
      break;
    }
  } else if (!v.value("improvement", false)) {
    e.outcome = kOutcomeNotImproved;
    e.detail = v.value("improvement_detail", "");
  } else if (d.is_object() && d.value("progress", "") == "REGRESSED") {
    e.outcome = kOutcomeRegressed;
  }
  if (e.detail.empty())
    e.detail = fmt::format("geomean {:.3f}x against the incumbent's {:.3f}x", v.value("geomean", 0.0),
                           v.value("incumbent_speedup", 0.0));
  e.geomean = v.value("geomean", 0.0);
  if (d.is_object()) {
    e.review = d.value("decision", "") + ", " + d.value("progress", "");
    if (!d.value("well_formed", true)) e.review += "; malformed verdict: " + d.value("complaint", "");
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
