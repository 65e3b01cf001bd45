// The loop's state machine end to end with scripted agents and a fake evaluator, so every path runs
// fast: the full scenario, false claims, garbage verdicts, stalls, budgets, protected files, diff
// scope, failed completion checks, bad inputs.
#include "loop/rules_reviewer.h"
#include "loop/round_outcome.h"
#include "loop/run_loop_fixture.h"
#include "task/task_pack.h"

#include <functional>

#include <fmt/format.h>
#include <sstream>

namespace kda::loop::testing_fixture {
namespace {

TEST_F(RunLoopTest, FullScenario) {
  add_full_scenario(sessions_);
  auto o = start_run(run_, options(), env());
  ASSERT_TRUE(o.ok()) << o.status().message();
  expect_full_scenario_result(run_, *o);
  EXPECT_EQ(fake_.workload_sets.back(), "all");
  EXPECT_TRUE(stdfs::exists(run_ / "task/definition.json"));
  EXPECT_FALSE(stdfs::exists(run_ / "task/holdout.jsonl"));  // never in the run directory
  EXPECT_FALSE(status_lines_.empty());
  EXPECT_NE(status_lines_.back().find("incumbent c004"), std::string::npos) << status_lines_.back();
  // Resuming a finished run changes nothing.
  auto again = resume_run(run_, env());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->phase, "done");
}

// Any alteration of the audit log found on resume stops the run as an integrity violation: the
// altered log kept as evidence, a new chain that records the violation and verifies, and the last
// verified incumbent exported. A torn last line (an append cut short by a kill) is not one.
TEST_F(RunLoopTest, AnAlteredAuditLogStopsTheResumedRun) {
  struct Case {
    const char* name;
    std::function<void(std::vector<std::string>&, const std::string& head)> alter;  // head: state.json's
  };
  const Case cases[] = {
      {"one digit of a record edited",
       [](std::vector<std::string>& l, const std::string&) {
         std::string& rec = l[l.size() / 2];
         const size_t at = rec.find_first_of("0123456789", rec.find("\"seq\""));
         rec[at] = rec[at] == '9' ? '8' : static_cast<char>(rec[at] + 1);
       }},
      {"a record deleted",
       [](std::vector<std::string>& l, const std::string&) { l.erase(l.begin() + static_cast<long>(l.size() / 2)); }},
      {"two records swapped",
       [](std::vector<std::string>& l, const std::string&) { std::swap(l[l.size() / 2], l[l.size() / 2 + 1]); }},
      {"the records from the state's head on cut off",
       [](std::vector<std::string>& l, const std::string& head) {
         auto at =
             std::find_if(l.begin(), l.end(), [&](const std::string& r) { return r.find(head) != std::string::npos; });
         ASSERT_NE(at, l.end());
         l.erase(at, l.end());
       }},
      {"the log deleted", nullptr},
      {"a torn last line (not a violation)",
       [](std::vector<std::string>& l, const std::string&) { l.back() = l.back().substr(0, 20); }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    start_over();
    sessions_.clear();
    add_full_scenario(sessions_);
    fail_session_at_ = 7;  // round 2's writer: round 1 (c001, 2x) is the verified incumbent
    ASSERT_FALSE(start_run(run_, options(), env()).ok());
    fail_session_at_ = -1;
    const stdfs::path log = run_ / "audit.jsonl";
    const bool torn = std::string(c.name).find("torn") != std::string::npos;
    if (c.alter) {
      std::vector<std::string> lines;
      std::istringstream in(*fs::read_file(log));
      for (std::string line; std::getline(in, line);) lines.push_back(line);
      ASSERT_GT(lines.size(), 8u);
      c.alter(lines, "\"hash\":\"" + load_state(run_ / "state.json")->audit_head + "\"");
      std::string text;
      for (size_t i = 0; i < lines.size(); ++i) text += lines[i] + (torn && i + 1 == lines.size() ? "" : "\n");
      ASSERT_TRUE(fs::write_file_atomic(log, text).ok());
    } else {
      stdfs::remove(log);
    }
    auto o = resume_run(run_, env());
    ASSERT_TRUE(o.ok()) << o.status().message();
    auto v = audit::verify(log);
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->ok()) << "the new chain must verify";
    if (torn) {
      expect_full_scenario_result(run_, *o);
      EXPECT_FALSE(stdfs::exists(run_ / "audit.altered.jsonl"));
      continue;
    }
    EXPECT_EQ(o->phase, "stopped");
    EXPECT_NE(o->stop_reason.find("integrity violation: the audit log was altered"), std::string::npos)
        << o->stop_reason;
    EXPECT_EQ(o->incumbent, "c001");
    auto sol = final_sources(run_);
    ASSERT_TRUE(sol.ok());
    EXPECT_NE(sol->find("fake-speedup: 2.0"), std::string::npos);
    EXPECT_EQ(stdfs::exists(run_ / "audit.altered.jsonl"), c.alter != nullptr);
    auto text = fs::read_file(log);
    ASSERT_TRUE(text.ok());
    EXPECT_NE(text->find("\"violation\""), std::string::npos);
    EXPECT_EQ(load_state(run_ / "state.json")->phase, Phase::kStopped);
    // New budgets do not reopen a run stopped for an integrity violation.
    auto again = resume_run(run_, env(), BudgetChange{.max_rounds = 9});
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.status().kind(), ErrorKind::kBadInput);
  }
}

// A claim that names an unknown metric or a workload the round was not measured on rejects the
// round (it used to be "unverifiable" and let the round through).
TEST_F(RunLoopTest, ClaimsOnUnknownMetricsOrWorkloadsRejectTheRound) {
  for (const json& claim : {json{{"metric", "throughput"}, {"value", 3.0}},
                            json{{"metric", "speedup"}, {"value", 3.0}, {"workload", "not-a-dev-workload"}},
                            json{{"metric", "latency_ms"}, {"value", 0.1}}}) {
    SCOPED_TRACE(claim.dump());
    start_over();
    sessions_.clear();
    for (const auto& p : plan_sessions()) sessions_.push_back(p);
    sessions_.push_back(writer_session("round", 1, {write_kernel(3.0), finish("faster", json::array({claim}))}));
    sessions_.push_back(reviewer_session("review", 1, "Looks great.\nDECISION: COMPLETE\nPROGRESS: ADVANCED"));
    auto opts = options();
    opts.max_rounds = 1;
    auto o = start_run(run_, opts, env());
    ASSERT_TRUE(o.ok()) << o.status().message();
    auto v = json::parse(*fs::read_file(run_ / "rounds/001/verify.json"));
    EXPECT_FALSE(v["verified"].get<bool>());
    ASSERT_EQ(v["claims"].size(), 1u);
    EXPECT_EQ(v["claims"][0]["status"], "invalid");
    EXPECT_EQ(o->incumbent, "c000") << "a round with an unchecked claim must not become the incumbent";
  }
}

// Issue 47: a task's error budget ([evaluation] max_tolerance_used) rejects a round that spent more
// of the tolerance than it allows, however fast; the rules reviewer refuses it and says why.
TEST_F(RunLoopTest, ARoundOverTheTasksErrorBudgetIsRejected) {
  const stdfs::path pack = run_.parent_path() / "gemm-budget";
  stdfs::copy(kPack, pack, stdfs::copy_options::recursive);
  auto toml = *fs::read_file(pack / "task.toml");
  toml.replace(toml.find("matched_ratio = 1.0"), 19, "matched_ratio = 1.0\nmax_tolerance_used = 0.5");
  ASSERT_TRUE(fs::write_file_atomic(pack / "task.toml", toml).ok());
  for (const double used : {0.9, 0.2}) {
    SCOPED_TRACE(used);
    start_over();
    sessions_.clear();
    for (const auto& p : plan_sessions()) sessions_.push_back(p);
    json write = write_kernel(3.0);
    write["write_file"]["content"] =
        write["write_file"]["content"].get<std::string>() + "// fake-tolerance-used: " + std::to_string(used) + "\n";
    sessions_.push_back(writer_session("round", 1, {write, finish("faster", json::array({geomean_claim(3.0)}))}));
    sessions_.push_back(reviewer_session("review", 1, "Looks great.\nDECISION: COMPLETE\nPROGRESS: ADVANCED"));
    auto opts = options();
    opts.task = pack;
    opts.max_rounds = 1;
    auto o = start_run(run_, opts, env());
    ASSERT_TRUE(o.ok()) << o.status().message();
    auto v = json::parse(*fs::read_file(run_ / "rounds/001/verify.json"));
    EXPECT_EQ(v["verified"].get<bool>(), used < 0.5) << v.dump(2);
    std::string budget;
    for (const auto& c : v["checks"])
      if (c["name"] == "error_budget") budget = c["detail"].get<std::string>() + (c["passed"] ? " (passed)" : "");
    EXPECT_NE(budget.find(fmt::format("spent {:.3g} % of the tolerance", 100 * used)), std::string::npos) << budget;
    EXPECT_NE(budget.find("the task allows 50 %"), std::string::npos) << budget;
    if (used > 0.5) {
      EXPECT_EQ(o->incumbent, "c000") << "a round over the error budget must not become the incumbent";
      const RulesVerdict rv = review_round(*read_round_evidence(run_ / "rounds/001"));
      EXPECT_EQ(rv.rule, Rule::kRejected);
      EXPECT_NE(rv.reason.find("error_budget"), std::string::npos) << rv.reason;
    }
  }
}

// --resume with new budgets continues a run stopped by max rounds where it stopped, and says so in
// the audit log; a run that is done, or stopped for another reason, is not reopened.
TEST_F(RunLoopTest, NewBudgetsOnResumeExtendAStoppedRun) {
  add_full_scenario(sessions_);
  auto opts = options();
  opts.max_rounds = 2;
  auto first = start_run(run_, opts, env());
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->phase, "stopped");
  EXPECT_EQ(first->stop_reason, "max rounds (2) reached");
  EXPECT_EQ(first->incumbent, "c001");
  for (const auto& l : status_lines_) EXPECT_EQ(l.find("round 3/2"), std::string::npos) << l;
  // Without new budgets a stopped run stays stopped.
  auto same = resume_run(run_, env());
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->phase, "stopped");
  auto more = resume_run(run_, env(), BudgetChange{.max_rounds = 4});
  ASSERT_TRUE(more.ok()) << more.status().message();
  expect_full_scenario_result(run_, *more);
  auto log = fs::read_file(run_ / "audit.jsonl");
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("\"budgets_changed\""), std::string::npos);
  EXPECT_NE(log->find("\"reopened_at\":\"round/writer\""), std::string::npos);
  auto v = audit::verify(run_ / "audit.jsonl");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok());
  // Done: new budgets do not reopen it.
  auto done = resume_run(run_, env(), BudgetChange{.max_rounds = 9});
  ASSERT_FALSE(done.ok());
  EXPECT_EQ(done.status().kind(), ErrorKind::kBadInput);
  EXPECT_NE(done.status().message().find("done"), std::string::npos);
}

// Each round's contract says what happened to the round before, in a fixed block; every prompt
// names the paths its evidence is at.
TEST_F(RunLoopTest, ContractsSayWhyThePreviousRoundEndedAndPromptsNameThePaths) {
  add_full_scenario(sessions_);
  auto o = start_run(run_, options(), env());
  ASSERT_TRUE(o.ok()) << o.status().message();
  auto contract = [&](int n) { return *fs::read_file(run_ / fmt::format("rounds/{:03d}/contract.md", n)); };
  EXPECT_EQ(contract(1).find("PREVIOUS_ROUND"), std::string::npos);
  EXPECT_NE(contract(2).find("PREVIOUS_ROUND: 1\nOUTCOME: accepted\nREASON: accepted"), std::string::npos)
      << contract(2);
  EXPECT_NE(contract(3).find("PREVIOUS_ROUND: 2\nOUTCOME: rejected\nREASON: false_claim"), std::string::npos)
      << contract(3);
  EXPECT_NE(contract(3).find("EVIDENCE: " + (stdfs::canonical(run_) / "rounds/002/verify.json").string()),
            std::string::npos);
  EXPECT_NE(contract(4).find("PREVIOUS_ROUND: 3\nOUTCOME: rejected\nREASON: not_improved"), std::string::npos)
      << contract(4);
  ASSERT_EQ(prompts_.size(), session_log_.size());
  for (size_t i = 0; i < prompts_.size(); ++i) {
    EXPECT_NE(prompts_[i].find("task (definition.json"), std::string::npos) << session_log_[i];
    EXPECT_NE(prompts_[i].find((stdfs::canonical(run_) / "ledger.json").string()), std::string::npos)
        << session_log_[i];
    if (session_log_[i].starts_with("reviewer:review:")) {
      EXPECT_NE(prompts_[i].find("this round: " + (stdfs::canonical(run_) / "rounds").string()), std::string::npos);
    }
  }
}

// Round 1 an improvement confirmed over `confirmed` head-to-heads (their interval above 1), round 2
// refused after the ratios `refused`; returns round 2's verify.json.
json expect_confirmed_then_refused(const stdfs::path& run, size_t confirmed, const json& refused) {
  const json v1 = json::parse(*fs::read_file(run / "rounds/001/verify.json"));
  EXPECT_TRUE(v1["improvement"].get<bool>()) << v1.dump(1);
  EXPECT_EQ(v1["head_to_head"]["ratios"].size(), confirmed) << v1.dump(1);
  EXPECT_GT(v1["head_to_head"]["geomean_ci95"][0].get<double>(), 1.0);
  const json v2 = json::parse(*fs::read_file(run / "rounds/002/verify.json"));
  EXPECT_FALSE(v2["improvement"].get<bool>()) << v2.dump(1);
  EXPECT_EQ(v2["head_to_head"]["ratios"], refused) << v2.dump(1);
  return v2;
}

// An improvement that one evaluation's interval supports is confirmed head-to-head against the
// incumbent in --confirm-pairs evaluations: a real 2x in all three; an unchanged kernel that read
// 1.1x once (its interval apart from the incumbent's) is caught when a head-to-head reads 1 or less,
// and nothing more is run after it.
TEST_F(RunLoopTest, AnImprovementIsConfirmedAcrossHeadToHeadEvaluations) {
  auto r = two_timed_rounds(2.0, 2.2, {2.0, 1.9, 2.1, 1.04, 0.99});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const json v2 = expect_confirmed_then_refused(run_, 3, {1.04, 0.99});
  EXPECT_NE(v2["improvement_detail"].get<std::string>().find("not faster beyond the noise"), std::string::npos);
  EXPECT_EQ(fake_.head_to_head_calls, 5);
  EXPECT_EQ(read_json(run_ / "state.json")["incumbent"]["id"], "c001");
}

// A gain whose interval overlaps the incumbent's (1.05x: 1.019..1.082 against 0.97..1.03) is decided
// head-to-head like one apart from it: here the first head-to-head reads 0.99x, not faster, and
// refuses it; the next round (1.2x) is confirmed by its three. Where the intervals overlap and there
// is nothing to time head-to-head, overlap refuses (not tested here: the incumbent always loads).
TEST_F(RunLoopTest, OverlappingIntervalsAreDecidedHeadToHead) {
  auto r = two_timed_rounds(1.05, 1.2, {0.99, 1.2, 1.21, 1.19});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const json v1 = read_json(run_ / "rounds/001/verify.json");
  EXPECT_FALSE(v1["improvement"].get<bool>()) << v1.dump(1);
  const std::string d1 = v1["improvement_detail"].get<std::string>();
  EXPECT_NE(d1.find("overlapping; head-to-head"), std::string::npos) << d1;
  EXPECT_NE(d1.find("not faster beyond the noise"), std::string::npos) << d1;
  EXPECT_EQ(v1["head_to_head"]["ratios"], json::array({0.99})) << v1.dump(1);
  const json v2 = read_json(run_ / "rounds/002/verify.json");
  EXPECT_TRUE(v2["improvement"].get<bool>()) << v2.dump(1);
  EXPECT_NE(v2["improvement_detail"].get<std::string>().find("apart; head-to-head"), std::string::npos);
  EXPECT_EQ(fake_.head_to_head_calls, 4);
  EXPECT_EQ(read_json(run_ / "state.json")["incumbent"]["id"], "c002");
}

// Three head-to-heads all faster but undecided (1.24x, 1.07x, 1.04x: the interval over them reaches
// below 1) get more, while every one stays faster: the fifth decides it. One at or below 1 still
// stops at once.
TEST_F(RunLoopTest, UndecidedHeadToHeadsGetMoreEvaluationsWhileEachIsFaster) {
  auto r = two_timed_rounds(1.2, 1.3, {1.24, 1.07, 1.04, 1.12, 1.10, 0.98});
  ASSERT_TRUE(r.ok()) << r.status().message();
  expect_confirmed_then_refused(run_, 5, {0.98});
  EXPECT_EQ(fake_.head_to_head_calls, 6);
  bool more = false;
  for (const auto& line : status_lines_)
    more |= line.find("against the incumbent, 4 (the first 3 undecided)") != std::string::npos;
  EXPECT_TRUE(more);
}

TEST_F(RunLoopTest, ThreeStallsStopWithReplanPromptBefore) {
  for (const auto& p : plan_sessions()) sessions_.push_back(p);
  sessions_.push_back({{"role", "writer"}, {"phase", "round"}, {"steps", {finish("nothing")}}});
  sessions_.push_back(
      {{"role", "reviewer"}, {"phase", "review"}, {"final_text", "DECISION: CONTINUE\nPROGRESS: STALLED"}});
  auto o = start_run(run_, options(), env());
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->phase, "stopped");
  EXPECT_EQ(o->stop_reason, "three stalled rounds in a row");
  EXPECT_EQ(o->rounds, 3);
  auto c3 = fs::read_file(run_ / "rounds/003/contract.md");
  ASSERT_TRUE(c3.ok());
  EXPECT_NE(c3->find("REPLAN"), std::string::npos);
  auto c2 = fs::read_file(run_ / "rounds/002/contract.md");
  EXPECT_EQ(c2->find("REPLAN"), std::string::npos);
  EXPECT_TRUE(stdfs::exists(run_ / "final/solution.json"));
}

TEST_F(RunLoopTest, TokenBudgetStopsGracefullyWithIncumbent) {
  sessions_.push_back(writer_session("plan", 1, json::array(), "plan", 1000));
  sessions_.push_back(reviewer_session("plan_review", 1, "PLAN: APPROVE", 1000));
  sessions_.push_back(writer_session("round", 1, {write_kernel(2.0), finish("x", {geomean_claim(2.0)})}, "", 1000));
  sessions_.push_back(reviewer_session("review", 1, "DECISION: CONTINUE\nPROGRESS: ADVANCED", 1000));
  sessions_.push_back(
      {{"role", "writer"}, {"phase", "round"}, {"steps", {finish("y")}}, {"usage", {{"input_tokens", 1000}}}});
  sessions_.push_back(
      {{"role", "reviewer"}, {"phase", "review"}, {"final_text", "DECISION: CONTINUE\nPROGRESS: STALLED"}});
  auto opts = options();
  opts.budget_tokens = 4500;
  auto o = start_run(run_, opts, env());
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->phase, "stopped");
  EXPECT_NE(o->stop_reason.find("budget"), std::string::npos) << o->stop_reason;
  EXPECT_EQ(o->incumbent, "c001");
  auto sol = final_sources(run_);
  ASSERT_TRUE(sol.ok());
  EXPECT_NE(sol->find("fake-speedup: 2.0"), std::string::npos);
}

TEST_F(RunLoopTest, PlanTamperingIsAViolationThatStopsTheRun) {
  sessions_.push_back(writer_session("plan", 1, json::array(), "plan"));
  sessions_.push_back(reviewer_session("plan_review", 1, "PLAN: APPROVE"));
  sessions_.push_back(writer_session(
      "round", 1,
      {write_kernel(2.0),
       {{"write_file", {{"path", "../plan/plan.json"}, {"content", "{\"criteria\": \"easy\"}"}, {"unconfined", true}}}},
       finish("x")}));
  sessions_.push_back(reviewer_session("review", 1, "DECISION: CONTINUE\nPROGRESS: ADVANCED"));
  auto o = start_run(run_, options(), env());
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->phase, "stopped");
  EXPECT_NE(o->stop_reason.find("plan hash violation"), std::string::npos) << o->stop_reason;
  EXPECT_EQ(o->incumbent, "c000");
  auto sol = final_sources(run_);
  ASSERT_TRUE(sol.ok());
  EXPECT_EQ(sol->find("fake-speedup"), std::string::npos);
}

TEST_F(RunLoopTest, WritesOutsideTheSolutionAreRejectedAndReset) {
  sessions_.push_back(writer_session("plan", 1, json::array(), "plan"));
  sessions_.push_back(reviewer_session("plan_review", 1, "PLAN: APPROVE"));
  sessions_.push_back(writer_session("round", 1,
                                     {write_kernel(2.0),
                                      {{"write_file", {{"path", "conftest.py"}, {"content", "x"}}}},
                                      finish("x", {geomean_claim(2.0)})}));
  sessions_.push_back(reviewer_session("review", 1, "DECISION: STOP\nPROGRESS: ADVANCED"));
  auto o = start_run(run_, options(), env());
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->phase, "stopped");
  EXPECT_EQ(o->incumbent, "c000");
  auto v = json::parse(*fs::read_file(run_ / "rounds/001/verify.json"));
  EXPECT_FALSE(v["verified"].get<bool>());
  EXPECT_NE(v.dump().find("conftest.py"), std::string::npos);
  EXPECT_FALSE(stdfs::exists(run_ / "workspace/conftest.py"));  // reset to the incumbent
}

// Issue 45: a claim of less than kda measured (a tuner claiming its interval's lower end) is
// conservative, not false; the round is verified and accepted on kda's own measurement.
TEST_F(RunLoopTest, AClaimBelowWhatKdaMeasuredIsConservativeNotFalse) {
  sessions_.push_back(writer_session("plan", 1, json::array(), "plan"));
  sessions_.push_back(reviewer_session("plan_review", 1, "PLAN: APPROVE"));
  sessions_.push_back(writer_session("round", 1, {write_kernel(2.0), finish("x", {geomean_claim(1.2)})}));
  sessions_.push_back(reviewer_session("review", 1, "DECISION: STOP\nPROGRESS: ADVANCED"));
  auto o = start_run(run_, options(), env());
  ASSERT_TRUE(o.ok()) << o.status().message();
  auto v = json::parse(*fs::read_file(run_ / "rounds/001/verify.json"));
  EXPECT_TRUE(v["verified"].get<bool>()) << v.dump();
  EXPECT_EQ(v["claims"][0]["status"], "confirmed");
  EXPECT_TRUE(v["claims"][0]["conservative"].get<bool>());
  EXPECT_EQ(o->incumbent, "c001");
}

TEST_F(RunLoopTest, FailedCompletionCheckReturnsToRounds) {
  sessions_.push_back(writer_session("plan", 1, json::array(), "plan"));
  sessions_.push_back(reviewer_session("plan_review", 1, "PLAN: APPROVE"));
  sessions_.push_back(
      {{"role", "writer"}, {"phase", "round"}, {"steps", {write_kernel(2.0), finish("x", {geomean_claim(2.0)})}}});
  sessions_.push_back(
      {{"role", "reviewer"}, {"phase", "review"}, {"final_text", "DECISION: COMPLETE\nPROGRESS: ADVANCED"}});
  auto opts = options("10x");
  opts.max_rounds = 2;
  auto o = start_run(run_, opts, env());
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->phase, "stopped");
  auto c2 = fs::read_file(run_ / "rounds/002/contract.md");
  ASSERT_TRUE(c2.ok());
  EXPECT_NE(c2->find("completion check failed"), std::string::npos);
  // Round 2 changed nothing and the reviewer asked again: the same incumbent is not checked twice.
  EXPECT_NE(o->stop_reason.find("the incumbent c001 is unchanged since the last completion check, which failed"),
            std::string::npos)
      << o->stop_reason;
  auto log = fs::read_file(run_ / "audit.jsonl");
  ASSERT_TRUE(log.ok());
  size_t checks = 0;
  for (size_t at = log->find("\"why\":\"completion check\""); at != std::string::npos;
       at = log->find("\"why\":\"completion check\"", at + 1))
    ++checks;
  EXPECT_EQ(checks, 1u);
}

// A COMPLETE on a round that was not accepted, with the incumbent far below the target, runs no
// completion check (it would measure the unchanged incumbent and fail): the next contract says why.
TEST_F(RunLoopTest, CompleteOnARejectedRoundBelowTheTargetRunsNoCheck) {
  sessions_.push_back(writer_session("plan", 1, json::array(), "plan"));
  sessions_.push_back(reviewer_session("plan_review", 1, "PLAN: APPROVE"));
  sessions_.push_back({{"role", "writer"}, {"phase", "round"}, {"steps", {finish("nothing changed")}}});
  sessions_.push_back(
      {{"role", "reviewer"}, {"phase", "review"}, {"final_text", "DECISION: COMPLETE\nPROGRESS: STALLED"}});
  sessions_.push_back({{"role", "writer"}, {"phase", "round"}, {"steps", {finish("still nothing")}}});
  sessions_.push_back(
      {{"role", "reviewer"}, {"phase", "review"}, {"final_text", "DECISION: COMPLETE\nPROGRESS: STALLED"}});
  auto opts = options("10x");
  opts.max_rounds = 2;
  auto o = start_run(run_, opts, env());
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->phase, "stopped");
  EXPECT_NE(o->stop_reason.find("the reviewer asked for COMPLETE and no rounds are left"), std::string::npos)
      << o->stop_reason;
  EXPECT_FALSE(stdfs::exists(run_ / "final/check.json"));  // no completion check ran
  auto log = fs::read_file(run_ / "audit.jsonl");
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->find("\"completion check\""), std::string::npos);
  EXPECT_NE(log->find("\"completion check skipped\""), std::string::npos);
  auto c2 = fs::read_file(run_ / "rounds/002/contract.md");
  ASSERT_TRUE(c2.ok());
  EXPECT_NE(c2->find("no completion check was run: this round was not accepted, and the incumbent c000"),
            std::string::npos)
      << *c2;
}

// A workload outside the dev set, for the repair tests: the completion check sees it, a round does not.
std::string first_non_dev_workload() {
  auto pack = task::load_task_pack(kPack);
  EXPECT_TRUE(pack.ok());
  for (const auto& w : pack->workloads)
    if (std::find(pack->dev_uuids.begin(), pack->dev_uuids.end(), w.uuid) == pack->dev_uuids.end()) return w.uuid;
  ADD_FAILURE() << "every workload of " << kPack << " is a dev workload";
  return "";
}

// The plan, then round 1: 2x on the dev workloads, 0.5x on `slow`, and the reviewer asks for COMPLETE.
void sessions_for_a_failed_check(std::vector<json>& sessions, const std::string& slow) {
  sessions.push_back(writer_session("plan", 1, json::array(), "plan"));
  sessions.push_back(reviewer_session("plan_review", 1, "PLAN: APPROVE"));
  sessions.push_back(writer_session(
      "round", 1, {write_kernel(2.0, "// fake-slow-workload: " + slow + " 0.5\n"), finish("fast on dev")}));
  sessions.push_back(reviewer_session("review", 1, "DECISION: COMPLETE\nPROGRESS: ADVANCED"));
}

// The incumbent (2x on the dev workloads) fails its completion check on one workload outside the dev
// set (0.5x, under the 0.8x floor). Round 2 mends that shape and is no faster on the dev set: before,
// it was "not improved" and the run could only stop with the 0.5x shape in final/; now it is measured
// on the failing workload with the check's trials, accepted as a repair, and the next check passes.
TEST_F(RunLoopTest, ACandidateThatRepairsAFailedCompletionCheckIsAcceptedWithoutASpeedup) {
  const std::string slow = first_non_dev_workload();
  sessions_for_a_failed_check(sessions_, slow);
  sessions_.push_back(writer_session("round", 2, {write_kernel(2.0), finish("the slow shape mended")}));
  sessions_.push_back(reviewer_session("review", 2, "DECISION: COMPLETE\nPROGRESS: ADVANCED"));
  auto opts = options("1.5x");
  opts.max_rounds = 3;
  auto o = start_run(run_, opts, env());
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->phase, "done") << o->stop_reason;
  EXPECT_EQ(o->incumbent, "c002");
  // Round 2's contract said what failed, on which workload, and that a repair counts.
  auto c2 = fs::read_file(run_ / "rounds/002/contract.md");
  ASSERT_TRUE(c2.ok());
  EXPECT_NE(c2->find("no_workload_slower"), std::string::npos) << *c2;
  EXPECT_NE(c2->find("failing workloads: " + slow), std::string::npos) << *c2;
  EXPECT_NE(c2->find("Open from the last completion check of c001: no_workload_slower on the workloads " + slow),
            std::string::npos)
      << *c2;
  EXPECT_NE(c2->find("accepted as a repair"), std::string::npos) << *c2;
  const json v2 = read_json(run_ / "rounds/002/verify.json");
  EXPECT_TRUE(v2["improvement"].get<bool>()) << v2.dump(1);
  EXPECT_TRUE(v2["repair"]["repaired"].get<bool>()) << v2.dump(1);
  EXPECT_EQ(v2["repair"]["workloads"], json::array({slow}));
  EXPECT_EQ(v2["repair"]["criteria"], json::array({"no_workload_slower"}));
  EXPECT_NE(v2["improvement_detail"].get<std::string>().find("a repair of the last completion check"),
            std::string::npos)
      << v2.dump(1);
  // The repair was measured on the failing workload alone; the reviewer was told.
  EXPECT_NE(std::find(fake_.workload_sets.begin(), fake_.workload_sets.end(), slow), fake_.workload_sets.end());
  bool told = false;
  for (const auto& p : prompts_) told = told || p.find("was measured as its repair: a repair") != std::string::npos;
  EXPECT_TRUE(told);
  EXPECT_TRUE(read_json(run_ / "final/check.json")["met"].get<bool>());
  auto final_solution = final_sources(run_);
  ASSERT_TRUE(final_solution.ok());
  EXPECT_EQ(final_solution->find("fake-slow-workload"), std::string::npos);
}

// Not repairs: round 2 mends the shape but is slower on the dev set beyond the noise (1.5x against
// 2x: no repair evaluation is spent); round 3 keeps the dev speed but the shape is still under the
// floor (0.6x) when measured. Both are "not_improved", and the incumbent stays.
TEST_F(RunLoopTest, ARepairMustMendTheFailingWorkloadsWithoutLosingDevSpeed) {
  const std::string slow = first_non_dev_workload();
  sessions_for_a_failed_check(sessions_, slow);
  sessions_.push_back(writer_session("round", 2, {write_kernel(1.5), finish("mended, slower")}));
  sessions_.push_back(reviewer_session("review", 2, "DECISION: CONTINUE\nPROGRESS: ADVANCED"));
  sessions_.push_back(writer_session(
      "round", 3, {write_kernel(2.0, "// fake-slow-workload: " + slow + " 0.6\n"), finish("not quite mended")}));
  sessions_.push_back(reviewer_session("review", 3, "DECISION: STOP\nPROGRESS: ADVANCED"));
  auto opts = options("1.5x");
  opts.max_rounds = 3;
  auto o = start_run(run_, opts, env());
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->incumbent, "c001");
  const json v2 = read_json(run_ / "rounds/002/verify.json");
  EXPECT_FALSE(v2["improvement"].get<bool>()) << v2.dump(1);
  EXPECT_FALSE(v2["repair"]["repaired"].get<bool>());
  EXPECT_FALSE(v2["repair"].contains("eval")) << v2.dump(1);
  EXPECT_NE(v2["improvement_detail"].get<std::string>().find("0.75x the incumbent on the dev workloads (geomeans"),
            std::string::npos)
      << v2.dump(1);
  const json v3 = read_json(run_ / "rounds/003/verify.json");
  EXPECT_FALSE(v3["improvement"].get<bool>()) << v3.dump(1);
  EXPECT_FALSE(v3["repair"]["repaired"].get<bool>());
  EXPECT_NE(v3["improvement_detail"].get<std::string>().find("no_workload_slower NOT met"), std::string::npos)
      << v3.dump(1);
  EXPECT_EQ(std::count(fake_.workload_sets.begin(), fake_.workload_sets.end(), slow), 1);  // round 3's only
  EXPECT_EQ(explain_round(run_, 3, *load_ledger(run_ / "ledger.json")).outcome.code, std::string("not_improved"));
  // Every contract while the check stays open says so, not only the first after it.
  auto c3 = fs::read_file(run_ / "rounds/003/contract.md");
  ASSERT_TRUE(c3.ok());
  EXPECT_NE(c3->find("Open from the last completion check of c001"), std::string::npos) << *c3;
}

// With intervals, "not slower" is paired, as improvements are confirmed: round 2 reads 0.9x the incumbent
// head-to-head (refused before its repair evaluation); round 3 is as fast paired but leaves the mended
// shape INCORRECT (refused: a repair must keep every failing workload PASSED, not only lift the slow one);
// round 4 is as fast and mends it: accepted, and the check passes.
TEST_F(RunLoopTest, WithIntervalsARepairIsNotSlowerHeadToHeadAndKeepsTheFailingWorkloadsPassed) {
  const std::string slow = first_non_dev_workload();
  sessions_for_a_failed_check(sessions_, slow);
  sessions_.push_back(writer_session("round", 2, {write_kernel(2.0), finish("mended, slower paired")}));
  sessions_.push_back(reviewer_session("review", 2, "DECISION: CONTINUE\nPROGRESS: ADVANCED"));
  sessions_.push_back(
      writer_session("round", 3, {write_kernel(2.0, "// fake-incorrect-workload: " + slow + "\n"), finish("broken")}));
  sessions_.push_back(reviewer_session("review", 3, "DECISION: CONTINUE\nPROGRESS: ADVANCED"));
  sessions_.push_back(writer_session("round", 4, {write_kernel(2.0), finish("mended")}));
  sessions_.push_back(reviewer_session("review", 4, "DECISION: COMPLETE\nPROGRESS: ADVANCED"));
  fake_.with_intervals = true;
  fake_.head_to_head = {2.0, 2.0, 2.0, 0.9, 1.0, 1.0};  // c001's confirmation, then one a round
  auto opts = options("1.5x");
  opts.max_rounds = 4;
  auto o = start_run(run_, opts, env());
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->phase, "done") << o->stop_reason;
  EXPECT_EQ(o->incumbent, "c004");
  const json v2 = read_json(run_ / "rounds/002/verify.json");
  EXPECT_FALSE(v2["repair"]["repaired"].get<bool>()) << v2.dump(1);
  EXPECT_NE(v2["repair"]["detail"].get<std::string>().find("0.9x the incumbent on the dev workloads (head-to-head)"),
            std::string::npos)
      << v2.dump(1);
  EXPECT_FALSE(v2["repair"].contains("eval"));
  const json v3 = read_json(run_ / "rounds/003/verify.json");
  EXPECT_FALSE(v3["repair"]["repaired"].get<bool>()) << v3.dump(1);
  EXPECT_NE(v3["repair"]["detail"].get<std::string>().find("all_passed NOT met"), std::string::npos) << v3.dump(1);
  const json v4 = read_json(run_ / "rounds/004/verify.json");
  EXPECT_TRUE(v4["repair"]["repaired"].get<bool>()) << v4.dump(1);
  EXPECT_EQ(v4["repair"]["head_to_head"]["ratios"], json::array({1.0})) << v4.dump(1);
  EXPECT_EQ(fake_.head_to_head_calls, 6);
}

TEST_F(RunLoopTest, AlignmentReviewEveryKRounds) {
  sessions_.push_back(writer_session("plan", 1, json::array(), "plan"));
  sessions_.push_back(reviewer_session("plan_review", 1, "PLAN: APPROVE"));
  sessions_.push_back({{"role", "writer"}, {"phase", "round"}, {"steps", {finish("nothing")}}});
  sessions_.push_back(
      {{"role", "reviewer"}, {"phase", "review"}, {"final_text", "DECISION: CONTINUE\nPROGRESS: ADVANCED"}});
  sessions_.push_back(
      {{"role", "reviewer"}, {"phase", "alignment"}, {"final_text", "Off course.\nDECISION: STOP\nPROGRESS: STALLED"}});
  auto opts = options();
  opts.alignment_every = 2;
  auto o = start_run(run_, opts, env());
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->phase, "stopped");
  EXPECT_EQ(o->stop_reason, "the reviewer decided STOP");
  EXPECT_EQ(o->rounds, 2);
  EXPECT_NE(std::find(session_log_.begin(), session_log_.end(), "reviewer:alignment:2"), session_log_.end());
  EXPECT_EQ(std::find(session_log_.begin(), session_log_.end(), "reviewer:review:2"), session_log_.end());
  EXPECT_TRUE(read_json(run_ / "rounds/002/verdict.json")["alignment"].get<bool>());
  EXPECT_FALSE(read_json(run_ / "rounds/001/verdict.json")["alignment"].get<bool>());
}

TEST_F(RunLoopTest, BadInputsAreRefusedBeforeAnythingIsCreated) {
  auto o = options();
  o.target = "fast";
  EXPECT_FALSE(start_run(run_, o, env()).ok());
  EXPECT_FALSE(stdfs::exists(run_ / "state.json"));
  o = options();
  o.writer = "gpt-9";
  EXPECT_FALSE(start_run(run_, o, env()).ok());
  EXPECT_FALSE(stdfs::exists(run_ / "state.json"));
  EXPECT_FALSE(resume_run(tmp_ / "nothing", env()).ok());
}

}  // namespace
}  // namespace kda::loop::testing_fixture
