#include "loop/verdict.h"

#include <vector>

#include "util/strings.h"

namespace kda::loop {

namespace {

// Values of every line that starts with `key` (case-sensitive, e.g. "DECISION:"), trimmed.
// A line that mentions the key elsewhere is ignored: prose may quote the grammar.
std::vector<std::string> keyed_lines(std::string_view text, std::string_view key) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = util::trim_space(text.substr(pos, end - pos));
    if (line.substr(0, key.size()) == key) out.emplace_back(util::trim_space(line.substr(key.size())));
    pos = end + 1;
  }
  return out;
}

}  // namespace

// The verdict vocabularies: each name once, read and written through these tables.
constexpr std::pair<Decision, const char*> kDecisions[] = {
    {Decision::kContinue, "CONTINUE"}, {Decision::kComplete, "COMPLETE"}, {Decision::kStop, "STOP"}};
constexpr std::pair<Progress, const char*> kProgress[] = {
    {Progress::kAdvanced, "ADVANCED"}, {Progress::kStalled, "STALLED"}, {Progress::kRegressed, "REGRESSED"}};

template <class E, size_t N>
const char* name_in(const std::pair<E, const char*> (&table)[N], E e) {
  for (const auto& [value, name] : table)
    if (value == e) return name;
  return table[0].second;
}

template <class E, size_t N>
std::optional<E> value_in(const std::pair<E, const char*> (&table)[N], std::string_view name) {
  for (const auto& [value, n] : table)
    if (name == n) return value;
  return std::nullopt;
}

const char* decision_name(Decision d) { return name_in(kDecisions, d); }
const char* progress_name(Progress p) { return name_in(kProgress, p); }
std::optional<Decision> decision_from_name(std::string_view name) { return value_in(kDecisions, name); }
std::optional<Progress> progress_from_name(std::string_view name) { return value_in(kProgress, name); }

ReviewVerdict parse_review_verdict(std::string_view text) {
  ReviewVerdict v;
  const auto decisions = keyed_lines(text, "DECISION:");
  const auto progress = keyed_lines(text, "PROGRESS:");
  std::string problems;
  auto add = [&problems](const std::string& p) { problems += (problems.empty() ? "" : "; ") + p; };
  std::optional<Decision> d;
  std::optional<Progress> p;
  if (decisions.size() != 1)
    add("expected exactly one 'DECISION:' line, found " + std::to_string(decisions.size()));
  else if (!(d = decision_from_name(decisions[0])))
    add("DECISION '" + decisions[0] + "' is not CONTINUE, COMPLETE or STOP");
  if (progress.size() != 1)
    add("expected exactly one 'PROGRESS:' line, found " + std::to_string(progress.size()));
  else if (!(p = progress_from_name(progress[0])))
    add("PROGRESS '" + progress[0] + "' is not ADVANCED, STALLED or REGRESSED");
  if (!problems.empty()) {
    v.complaint = "malformed reviewer verdict (" + problems + "): counted as CONTINUE / STALLED";
    return v;
  }
  v.decision = *d;
  v.progress = *p;
  v.well_formed = true;
  return v;
}

PlanVerdict parse_plan_verdict(std::string_view text) {
  PlanVerdict v;
  const auto lines = keyed_lines(text, "PLAN:");
  if (lines.size() != 1) {
    v.complaint = "malformed plan verdict (expected exactly one 'PLAN:' line, found " + std::to_string(lines.size()) +
                  "): counted as REVISE";
    return v;
  }
  if (lines[0] != "APPROVE" && lines[0] != "REVISE") {
    v.complaint = "malformed plan verdict (PLAN '" + lines[0] + "' is not APPROVE or REVISE): counted as REVISE";
    return v;
  }
  v.approve = lines[0] == "APPROVE";
  v.well_formed = true;
  return v;
}

}  // namespace kda::loop
