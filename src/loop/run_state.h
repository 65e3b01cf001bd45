// kda-owned state of a run (state.json) and its ledger (ledger.json): everything `kda run --resume`
// needs to continue after a kill -9. Both are written atomically (temp file + fsync + rename) after
// every transition; the agents never get write access to either.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/backend.h"
#include "loop/phases.h"
#include "util/status.h"

namespace kda::loop {

inline constexpr int kMaxLanes = 8;          // --lanes: at most this many writer lanes per round
inline constexpr int kMaxConfirmFactor = 2;  // head-to-heads: at most this times --confirm-pairs

// What `kda run` was asked for; persisted in state.json so a resumed run behaves the same.
struct LoopOptions {
  std::filesystem::path task;  // the pack it was started from (copied and sealed into <run>/task)
  std::string writer;          // backend spec, e.g. "scripted:writer.json", "anthropic:claude-..."
  std::string reviewer;
  std::string target = "1.0";   // --target: "1.5x" or "1.5x,M>=128:2x"
  std::filesystem::path start;  // starting solution; empty: the pack's baseline
  int max_rounds = 10;
  double hours = 0;                                              // wall-clock budget; 0: none
  int64_t budget_tokens = 0;                                     // input + output tokens; 0: none
  double budget_usd = 0;                                         // 0: none
  double gpu_minutes = 0;                                        // evaluator time (all evaluations); 0: none
  std::optional<int> eval_trials, eval_iterations, eval_warmup;  // overrides for every evaluation
  std::optional<int> final_trials;  // trials of the completion check; default 2x the round trials
  int plan_reviews = 2;             // bounded plan-review rounds
  int alignment_every = 0;          // a full alignment review every K rounds; 0: never
  // A claim is confirmed inside the measurement's 95 % interval over trials, widened to at least
  // +-claim_tolerance (relative) around the measured value.
  double claim_tolerance = 0.25;
  // An improvement counts when the geomean gains at least min_improvement over the incumbent's and,
  // where both have intervals, holds head-to-head against the incumbent over this many evaluations
  // in fresh processes (the 95 % interval over them above 1; up to kMaxConfirmFactor times as many
  // while every one is faster and the interval still reaches 1).
  double min_improvement = 0.02;
  int confirm_pairs = 3;
  int max_evals_per_round = 8;  // writer's `evaluate` tool calls per round
  // Writer lanes per round (docs/run.md "Lanes"): each lane is a writer session from the same
  // incumbent, verified by the official evaluator on its own; the best verified lane is the round's
  // candidate, the others stay in the ledger. 1: one writer, as without lanes.
  int lanes = 1;
  // Writer's `profile` tool calls per round; 0 (the default): not offered, because the runner under
  // ncu cannot be sandboxed, so profiled code runs with the user's rights (opt in with --max-profiles).
  int max_profiles_per_round = 0;
  bool sandbox = true;  // evaluator sandbox (Landlock + seccomp)
  std::string cuda_arch = "90a";
  nlohmann::json to_json() const;
  static Result<LoopOptions> from_json(const nlohmann::json& j);
};

struct RunState {
  int version = 1;
  LoopOptions options;
  // Where the run is (loop/phases.h has the moves); state.json keeps the names.
  Phase phase = Phase::kPlan;
  Step step = Step::kDraft;
  int plan_draft = 1;
  int round = 1;
  std::string candidate_commit;           // the writer's commit of the current round (set after "writer")
  std::vector<std::string> lane_commits;  // with lanes: each lane's commit, lane 1 first (set after "writer")
  std::string incumbent_id = "c000";
  std::string incumbent_commit;
  double incumbent_speedup = 0;                        // geomean vs the baseline, as verified
  double incumbent_ci_low = 0, incumbent_ci_high = 0;  // its 95 % interval over trials (0, 0: none)
  std::string baseline_commit;
  std::string task_digest;                             // manifest digest of <run>/task when sealed
  std::string plan_digest;                             // manifest digest of <run>/plan when frozen ("" before)
  std::map<std::string, std::string> protected_files;  // run-relative path -> sha256 (verdicts, ledger)
  int stalls = 0;                                      // consecutive rounds the reviewer did not call ADVANCED
  agent::Usage usage;
  double elapsed_s = 0;  // wall time across resumes
  double eval_s = 0;     // evaluator wall time (the --gpu-minutes budget)
  int finalize_attempts = 0;
  std::string note;  // carried into the next round contract (e.g. why COMPLETE failed)
  std::string stop_reason;
  std::string stopped_from;  // "<phase>/<step>" the run stopped in (where new budgets resume it)
  Position at() const { return {phase, step}; }
  // The move to (p, s), refused (internal error naming both) where loop/phases.h does not list it.
  Status move_to(Phase p, Step s);
  std::vector<std::string> complaints;
  std::string audit_head;  // audit log head when this state was written
  uint64_t audit_records = 0;
  nlohmann::json to_json() const;
  static Result<RunState> from_json(const nlohmann::json& j);
};

struct Candidate {
  std::string id;      // "c000" (the starting solution), "c003" (round 3's candidate)
  std::string parent;  // the incumbent the round started from ("" for c000)
  int round = 0;
  std::string commit;  // workspace commit
  std::string solution_hash;
  nlohmann::json eval = nlohmann::json::object();      // summary: all_passed, geomean, per-workload
  nlohmann::json verdicts = nlohmann::json::object();  // {"verify": {...}, "review": {...}}
  bool accepted = false;
  std::string notes;
};

struct Ledger {
  std::string incumbent = "c000";
  std::vector<Candidate> candidates;
  void upsert(Candidate c);  // replaces the candidate with the same id (idempotent rounds)
  const Candidate* find(const std::string& id) const;
  nlohmann::json to_json() const;
  static Result<Ledger> from_json(const nlohmann::json& j);
};

Result<RunState> load_state(const std::filesystem::path& file);

// The first of the run's budgets (--hours, --budget-tokens, --budget-usd, --gpu-minutes) that is used
// up, saying which and how much, or nullopt. `elapsed_s` is the run's wall time by the caller's clock
// (the Runner's: time before a resume plus this process's), so the rule has no clock of its own.
std::optional<std::string> exceeded_budget(const RunState& state, double elapsed_s);
Result<Ledger> load_ledger(const std::filesystem::path& file);
// Atomic write of pretty JSON; returns the sha256 of the bytes written.
Result<std::string> save_json(const std::filesystem::path& file, const nlohmann::json& j);

}  // namespace kda::loop
