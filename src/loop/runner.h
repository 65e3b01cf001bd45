// The loop's driver, Runner, shared by the files that implement it: run_loop.cc (set-up,
// persistence, agent sessions, evaluations, finalize and the state machine that drives the
// phases), plan_phases.cc (setup and the plan), round_phases.cc (one round: writer, review,
// decide) and round_verify.cc (its verify step). Internal to src/loop; the public interface is run_loop.h.
#pragma once

#include <algorithm>
#include <chrono>
#include <map>
#include <cmath>
#include <mutex>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "loop/run_loop.h"
#include "agent/workspace_tools.h"
#include "audit/audit_log.h"
#include "eval/ncu_profile.h"
#include "loop/backend_factory.h"
#include "loop/criteria.h"
#include "loop/git_workspace.h"
#include "loop/kda_tools.h"
#include "loop/round_outcome.h"
#include "loop/round_record.h"
#include "loop/knowledge_tools.h"
#include "loop/verdict.h"
#include "task/manifest.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kda::loop::detail {

namespace stdfs = std::filesystem;
using nlohmann::json;

// An evaluation as the loop records it (verify.json, the tools) and as a table for prompts.
json eval_summary(const eval::EvalReport& r);
// What the evaluated candidate's build runs (eval/code_digest.h), "" where the report has none.
std::string candidate_code_digest(const eval::EvalReport& r);
std::string eval_table(const json& summary);
// The file's text, or "" when it cannot be read.
std::string read_or_empty(const stdfs::path& p);

// Whether a verified candidate is an improvement over the incumbent, and why (verify.json).
struct Improvement {
  bool improvement = false;
  std::string detail;
  json head_to_head;  // the head-to-head's record, where one ran
  json repair;        // the repair's record, where one was tried (VerifyRecord::repair)
};
// The incumbent's last completion check, failed, with the criteria that name their failing workloads.
struct FailedCheck {
  std::vector<std::string> criteria, workloads;
};
// A candidate measured against the last failed completion check (Runner::verify_repair).
struct Repair {
  bool repaired = false;
  std::string detail;
  json record;  // criteria, workloads, repaired, detail, and the evaluation's summary where one ran
};
struct HeadToHead {
  bool faster = false;
  json record;
  std::string detail;  // appended to the improvement's
};

// A writer lane of a round with lanes (docs/run.md "Lanes"). The lanes write at the same time, so
// each has what a writer session changes of its own: a work tree (a git worktree of the run's
// repository at the incumbent), a scratch directory, kda's tools (the round's evaluation and profile
// budgets, finish_round) and a writer backend.
struct Lane {
  int k = 0;  // 1-based
  std::optional<GitWorkspace> git;
  stdfs::path scratch;
  std::unique_ptr<KdaToolHost> tools;
  std::unique_ptr<agent::Backend> backend;
  const stdfs::path& workspace() const { return git->dir(); }
};

class Runner {
 public:
  Runner(stdfs::path dir, LoopEnv env) : dir_(std::move(dir)), env_(std::move(env)) {
    if (!env_.evaluate) env_.evaluate = eval::evaluate;
    if (!env_.make_backend) env_.make_backend = make_backend;
    started_ = std::chrono::steady_clock::now();
  }
  ~Runner() {
    if (lock_fd_ >= 0) ::close(lock_fd_);
  }

  Status create(const LoopOptions& options);
  Status open_existing();
  Status extend(const BudgetChange& budgets);
  Result<RunOutcome> drive();
  Status run_step(Phase phase, Step step);  // the step drive() is at, by loop/phases.h

 private:
  // --- phases
  Status setup_measure();
  Status plan_draft();
  Status plan_review();
  Status freeze_plan();
  Status round_writer();
  Status round_verify();
  // One writer session from the incumbent into round_dir(), or into a lane's work tree and directory;
  // its commit.
  Result<std::string> writer_session(const std::string& contract, Lane* lane = nullptr);
  // The round's lanes, their writers at once; their commits in lane order.
  Result<std::vector<std::string>> lane_writers(const std::string& contract);
  // Verifies state_.candidate_commit into round_dir()/verify.json and returns that record; nullopt
  // when an integrity violation stopped the run.
  Result<std::optional<VerifyRecord>> verify_candidate();
  // With lanes: the lanes verified, the best one promoted into the round's own files (verify.json
  // gains "lane" and "lanes") and made the round's candidate.
  Status promote_best_lane(std::vector<LaneRecord> lanes);
  // the parts of round_verify (round_verify.cc), each adding its checks to the round's record
  Result<std::optional<std::string>> verify_protected(VerifyRecord& rec);
  Result<std::optional<task::Solution>> verify_scope(VerifyRecord& rec);
  Result<eval::EvalReport> verify_evaluate(const task::Solution& solution, VerifyRecord& rec);
  Status evaluate_lanes();
  Result<std::vector<ClaimRecord>> verify_claims(const FinishRound& finish, const eval::EvalReport& report,
                                                 const task::Solution& solution, VerifyRecord& rec);
  std::optional<std::string> same_code_as_incumbent(const eval::EvalReport* report) const;
  Result<Improvement> verify_improvement(const eval::EvalReport* report, bool verified,
                                         const std::optional<task::Solution>& solution);
  Result<std::optional<HeadToHead>> confirm_head_to_head(const task::Solution& candidate);
  std::optional<FailedCheck> failed_check() const;
  Result<std::optional<Repair>> verify_repair(const eval::EvalReport& dev, const task::Solution& candidate,
                                              const json& head_to_head);
  std::optional<int> completion_trials() const;  // --final-trials, else twice the round trials
  Status round_review();
  Status round_decide();
  Status finalize();
  Status stop(const std::string& reason);

  // --- helpers
  Status lock();
  Status load_runtime();
  Status save_state();
  Status log(const std::string& type, const std::string& actor, const json& data);
  void status_line(const std::string& what);
  std::optional<std::string> budget_exceeded() const;
  Result<std::unique_ptr<agent::Backend>>& backend_for(agent::Role role);
  // An agent session; a lane's writer works in the lane's work tree with its tools and backend.
  Result<agent::SessionResult> session(agent::Role role, const std::string& phase, int index, std::string prompt,
                                       Lane* lane = nullptr);
  eval::EvalOptions eval_options(const std::string& workloads, std::optional<int> trials) const;
  Result<eval::EvalReport> run_eval(const task::Solution& s, const std::string& workloads, std::optional<int> trials,
                                    const std::string& why, const task::Solution* baseline = nullptr);
  // kda's tools for a writer working in `workspace` (the run's, or lane `lane`'s work tree).
  std::unique_ptr<KdaToolHost> make_tools(int lane, const stdfs::path& workspace);
  Result<agent::ToolOutcome> tool_evaluate(int lane, const stdfs::path& workspace);
  Result<ProfileTaken> tool_profile(const ProfileRequest& req, int lane, const stdfs::path& workspace);
  json round_profiles() const;
  Result<std::vector<std::string>> protected_problems();
  Status protect(const std::string& rel);
  Status write_final_solution(const task::Solution& s);
  Status export_final(const std::optional<eval::EvalReport>& final_report);
  // The round's directory, or lane K's inside it (rounds/NNN/lanes/K); without an argument, the
  // lane a verify step is working on (lane_).
  std::string round_dir_rel(int lane) const {
    return "rounds/" + round_name(state_.round) + (lane > 0 ? "/lanes/" + std::to_string(lane) : "");
  }
  std::string round_dir_rel() const { return round_dir_rel(lane_); }
  stdfs::path round_dir(int lane) const { return dir_ / round_dir_rel(lane); }
  stdfs::path round_dir() const { return round_dir(lane_); }
  GitWorkspace workspace() const { return GitWorkspace(dir_ / "workspace", dir_ / "git"); }
  std::string contract_text() const;
  std::string previous_round_block() const;
  void set_incumbent_score(double geomean, const std::optional<eval::Interval>& ci) {
    state_.incumbent_speedup = geomean;
    state_.incumbent_ci_low = ci ? ci->low : 0;
    state_.incumbent_ci_high = ci ? ci->high : 0;
  }
  RoundExplanation explain_round(int round) const { return loop::explain_round(dir_, round, ledger_); }
  json rounds_json() const { return round_table(dir_, state_.round, ledger_); }
  std::string plan_text() const { return read_or_empty(dir_ / "plan" / "plan.md"); }
  RunOutcome outcome() const;

  stdfs::path dir_;
  LoopEnv env_;
  RunState state_;
  Ledger ledger_;
  std::optional<audit::AuditLog> audit_;
  std::optional<task::TaskPack> pack_;
  std::optional<task::Manifest> manifest_;
  Criteria criteria_;
  std::optional<Result<std::unique_ptr<agent::Backend>>> writer_, reviewer_;
  std::unique_ptr<KdaToolHost> tools_;
  std::string state_sha_;  // sha256 of the state.json we last wrote
  std::chrono::steady_clock::time_point started_;
  double elapsed_base_ = 0;
  int lock_fd_ = -1;
  // The round's lanes write at the same time: `shared_` guards what their sessions change of the run
  // (the audit log, usage, evaluator time, the status line) and `device_` makes their evaluations and
  // profiles take turns (one timing at a time on a GPU; a pool spreads each one over its devices).
  std::mutex shared_, device_;
  int lane_ = 0;  // the lane a verify step is working on (1-based), 0 outside lanes
  // The lanes' official dev evaluations taken as one batch (evaluate_lanes), by solution hash, until
  // each lane's verification takes its own.
  std::map<std::string, eval::EvalReport> lane_reports_;
  // Sets lane_ for a scope.
  struct InLane {
    InLane(int& lane, int k) : lane_(lane) { lane_ = k; }
    ~InLane() { lane_ = 0; }
    InLane(const InLane&) = delete;
    InLane& operator=(const InLane&) = delete;
    int& lane_;
  };
};

}  // namespace kda::loop::detail
