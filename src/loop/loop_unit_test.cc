// Unit tests of the loop's pieces: verdict grammar, target/criteria, state and ledger JSON, kda's
// tools, the backend factory and the git workspace.
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "loop/backend_factory.h"
#include "loop/criteria.h"
#include "loop/git_workspace.h"
#include "loop/kda_tools.h"
#include "loop/round_decision.h"
#include "loop/round_record.h"
#include "loop/run_state.h"
#include "loop/tuner_writer.h"
#include "loop/verdict.h"
#include "tune/guard.h"
#include "tune/tune.h"
#include "util/fs.h"

namespace kda::loop {
namespace {

TEST(Verdict, WellFormed) {
  auto v = parse_review_verdict("Looks good, measured 2x.\nDECISION: COMPLETE\n  PROGRESS: ADVANCED  \n");
  EXPECT_TRUE(v.well_formed);
  EXPECT_EQ(v.decision, Decision::kComplete);
  EXPECT_EQ(v.progress, Progress::kAdvanced);
  auto s = parse_review_verdict("PROGRESS: REGRESSED\nDECISION: STOP");
  EXPECT_TRUE(s.well_formed);
  EXPECT_EQ(s.decision, Decision::kStop);
  EXPECT_EQ(s.progress, Progress::kRegressed);
}

TEST(Verdict, GarbageIsContinueStalledWithComplaint) {
  for (const char* text :
       {"", "DECISION: complete\nPROGRESS: ADVANCED", "DECISION: COMPLETE\nDECISION: STOP\nPROGRESS: ADVANCED",
        "DECISION: COMPLETE", "DECISION: COMPLETE!\nPROGRESS: ADVANCED",
        "I think DECISION: STOP is right\nPROGRESS: STALLED", "DECISION: STOP\nPROGRESS: GREAT"}) {
    auto v = parse_review_verdict(text);
    EXPECT_FALSE(v.well_formed) << text;
    EXPECT_EQ(v.decision, Decision::kContinue) << text;
    EXPECT_EQ(v.progress, Progress::kStalled) << text;
    EXPECT_NE(v.complaint.find("malformed"), std::string::npos) << text;
  }
}

TEST(Verdict, Plan) {
  EXPECT_TRUE(parse_plan_verdict("fine\nPLAN: APPROVE\n").approve);
  auto r = parse_plan_verdict("PLAN: REVISE");
  EXPECT_TRUE(r.well_formed);
  EXPECT_FALSE(r.approve);
  auto g = parse_plan_verdict("PLAN: APPROVE\nPLAN: APPROVE");
  EXPECT_FALSE(g.well_formed);
  EXPECT_FALSE(g.approve);
}

TEST(Criteria, ParseTarget) {
  auto c = parse_target("1.5x, M>=128:2x,N<64:1.2");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_DOUBLE_EQ(c->min_geomean_speedup, 1.5);
  ASSERT_EQ(c->regimes.size(), 2u);
  EXPECT_EQ(c->regimes[0].axis, "M");
  EXPECT_EQ(c->regimes[0].op, ">=");
  EXPECT_DOUBLE_EQ(c->regimes[0].value, 128);
  EXPECT_DOUBLE_EQ(c->regimes[0].min_speedup, 2);
  EXPECT_EQ(c->regimes[1].op, "<");
  for (const char* bad : {"fast", "-1", "1.5,2", "M>=:2x", ">=3:2", "M>=3:zero"}) {
    auto b = parse_target(bad);
    EXPECT_FALSE(b.ok()) << bad;
  }
  auto rt = Criteria::from_json(c->to_json());
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ(rt->regimes.size(), 2u);
}

eval::EvalReport report_with(std::vector<std::pair<int, double>> m_speedups, bool all_passed = true) {
  eval::EvalReport r;
  double log_sum = 0;
  for (auto [m, s] : m_speedups) {
    eval::WorkloadResult w;
    w.uuid = "w" + std::to_string(m);
    w.axes = {{"M", m}};
    w.speedup = s;
    r.workloads.push_back(w);
    log_sum += std::log(s);
  }
  r.all_passed = all_passed;
  r.score_geomean = std::exp(log_sum / m_speedups.size());
  return r;
}

TEST(Criteria, Check) {
  auto c = *parse_target("2x,M>=128:3x");
  auto ok = check_criteria(c, report_with({{1, 2.0}, {128, 3.0}, {256, 3.5}}));
  EXPECT_TRUE(all_met(ok));
  auto slow_regime = check_criteria(c, report_with({{1, 4.0}, {128, 2.5}, {256, 2.5}}));
  EXPECT_FALSE(all_met(slow_regime));
  EXPECT_FALSE(slow_regime[2].met);
  // What a repair is measured on: a failed regime names its workloads, a met criterion none.
  EXPECT_EQ(slow_regime[2].workloads, (std::vector<std::string>{"w128", "w256"}));
  EXPECT_TRUE(slow_regime[0].workloads.empty());
  EXPECT_TRUE(ok[2].workloads.empty());
  auto failed_report = report_with({{1, 9.0}, {128, 9.0}}, false);
  failed_report.workloads[0].verdict = eval::Verdict::kIncorrectNumerical;
  auto failed = check_criteria(c, failed_report);
  EXPECT_FALSE(failed[0].met);
  EXPECT_EQ(failed[0].workloads, std::vector<std::string>{"w1"});
  EXPECT_FALSE(failed[1].met);
  EXPECT_TRUE(failed[1].workloads.empty());  // the geomean: only speed mends it
  EXPECT_FALSE(all_met(failed));
  EXPECT_EQ(criteria_results_json(failed)[0]["workloads"], nlohmann::json::array({"w1"}));
  EXPECT_FALSE(criteria_results_json(failed)[1].contains("workloads"));
}

// Issue 45: a solution 2x faster in geomean but 0.17x of the baseline on one workload does not
// complete; the criterion names the workload and the ratio, and a run without a baseline skips it.
TEST(Criteria, NoWorkloadMayEndSlowerThanTheBaseline) {
  auto c = *parse_target("1.5x");
  auto r = report_with({{1, 4.0}, {16, 4.0}, {8192, 0.17}});
  r.baseline_name = "naive";
  for (auto& w : r.workloads) w.verdict = eval::Verdict::kPassed;
  auto res = check_criteria(c, r);
  EXPECT_FALSE(all_met(res));
  auto it = std::find_if(res.begin(), res.end(), [](const CriterionResult& x) { return x.id == "no_workload_slower"; });
  ASSERT_NE(it, res.end());
  EXPECT_FALSE(it->met);
  EXPECT_NE(it->detail.find("w8192"), std::string::npos) << it->detail;
  EXPECT_NE(it->detail.find("0.170x, floor 0.80x"), std::string::npos) << it->detail;
  // Below the floor in every trial: slower. Below in the mean but one trial above it: within noise.
  r.workloads[2].speedup = 0.78;
  r.score_geomean = std::cbrt(4.0 * 4.0 * 0.78);
  r.workloads[2].trial_ms = {1.0, 1.0, 1.0};
  r.workloads[2].baseline_trial_ms = {0.7, 0.79, 0.75};
  EXPECT_FALSE(all_met(check_criteria(c, r)));
  r.workloads[2].baseline_trial_ms = {0.7, 0.85, 0.79};
  auto noisy = check_criteria(c, r);
  EXPECT_TRUE(all_met(noisy));
  EXPECT_NE(noisy.back().detail.find("within noise: one trial at 0.850x"), std::string::npos) << noisy.back().detail;
  // A noisy slowest workload does not hide another that is below the floor in every trial.
  r.workloads[1].speedup = 0.79;
  r.workloads[1].trial_ms = {1.0, 1.0, 1.0};
  r.workloads[1].baseline_trial_ms = {0.78, 0.79, 0.795};
  auto hidden = check_criteria(c, r);
  auto h =
      std::find_if(hidden.begin(), hidden.end(), [](const CriterionResult& x) { return x.id == "no_workload_slower"; });
  ASSERT_NE(h, hidden.end());
  EXPECT_FALSE(h->met);
  EXPECT_NE(h->detail.find("w16"), std::string::npos) << h->detail;
  EXPECT_EQ(h->workloads, std::vector<std::string>{"w16"});  // the noisy w8192 is not named
  r.workloads[1].speedup = 4.0;
  r.workloads[1].trial_ms.clear();
  r.workloads[1].baseline_trial_ms.clear();
  r.workloads[2].trial_ms.clear();
  r.workloads[2].baseline_trial_ms.clear();
  EXPECT_FALSE(all_met(check_criteria(c, r)));  // no trials: the point estimate decides
  r.workloads[2].speedup = 0.88;                // within the host's noise
  r.score_geomean = std::cbrt(4.0 * 4.0 * 0.88);
  EXPECT_TRUE(all_met(check_criteria(c, r)));
  c.min_workload_speedup = 0;  // switched off
  r.workloads[2].speedup = 0.17;
  r.score_geomean = std::cbrt(4.0 * 4.0 * 0.17);
  auto off = check_criteria(c, r);
  EXPECT_EQ(
      std::count_if(off.begin(), off.end(), [](const CriterionResult& x) { return x.id == "no_workload_slower"; }), 0);
  // Criteria written before the field existed read with the default floor.
  auto j = c.to_json();
  j["machine"].erase("min_workload_speedup");
  EXPECT_DOUBLE_EQ(Criteria::from_json(j)->min_workload_speedup, kMinWorkloadSpeedup);
}

TEST(RunState, RoundTrips) {
  RunState s;
  s.options.task = "/t";
  s.options.writer = "scripted:w.json";
  s.options.reviewer = "scripted:r.json";
  s.options.eval_trials = 1;
  s.phase = Phase::kRound;
  s.step = Step::kVerify;
  s.round = 4;
  s.protected_files["rounds/001/verdict.json"] = "ab";
  s.usage.input_tokens = 7;
  s.usage.cost_usd = 0.25;
  s.complaints = {"x"};
  auto back = RunState::from_json(s.to_json());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->to_json(), s.to_json());
  EXPECT_EQ(*back->options.eval_trials, 1);
  EXPECT_FALSE(back->options.eval_iterations.has_value());
  auto bad = RunState::from_json({{"version", 1}});
  EXPECT_FALSE(bad.ok());
}

TEST(Ledger, UpsertIsIdempotent) {
  Ledger l;
  l.upsert({.id = "c001", .parent = "c000", .round = 1, .commit = "a"});
  l.upsert({.id = "c001", .parent = "c000", .round = 1, .commit = "b"});
  ASSERT_EQ(l.candidates.size(), 1u);
  EXPECT_EQ(l.find("c001")->commit, "b");
  auto back = Ledger::from_json(l.to_json());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->to_json(), l.to_json());
}

TEST(KdaTools, FinishRoundOnlyInRoundAndOnce) {
  int evals = 0;
  KdaToolHost host({.evaluate = [&]() -> Result<agent::ToolOutcome> {
                      ++evals;
                      return agent::ToolOutcome{"measured", false, {}};
                    },
                    .ledger =
                        [] {
                          return nlohmann::json{{"incumbent", "c000"}};
                        }});
  auto names = [&] {
    std::vector<std::string> n;
    for (const auto& t : host.tools()) n.push_back(t.name);
    return n;
  };
  EXPECT_EQ(names(), std::vector<std::string>{"ledger"});
  EXPECT_TRUE(host.call("finish_round", {{"summary", "x"}}).is_error);
  EXPECT_TRUE(host.call("evaluate", {}).is_error);
  host.begin_round(1);
  EXPECT_EQ(names(), (std::vector<std::string>{"evaluate", "ledger", "finish_round"}));
  auto measured = host.call("evaluate", {});
  EXPECT_FALSE(measured.is_error);
  EXPECT_NE(measured.text.find("evaluate calls left this round: 0"), std::string::npos) << measured.text;
  EXPECT_EQ(measured.data["evals_left"], 0);
  EXPECT_TRUE(host.call("evaluate", {}).is_error);  // limit 1
  EXPECT_EQ(evals, 1);
  EXPECT_TRUE(host.call("finish_round", {{"claims", 3}}).is_error);
  auto ok = host.call("finish_round", {{"summary", "faster"},
                                       {"claims", {{{"metric", "speedup"}, {"value", 2.0}, {"workload", "u"}}}}});
  EXPECT_FALSE(ok.is_error) << ok.text;
  EXPECT_TRUE(host.call("finish_round", {{"summary", "again"}}).is_error);
  ASSERT_TRUE(host.finished().has_value());
  EXPECT_EQ(host.finished()->summary, "faster");
  ASSERT_EQ(host.finished()->claims.size(), 1u);
  EXPECT_EQ(host.finished()->claims[0].workload, "u");
  host.end_round();
  EXPECT_TRUE(host.call("finish_round", {{"summary", "late"}}).is_error);
  EXPECT_FALSE(host.call("ledger", {}).is_error);
  EXPECT_TRUE(host.call("nope", {}).is_error);
}

// The ledger tool puts the incumbent first and pages the candidates newest first: with 30
// candidates of ~3,000 characters each the incumbent and the newest are never cut off.
// The run's budgets as a rule over its state and the caller's clock: --hours (which had no test
// while the rule read the clock itself), tokens, dollars and evaluator minutes, the first used up wins.
TEST(Budgets, EachBudgetStopsTheRunWhenUsedUp) {
  RunState st;
  EXPECT_EQ(exceeded_budget(st, 1e9), std::nullopt);  // no budget set: never
  st.options.hours = 1.5;
  EXPECT_EQ(exceeded_budget(st, 5399), std::nullopt);
  EXPECT_EQ(exceeded_budget(st, 5400), "budget: wall time 1.50 h used");
  st.options.hours = 0;
  st.options.budget_tokens = 1000;
  st.usage.input_tokens = 600;
  st.usage.output_tokens = 399;
  EXPECT_EQ(exceeded_budget(st, 0), std::nullopt);
  st.usage.output_tokens = 400;
  EXPECT_EQ(exceeded_budget(st, 0), "budget: 1000 tokens used (limit 1000)");
  st.options.budget_tokens = 0;
  st.options.budget_usd = 2;
  st.usage.cost_usd = 2.5;
  EXPECT_EQ(exceeded_budget(st, 0), "budget: $2.50 spent (limit $2.00)");
  st.options.budget_usd = 0;
  st.options.gpu_minutes = 1;
  st.eval_s = 59;
  EXPECT_EQ(exceeded_budget(st, 0), std::nullopt);
  st.eval_s = 60;
  EXPECT_EQ(exceeded_budget(st, 0), "budget: 1.0 evaluator minutes used (limit 1.0)");
  st.options.hours = 0.5;  // two used up: the wall time is named first
  EXPECT_EQ(exceeded_budget(st, 1800), "budget: wall time 0.50 h used");
}

TEST(KdaTools, LedgerShowsTheIncumbentAndTheNewestFirstInPages) {
  Ledger l;
  for (int i = 1; i <= 30; ++i) {
    Candidate c;
    c.id = fmt::format("c{:03d}", i);
    c.parent = "c000";
    c.round = i;
    c.notes = std::string(3000, 'x');
    c.accepted = i == 4;
    l.upsert(c);
  }
  l.incumbent = "c004";
  KdaToolHost host({.ledger = [&] { return l.to_json(); }});
  auto first = host.call("ledger", {});
  ASSERT_FALSE(first.is_error) << first.text;
  auto j = nlohmann::json::parse(first.text);
  EXPECT_EQ(j["incumbent"], "c004");
  EXPECT_EQ(j["incumbent_record"]["id"], "c004");
  EXPECT_EQ(j["candidates_total"], 30);
  EXPECT_EQ(j["pages"], 6);
  ASSERT_EQ(j["candidates_newest_first"].size(), 5u);
  EXPECT_EQ(j["candidates_newest_first"][0]["id"], "c030");
  EXPECT_NE(first.text.find("page 2"), std::string::npos);
  EXPECT_LT(first.text.find("\"incumbent_record\""), first.text.find("\"candidates_newest_first\""));
  auto last = nlohmann::json::parse(host.call("ledger", {{"page", 6}}).text);
  ASSERT_EQ(last["candidates_newest_first"].size(), 5u);
  EXPECT_EQ(last["candidates_newest_first"][4]["id"], "c001");
  EXPECT_FALSE(last.contains("older"));
  EXPECT_TRUE(nlohmann::json::parse(host.call("ledger", {{"page", 9}}).text)["candidates_newest_first"].empty());
  EXPECT_TRUE(host.call("ledger", {{"page", 0}}).is_error);
  EXPECT_TRUE(host.call("ledger", {{"per_page", 50}}).is_error);
  // The reader is the schema's (agent/tool_args.h): a wrong type or a misspelt key is refused, not
  // read as the default; the schema shows the same ranges.
  EXPECT_EQ(host.call("ledger", {{"page", "2"}}).text, "ledger: argument \"page\" must be an integer of at least 1");
  EXPECT_EQ(host.call("ledger", {{"pages", 2}}).data["error"], "bad_arguments");
  for (const auto& t : host.tools()) {
    if (t.name == "ledger") {
      EXPECT_EQ(t.input_schema["properties"]["per_page"]["maximum"], 20) << t.input_schema.dump();
    }
  }
}

TEST(BackendFactory, UnknownKindListsKnownOnes) {
  auto b = make_backend("gpt-9:x");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("scripted:<file.json>"), std::string::npos);
  EXPECT_FALSE(make_backend("scripted:").ok());
  EXPECT_FALSE(make_backend("scripted:/nonexistent/script.json").ok());
}

TEST(GitWorkspace, CommitDiffReset) {
  auto d = fs::make_temp_dir(std::filesystem::temp_directory_path(), "kda-gitws");
  ASSERT_TRUE(d.ok());
  GitWorkspace ws(*d / "ws", *d / "git");
  ASSERT_TRUE(ws.init().ok());
  ASSERT_TRUE(fs::write_file_atomic(*d / "ws" / "a.txt", "1").ok());
  auto c1 = ws.commit_all("one");
  ASSERT_TRUE(c1.ok()) << c1.status().message();
  ASSERT_TRUE(fs::write_file_atomic(*d / "ws" / "a.txt", "2").ok());
  ASSERT_TRUE(fs::write_file_atomic(*d / "ws" / "b.txt", "new").ok());
  auto c2 = ws.commit_all("two");
  ASSERT_TRUE(c2.ok());
  auto changed = ws.changed_paths(*c1, *c2);
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(*changed, (std::vector<std::string>{"a.txt", "b.txt"}));
  ASSERT_TRUE(fs::write_file_atomic(*d / "ws" / "junk.txt", "x").ok());
  ASSERT_TRUE(ws.reset_to(*c1).ok());
  EXPECT_EQ(*fs::read_file(*d / "ws" / "a.txt"), "1");
  EXPECT_FALSE(std::filesystem::exists(*d / "ws" / "b.txt"));
  EXPECT_FALSE(std::filesystem::exists(*d / "ws" / "junk.txt"));
  // Ignore rules planted in the work tree do not hide files from kda's commits.
  ASSERT_TRUE(fs::write_file_atomic(*d / "ws" / ".gitignore", "*\n").ok());
  ASSERT_TRUE(fs::write_file_atomic(*d / "ws" / "hidden.cc", "x").ok());
  auto c3 = ws.commit_all("three");
  ASSERT_TRUE(c3.ok());
  auto changed3 = ws.changed_paths(*c1, *c3);
  ASSERT_TRUE(changed3.ok());
  EXPECT_EQ(*changed3, (std::vector<std::string>{".gitignore", "hidden.cc"}));
  EXPECT_FALSE(std::filesystem::exists(*d / "ws" / ".git"));
  ASSERT_TRUE(ws.reset_to(*c1).ok());
  auto empty = ws.commit_all("nothing changed");
  ASSERT_TRUE(empty.ok());
  EXPECT_NE(*empty, *c1);
  std::filesystem::remove_all(*d);
}

// Writer lanes' work trees: each at the same commit with its own index and HEAD, commits the run's
// repository sees, no .git file in the tree, kept by a ref after the tree and its record are gone;
// a leftover work tree (a killed round's) is replaced.
TEST(GitWorkspace, WorkTreesOfTheirOwnForLanes) {
  auto d = fs::make_temp_dir(std::filesystem::temp_directory_path(), "kda-gitwt");
  ASSERT_TRUE(d.ok());
  GitWorkspace ws(*d / "ws", *d / "git");
  ASSERT_TRUE(ws.init().ok());
  ASSERT_TRUE(fs::write_file_atomic(*d / "ws" / "a.txt", "1").ok());
  auto c0 = ws.commit_all("zero");
  ASSERT_TRUE(c0.ok());
  ASSERT_TRUE(ws.prune_worktrees().ok());
  auto l1 = ws.add_worktree(*d / "lanes" / "lane1", *c0);
  auto l2 = ws.add_worktree(*d / "lanes" / "lane2", *c0);
  ASSERT_TRUE(l1.ok()) << l1.status().message();
  ASSERT_TRUE(l2.ok()) << l2.status().message();
  EXPECT_EQ(*fs::read_file(*d / "lanes/lane2/a.txt"), "1");
  EXPECT_FALSE(std::filesystem::exists(*d / "lanes/lane1/.git"));
  ASSERT_TRUE(fs::write_file_atomic(*d / "lanes/lane1/b.txt", "lane 1").ok());
  ASSERT_TRUE(fs::write_file_atomic(*d / "lanes/lane2/a.txt", "lane 2").ok());
  auto c1 = l1->commit_all("lane 1");
  auto c2 = l2->commit_all("lane 2");
  ASSERT_TRUE(c1.ok()) << c1.status().message();
  ASSERT_TRUE(c2.ok()) << c2.status().message();
  EXPECT_EQ(*ws.changed_paths(*c0, *c1), std::vector<std::string>{"b.txt"});
  EXPECT_EQ(*ws.changed_paths(*c0, *c2), std::vector<std::string>{"a.txt"});
  EXPECT_EQ(*ws.head(), *c0) << "the run's own HEAD did not move";
  ASSERT_TRUE(l1->keep("kda/rounds/001/lane1", *c1).ok());
  std::filesystem::remove_all(*d / "lanes");
  ASSERT_TRUE(ws.prune_worktrees().ok());
  EXPECT_FALSE(std::filesystem::exists(*d / "git/worktrees"));
  EXPECT_TRUE(ws.reset_to(*c1).ok()) << "a lane's commit outlives its work tree";
  EXPECT_EQ(*fs::read_file(*d / "ws/b.txt"), "lane 1");
  // A work tree left by a killed round (its record still there) is replaced, not refused.
  auto again = ws.add_worktree(*d / "lanes" / "lane1", *c0);
  ASSERT_TRUE(again.ok()) << again.status().message();
  auto replaced = ws.add_worktree(*d / "lanes" / "lane1", *c1);
  ASSERT_TRUE(replaced.ok()) << replaced.status().message();
  EXPECT_EQ(*replaced->head(), *c1);
  std::filesystem::remove_all(*d);
}

}  // namespace
}  // namespace kda::loop

namespace kda::loop {
namespace {

TEST(Phases, NamesRoundTripAndUnknownNamesAreRefused) {
  for (Phase p : {Phase::kSetup, Phase::kPlan, Phase::kRound, Phase::kFinalize, Phase::kDone, Phase::kStopped})
    EXPECT_EQ(parse_phase(phase_name(p)), p);
  for (Step s : {Step::kNone, Step::kMeasure, Step::kDraft, Step::kReview, Step::kWriter, Step::kVerify, Step::kDecide,
                 Step::kCheck})
    EXPECT_EQ(parse_step(step_name(s)), s);
  EXPECT_FALSE(parse_phase("rounds"));
  EXPECT_EQ(Position::parse("round/verify"), (Position{Phase::kRound, Step::kVerify}));
  EXPECT_EQ(Position::parse("done/"), (Position{Phase::kDone, Step::kNone}));
  EXPECT_FALSE(Position::parse("plan/verify"));  // not one of plan's steps
  EXPECT_FALSE(Position::parse("round"));        // a round position has a step
  EXPECT_FALSE(Position::parse(""));
}

TEST(Phases, TheMoveTableIsTheLoop) {
  const Position writer{Phase::kRound, Step::kWriter}, verify{Phase::kRound, Step::kVerify},
      review{Phase::kRound, Step::kReview}, decide{Phase::kRound, Step::kDecide}, check{Phase::kFinalize, Step::kCheck},
      done{Phase::kDone, Step::kNone}, stopped{Phase::kStopped, Step::kNone}, draft{Phase::kPlan, Step::kDraft},
      plan_review{Phase::kPlan, Step::kReview}, setup{Phase::kSetup, Step::kMeasure};
  for (auto [from, to] : {std::pair{setup, draft},
                          {draft, plan_review},
                          {plan_review, draft},
                          {plan_review, writer},
                          {writer, verify},
                          {verify, review},
                          {review, decide},
                          {decide, writer},
                          {writer, check},
                          {check, done},
                          {check, writer},
                          {verify, stopped},
                          {stopped, verify},
                          {stopped, draft}})
    EXPECT_TRUE(may_move(from, to)) << from.str() << " -> " << to.str();
  for (auto [from, to] : {std::pair{writer, review},
                          {verify, decide},
                          {draft, writer},
                          {decide, done},
                          {done, writer},
                          {done, stopped},
                          {stopped, stopped},
                          {stopped, done},
                          {setup, writer}})
    EXPECT_FALSE(may_move(from, to)) << from.str() << " -> " << to.str();
}

TEST(Phases, RunStateMovesOnlyAlongTheTable) {
  RunState s;
  s.phase = Phase::kRound;
  s.step = Step::kWriter;
  EXPECT_TRUE(s.move_to(Phase::kRound, Step::kVerify).ok());
  const Status skip = s.move_to(Phase::kRound, Step::kDecide);  // the review cannot be skipped
  EXPECT_FALSE(skip.ok());
  EXPECT_NE(skip.message().find("round/verify to round/decide"), std::string::npos) << skip.message();
  EXPECT_EQ(s.at(), (Position{Phase::kRound, Step::kVerify}));  // unchanged by the refused move
  nlohmann::json j = s.to_json();
  EXPECT_EQ(j["phase"], "round");
  EXPECT_EQ(j["step"], "verify");
  j["step"] = "vrify";
  auto bad = RunState::from_json(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown phase/step 'round/vrify'"), std::string::npos);
}

}  // namespace
}  // namespace kda::loop

namespace kda::loop {
namespace {

TEST(RoundDecision, AcceptsOnlyAVerifiedImprovedAdvancedRound) {
  const RoundEvidence good{
      .verified = true, .improvement = true, .decision = Decision::kContinue, .progress = Progress::kAdvanced};
  EXPECT_TRUE(decide_round(good).accepted);
  RoundEvidence unverified = good, same = good, stalled = good;
  unverified.verified = false;
  same.improvement = false;
  stalled.progress = Progress::kStalled;
  for (const RoundEvidence& e : {unverified, same, stalled}) EXPECT_FALSE(decide_round(e).accepted);
  EXPECT_EQ(decide_round(good).next, RoundDecision::Next::kNextRound);
}

TEST(RoundDecision, StallsCountAndStopBeforeTheReviewersWord) {
  RoundEvidence e{
      .verified = true, .improvement = true, .decision = Decision::kComplete, .progress = Progress::kStalled};
  e.stalls_before = 1;
  RoundDecision d = decide_round(e);
  EXPECT_EQ(d.stalls, 2);
  EXPECT_EQ(d.next, RoundDecision::Next::kCompletionCheck);
  e.stalls_before = 2;
  e.decision = Decision::kStop;
  d = decide_round(e);
  EXPECT_EQ(d.next, RoundDecision::Next::kStop);
  EXPECT_EQ(d.stop_reason, "three stalled rounds in a row");  // the stall rule comes first
  e.progress = Progress::kAdvanced;
  d = decide_round(e);
  EXPECT_EQ(d.stalls, 0);
  EXPECT_EQ(d.stop_reason, "the reviewer decided STOP");
}

TEST(RoundDecision, ACompletionCheckThatCannotPassIsNotRun) {
  const IncumbentScore inc{.id = "c003", .speedup = 1.1, .ci_high = 1.2, .claim_tolerance = 0.25};
  const nlohmann::json failed_same = {{"met", false}, {"incumbent", "c003"}};
  EXPECT_FALSE(futile_completion(true, failed_same, inc, 9.0));  // an accepted round is always checked
  auto same = futile_completion(false, failed_same, inc, 1.0);
  ASSERT_TRUE(same);
  EXPECT_NE(same->find("unchanged since the last completion check"), std::string::npos);
  auto low = futile_completion(false, nullptr, inc, 1.5);  // at most max(1.2, 1.1 * 1.25) = 1.375
  ASSERT_TRUE(low);
  EXPECT_NE(low->find("at most 1.375x"), std::string::npos) << *low;
  EXPECT_FALSE(futile_completion(false, {{"met", false}, {"incumbent", "c002"}}, inc, 1.3));
}

// Issue 45: a round writes its best single configuration alone only where the guard found it slower
// than the baseline on no visible workload (the tolerance the guard's routes meet); 0.9x somewhere is
// enough to write the dispatcher, however much faster the best single is elsewhere.
TEST(TunerWriter, TheBestSingleAloneOnlyWhereTheGuardFoundItSlowerNowhere) {
  tune::TuneResult r;
  r.dispatcher_passed = true;
  r.dispatcher_geomean_ms = 1.0;
  r.best_single_geomean_ms = 0.9;
  r.dispatcher_vs_best_single = 0.95;  // head-to-head: the best single is faster
  r.guard = {{"ran", true}, {"best_single_worst_ratio", 1.02}};
  EXPECT_FALSE(emit_dispatcher(r, TunerStage::kCoarse));
  EXPECT_TRUE(emit_dispatcher(r, TunerStage::kDispatcher));
  r.guard["best_single_worst_ratio"] = 0.9;  // above the loop's 0.8 floor, below the guard's tolerance
  EXPECT_TRUE(emit_dispatcher(r, TunerStage::kCoarse));
  EXPECT_TRUE(emit_dispatcher(r, TunerStage::kRefine));
  r.guard["best_single_worst_ratio"] = 1 - tune::kGuardTolerance / 2;  // within the tolerance
  EXPECT_FALSE(emit_dispatcher(r, TunerStage::kRefine));
  r.guard["ran"] = false;  // no guard (no baseline): the head-to-head decides
  r.guard["best_single_worst_ratio"] = 0.5;
  EXPECT_FALSE(emit_dispatcher(r, TunerStage::kRefine));
  r.dispatcher_passed = false;  // a dispatcher that failed is never written
  r.guard = {{"ran", true}, {"best_single_worst_ratio", 0.5}};
  EXPECT_FALSE(emit_dispatcher(r, TunerStage::kCoarse));
}

// verify.json and verdict.json through their one serialiser: what is written reads back the same, a
// protected-file violation keeps its short form, unknown verdict names read as CONTINUE / STALLED.
TEST(RoundRecord, VerifyAndVerdictRecordsReadBackWhatWasWritten) {
  VerifyRecord r;
  r.add_check("finish_round", true, "called");
  r.add_check("all_passed", false, "3/4 PASSED");
  r.claims.push_back({.metric = "geomean_speedup", .claimed = 2.0, .status = "false", .detail = "claimed 2"});
  r.claims.push_back({.metric = "speedup",
                      .claimed = 1.1,
                      .workload = "abc",
                      .status = "confirmed",
                      .measured = 1.3,
                      .accepted_range = eval::Interval{1.2, 1.4},
                      .conservative = true});
  r.geomean = 1.7;
  r.incumbent_speedup = 1.5;
  r.eval = {{"all_passed", false}};
  r.geomean_ci95 = eval::Interval{1.6, 1.8};
  r.lane = 2;
  r.lanes = {{.lane = 1, .commit = "aa", .geomean = 1.2},
             {.lane = 2, .commit = "bb", .verified = true, .chosen = true}};
  EXPECT_EQ(r.rejections, std::vector<std::string>{"all_passed: 3/4 PASSED"});
  EXPECT_TRUE(r.finished());
  EXPECT_FALSE(r.all_passed());
  ASSERT_NE(r.first_failed(), nullptr);
  EXPECT_EQ(r.first_failed()->name, "all_passed");
  const nlohmann::json j = r.to_json();
  auto back = VerifyRecord::from_json(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->to_json(), j);
  EXPECT_EQ(back->claims[1].measured, 1.3);
  EXPECT_TRUE(back->claims[1].conservative);
  EXPECT_FALSE(back->claims[0].measured.has_value());
  EXPECT_EQ(back->lanes[1].commit, "bb");
  EXPECT_TRUE(back->lanes[1].chosen);
  EXPECT_EQ(j["geomean_ci95"], nlohmann::json::array({1.6, 1.8}));

  VerifyRecord stopped;
  stopped.add_check("protected_files", false, "state.json changed");
  stopped.violation = "state.json changed";
  EXPECT_EQ(stopped.to_json().size(), 3u);  // checks, verified, violation: nothing was measured
  EXPECT_EQ(VerifyRecord::from_json(stopped.to_json())->violation, "state.json changed");
  EXPECT_FALSE(VerifyRecord::from_json(nlohmann::json::array()).ok());

  VerdictRecord v{.decision = Decision::kStop, .progress = Progress::kRegressed, .well_formed = true};
  auto vb = VerdictRecord::from_json(v.to_json());
  ASSERT_TRUE(vb.ok());
  EXPECT_EQ(vb->decision, Decision::kStop);
  EXPECT_EQ(vb->progress, Progress::kRegressed);
  auto odd = VerdictRecord::from_json({{"decision", "stop"}, {"progress", "GREAT"}});
  EXPECT_EQ(odd->decision, Decision::kContinue);
  EXPECT_EQ(odd->progress, Progress::kStalled);
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("kda_round_record_{}", ::getpid());
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(fs::write_file_atomic(dir / "verify.json", "[1]").ok());
  auto bad = VerifyRecord::read(dir / "verify.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("verify.json: not a JSON object"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(Verdict, NamesReadBothWays) {
  for (Decision d : {Decision::kContinue, Decision::kComplete, Decision::kStop})
    EXPECT_EQ(decision_from_name(decision_name(d)), d);
  for (Progress p : {Progress::kAdvanced, Progress::kStalled, Progress::kRegressed})
    EXPECT_EQ(progress_from_name(progress_name(p)), p);
  EXPECT_FALSE(decision_from_name("Continue").has_value());
}

}  // namespace
}  // namespace kda::loop
