#include "loop/phases.h"

#include <array>

namespace kda::loop {
namespace {

struct PhaseRow {
  Phase phase;
  std::string_view name;
  std::array<Step, 4> steps;  // the phase's steps; kNone pads (and is the only step of a terminal phase)
};

constexpr std::array<PhaseRow, 6> kPhases = {{
    {Phase::kSetup, "setup", {Step::kMeasure, Step::kNone, Step::kNone, Step::kNone}},
    {Phase::kPlan, "plan", {Step::kDraft, Step::kReview, Step::kNone, Step::kNone}},
    {Phase::kRound, "round", {Step::kWriter, Step::kVerify, Step::kReview, Step::kDecide}},
    {Phase::kFinalize, "finalize", {Step::kCheck, Step::kNone, Step::kNone, Step::kNone}},
    {Phase::kDone, "done", {Step::kNone, Step::kNone, Step::kNone, Step::kNone}},
    {Phase::kStopped, "stopped", {Step::kNone, Step::kNone, Step::kNone, Step::kNone}},
}};

constexpr std::array<std::pair<Step, std::string_view>, 8> kSteps = {{
    {Step::kNone, ""},
    {Step::kMeasure, "measure"},
    {Step::kDraft, "draft"},
    {Step::kReview, "review"},
    {Step::kWriter, "writer"},
    {Step::kVerify, "verify"},
    {Step::kDecide, "decide"},
    {Step::kCheck, "check"},
}};

struct Move {
  Position from, to;
};

// Every move the loop makes, besides "anything -> stopped" and "stopped -> where it stopped from".
constexpr std::array<Move, 11> kMoves = {{
    {{Phase::kSetup, Step::kMeasure}, {Phase::kPlan, Step::kDraft}},     // baseline measured
    {{Phase::kPlan, Step::kDraft}, {Phase::kPlan, Step::kReview}},       // draft written
    {{Phase::kPlan, Step::kReview}, {Phase::kPlan, Step::kDraft}},       // not approved: redraft
    {{Phase::kPlan, Step::kReview}, {Phase::kRound, Step::kWriter}},     // frozen
    {{Phase::kRound, Step::kWriter}, {Phase::kRound, Step::kVerify}},    // candidate committed
    {{Phase::kRound, Step::kVerify}, {Phase::kRound, Step::kReview}},    // verified
    {{Phase::kRound, Step::kReview}, {Phase::kRound, Step::kDecide}},    // reviewed
    {{Phase::kRound, Step::kDecide}, {Phase::kRound, Step::kWriter}},    // the next round
    {{Phase::kRound, Step::kWriter}, {Phase::kFinalize, Step::kCheck}},  // decided COMPLETE
    {{Phase::kFinalize, Step::kCheck}, {Phase::kDone, Step::kNone}},     // criteria met
    {{Phase::kFinalize, Step::kCheck}, {Phase::kRound, Step::kWriter}},  // check failed: more rounds
}};

const PhaseRow& row(Phase p) { return kPhases[static_cast<size_t>(p)]; }

}  // namespace

std::string_view phase_name(Phase p) { return row(p).name; }

std::string_view step_name(Step s) { return kSteps[static_cast<size_t>(s)].second; }

std::optional<Phase> parse_phase(std::string_view name) {
  for (const auto& r : kPhases)
    if (r.name == name) return r.phase;
  return std::nullopt;
}

std::optional<Step> parse_step(std::string_view name) {
  for (const auto& [s, n] : kSteps)
    if (n == name) return s;
  return std::nullopt;
}

bool is_terminal(Phase p) { return p == Phase::kDone || p == Phase::kStopped; }

bool step_of(Phase p, Step s) {
  if (s == Step::kNone) return is_terminal(p);
  for (Step x : row(p).steps)
    if (x == s) return true;
  return false;
}

std::string Position::str() const { return std::string(phase_name(phase)) + "/" + std::string(step_name(step)); }

std::optional<Position> Position::parse(std::string_view text) {
  const auto slash = text.find('/');
  const auto p = parse_phase(text.substr(0, slash));
  const auto s = parse_step(slash == std::string_view::npos ? "" : text.substr(slash + 1));
  if (!p || !s || !step_of(*p, *s)) return std::nullopt;
  return Position{*p, *s};
}

bool may_move(Position from, Position to) {
  if (!step_of(from.phase, from.step) || !step_of(to.phase, to.step)) return false;
  if (to.phase == Phase::kStopped) return from.phase != Phase::kStopped && from.phase != Phase::kDone;
  if (from.phase == Phase::kStopped) return !is_terminal(to.phase);
  for (const auto& m : kMoves)
    if (m.from == from && m.to == to) return true;
  return false;
}

}  // namespace kda::loop
