#include "loop/rules_reviewer.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "loop/round_record.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kda::loop {

namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

// The value of the last line starting with `key` (case-insensitive), "" when none.
std::string keyed_value(const std::string& text, const std::string& key) {
  std::string value;
  for (const auto& raw : lines_of(text)) {
    std::string line = util::trimmed(raw);
    // Markdown list items and emphasis around the key are allowed ("- **Tunables:** ...").
    while (!line.empty() && (line[0] == '-' || line[0] == '*' || line[0] == '#' || line[0] == ' ')) line.erase(0, 1);
    if (lower(line.substr(0, key.size())) != lower(key)) continue;
    std::string rest = line.substr(key.size());
    while (!rest.empty() && rest[0] == '*') rest.erase(0, 1);
    value = util::trimmed(rest);
  }
  return value;
}

bool has_key_line(const std::string& text, const std::string& key) {
  for (const auto& raw : lines_of(text)) {
    std::string line = util::trimmed(raw);
    while (!line.empty() && (line[0] == '-' || line[0] == '*' || line[0] == '#' || line[0] == ' ')) line.erase(0, 1);
    if (lower(line.substr(0, key.size())) == lower(key)) return true;
  }
  return false;
}

// Non-empty lines right under a `key` line (a table or list), up to a blank line.
int lines_under(const std::string& text, const std::string& key) {
  auto ls = lines_of(text);
  for (size_t i = 0; i < ls.size(); ++i) {
    std::string line = util::trimmed(ls[i]);
    while (!line.empty() && (line[0] == '-' || line[0] == '*' || line[0] == '#' || line[0] == ' ')) line.erase(0, 1);
    if (lower(line.substr(0, key.size())) != lower(key)) continue;
    int n = 0;
    for (size_t j = i + 1; j < ls.size() && !util::trimmed(ls[j]).empty(); ++j) ++n;
    return n;
  }
  return 0;
}

const stdfs::path* readable_named(const agent::SessionRequest& req, const std::string& name) {
  for (const auto& p : req.readable)
    if (p.filename() == name) return &p;
  return nullptr;
}

class RulesReviewer final : public agent::Backend {
 public:
  std::string name() const override { return "rules"; }

  Result<agent::SessionResult> run_session(const agent::SessionRequest& req) override {
    if (req.role != agent::Role::kReviewer)
      return Status::bad_input("the rules backend only reviews (use it as --reviewer, not --writer)");
    agent::SessionResult result;
    auto emit = [&](agent::AgentEvent e) {
      if (req.on_event) req.on_event(e);
      result.events.push_back(std::move(e));
    };
    if (req.phase == "plan_review") {
      std::string draft;
      if (const auto* plan = readable_named(req, "plan")) {
        const stdfs::path file = *plan / fmt::format("draft_{}.md", req.index);
        if (auto t = fs::read_file(file); t.ok()) {
          draft = *t;
          emit({"tool_call", true, {{"name", "read_file"}, {"arguments", {{"path", file.string()}}}}});
        }
      }
      if (draft.empty()) {  // the plan block of the loop's prompt
        const std::string open = "--- plan draft ---\n", close = "\n--- end ---";
        const size_t a = req.prompt.find(open);
        const size_t b = a == std::string::npos ? a : req.prompt.find(close, a + open.size());
        if (b != std::string::npos) draft = req.prompt.substr(a + open.size(), b - a - open.size());
      }
      result.final_text = review_plan(draft).text();
    } else if (req.phase == "review" || req.phase == "alignment") {
      const auto* rounds = readable_named(req, "rounds");
      ReviewEvidence e;
      if (rounds != nullptr) {
        const stdfs::path dir = *rounds / fmt::format("{:03d}", req.index);
        auto r = read_round_evidence(dir);
        emit({"tool_call",
              r.ok(),
              {{"name", "read_file"},
               {"arguments", {{"path", (dir / "verify.json").string()}}},
               {"result", r.ok() ? "read" : r.status().message()}}});
        if (r.ok()) e = *r;
      }
      result.final_text = review_round(e).text();
    } else {
      return Status::bad_input("rules reviewer: unknown session phase '" + req.phase + "'");
    }
    result.turns = 1;
    emit({"message", true, {{"text", result.final_text.substr(0, 2000)}}});
    return result;
  }
};

}  // namespace

const char* rule_name(Rule r) {
  switch (r) {
    case Rule::kIntegrity: return "integrity";
    case Rule::kNoEvidence: return "no_evidence";
    case Rule::kFalseClaim: return "false_claim";
    case Rule::kNotPassed: return "not_passed";
    case Rule::kRejected: return "rejected";
    case Rule::kUnclaimed: return "unclaimed";
    case Rule::kRepaired: return "repaired";
    case Rule::kAdvanced: return "advanced";
    case Rule::kSlower: return "slower";
    case Rule::kStalled: return "stalled";
  }
  return "stalled";
}

Result<ReviewEvidence> read_round_evidence(const stdfs::path& round_dir) {
  ReviewEvidence e;
  KDA_ASSIGN_OR_RETURN(VerifyRecord v, VerifyRecord::read(round_dir / "verify.json"));
  e.have_verify = true;
  e.violation = v.violation.has_value();
  e.verified = v.verified;
  e.improvement = v.improvement;
  e.repaired = v.improvement && v.repair.is_object() && v.repair.value("repaired", false);
  e.improvement_detail = v.improvement_detail;
  e.geomean = v.geomean;
  e.incumbent_speedup = v.incumbent_speedup;
  e.all_passed = v.all_passed();
  e.finished = v.finished();
  for (const auto& c : v.checks)
    if (c.name == "protected_files" && !c.passed) e.violation = true;
  for (const auto& c : v.claims) {
    e.claims_confirmed += c.status == "confirmed";
    e.claims_false += c.status == "false" || c.status == "invalid";  // invalid: names what kda does not measure
    e.claims_unverifiable += c.status == "unverifiable";
  }
  e.rejections = v.rejections;
  if (auto f = fs::read_file(round_dir / "finish.json"); f.ok()) {
    json fj = json::parse(*f, nullptr, false);
    if (fj.is_object() && fj.contains("summary") && fj["summary"].is_string())
      e.next = lower(keyed_value(fj["summary"].get<std::string>(), "NEXT:"));
  }
  return e;
}

RulesVerdict review_round(const ReviewEvidence& e) {
  RulesVerdict v;
  auto set = [&v](Decision d, Progress p, Rule r, std::string why) {
    v.decision = d;
    v.progress = p;
    v.rule = r;
    v.reason = std::move(why);
    return v;
  };
  std::string rejected;
  for (const auto& r : e.rejections) rejected += (rejected.empty() ? "" : "; ") + r;
  // A writer that names a next step gets another round after a stall (the loop itself stops after
  // three non-advancing rounds); one that says "none" or names nothing is done.
  const bool more = !e.next.empty() && e.next != "none";
  const Decision on_stall = more ? Decision::kContinue : Decision::kComplete;
  const std::string stall_tail = more ? " The writer names a next step (" + e.next + "): one more round."
                                      : " No next step named: complete with the incumbent.";

  if (e.violation)
    return set(
        Decision::kStop, Progress::kRegressed, Rule::kIntegrity,
        "Integrity violation recorded by the verifier: " + (rejected.empty() ? "protected files changed" : rejected));
  if (!e.have_verify || !e.finished)
    return set(Decision::kContinue, Progress::kRegressed, Rule::kNoEvidence,
               !e.have_verify ? "No verify.json for this round: nothing measured to judge."
                              : "The writer did not call finish_round: the round has no claims to check.");
  if (e.claims_false > 0)
    return set(Decision::kContinue, Progress::kRegressed, Rule::kFalseClaim,
               fmt::format("{} claim(s) did not match kda's measurement (beyond the claim tolerance): {}",
                           e.claims_false, rejected));
  if (!e.all_passed)
    return set(Decision::kContinue, Progress::kRegressed, Rule::kNotPassed,
               "Not every dev workload PASSED in kda's evaluation: " + rejected);
  if (!e.verified)
    return set(Decision::kContinue, Progress::kRegressed, Rule::kRejected,
               "The verifier rejected the round: " + rejected);
  // A repair is kda's own measurement (the failing workloads evaluated anew), not a claim to confirm; what
  // it is for is the completion check, so it completes unless the writer names more to do.
  if (e.repaired)
    return set(more ? Decision::kContinue : Decision::kComplete, Progress::kAdvanced, Rule::kRepaired,
               "Repairs the last completion check: " + e.improvement_detail + "." +
                   (more ? " The writer names a next step (" + e.next + "): one more round." : ""));
  const double gain = e.incumbent_speedup > 0 ? e.geomean / e.incumbent_speedup - 1 : 0;
  const std::string measured = fmt::format("kda measured {:.3f}x vs the baseline, incumbent {:.3f}x ({:+.1f}%)",
                                           e.geomean, e.incumbent_speedup, gain * 100);
  if (e.claims_confirmed == 0)
    return set(on_stall, Progress::kStalled, Rule::kUnclaimed,
               "No claim was confirmed by kda's measurement, so no gain is evidenced; " + measured + "." + stall_tail);
  if (gain >= kRulesAdvanceGain && e.improvement)
    return set(more || e.next.empty() ? Decision::kContinue : Decision::kComplete, Progress::kAdvanced, Rule::kAdvanced,
               fmt::format("Verified gain: {}, at least the {:.0f}% threshold; claims confirmed: {}.{}", measured,
                           kRulesAdvanceGain * 100, e.claims_confirmed,
                           !more && !e.next.empty() ? " The writer has nothing left: complete." : ""));
  if (gain >= kRulesAdvanceGain)  // and the verifier did not count it
    return set(on_stall, Progress::kStalled, Rule::kStalled,
               fmt::format("Gain within the measurement's noise: {}; {}.{}", measured,
                           e.improvement_detail.empty() ? "the verifier did not count it as an improvement"
                                                        : e.improvement_detail,
                           stall_tail));
  if (gain < -kRulesRegressLoss)
    return set(on_stall, Progress::kRegressed, Rule::kSlower,
               fmt::format("Slower than the incumbent: {}.{}", measured, stall_tail));
  return set(on_stall, Progress::kStalled, Rule::kStalled,
             fmt::format("Gain below the {:.0f}% threshold: {}.{}", kRulesAdvanceGain * 100, measured, stall_tail));
}

std::string RulesVerdict::text() const {
  return fmt::format("Rules reviewer, rule '{}': {}\n\nDECISION: {}\nPROGRESS: {}\n", rule_name(rule), reason,
                     decision_name(decision), progress_name(progress));
}

PlanCheck review_plan(const std::string& plan) {
  PlanCheck c;
  if (keyed_value(plan, "Tunables:").empty()) c.missing.push_back("tunables");
  if (keyed_value(plan, "Regimes:").empty() && !(has_key_line(plan, "Regimes:") && lines_under(plan, "Regimes:") > 0))
    c.missing.push_back("regimes");
  c.approve = c.missing.empty();
  return c;
}

std::string PlanCheck::text() const {
  if (approve) return "Rules reviewer: the plan names the tunables and the regimes it will tune.\n\nPLAN: APPROVE\n";
  std::string what;
  for (const auto& m : missing) what += (what.empty() ? "" : " and ") + m;
  return "Rules reviewer: the plan must name the " + what +
         " (a 'Tunables:' line listing the parameters, a 'Regimes:' line or table listing the shape groups).\n\n"
         "PLAN: REVISE\n";
}

std::unique_ptr<agent::Backend> make_rules_reviewer() { return std::make_unique<RulesReviewer>(); }

}  // namespace kda::loop
