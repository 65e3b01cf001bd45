// The loop's states as data: the phases and steps a run can be in, their names in state.json, and the
// moves between them. drive() dispatches on the enums; every move goes through RunState::move_to, which
// refuses one the table does not list, so a new step cannot be reached by a typo or skipped by accident.
//
//   setup/measure -> plan/draft <-> plan/review -> round/writer -> round/verify -> round/review ->
//   round/decide -> round/writer (the next round) -> finalize/check -> done | round/writer (check failed)
//   any -> stopped; stopped -> the position it stopped from (new budgets, kda run --resume)
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kda::loop {

enum class Phase { kSetup, kPlan, kRound, kFinalize, kDone, kStopped };
enum class Step { kNone, kMeasure, kDraft, kReview, kWriter, kVerify, kDecide, kCheck };

std::string_view phase_name(Phase p);  // "setup", "plan", ... as in state.json
std::string_view step_name(Step s);    // "" for kNone, "measure", "draft", ...
std::optional<Phase> parse_phase(std::string_view name);
std::optional<Step> parse_step(std::string_view name);

// Where a run is: a phase and one of its steps.
struct Position {
  Phase phase = Phase::kPlan;
  Step step = Step::kDraft;
  bool operator==(const Position&) const = default;
  std::string str() const;  // "round/verify", "done/"
  // "<phase>/<step>" as str() writes it (state.json's stopped_from); nullopt when either part is unknown
  // or the step is not one of the phase's.
  static std::optional<Position> parse(std::string_view text);
};

bool is_terminal(Phase p);      // done, stopped
bool step_of(Phase p, Step s);  // the step belongs to the phase (done and stopped have only kNone)
bool may_move(Position from, Position to);

}  // namespace kda::loop
