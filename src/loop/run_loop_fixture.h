// Test fixture of the loop's state-machine tests: scripted agents and a fake evaluator (speedups
// read from a "// fake-speedup: X" marker in the candidate's source). Included by run_loop_test.cc
// and run_loop_resume_test.cc only.
#pragma once

#include "loop/run_loop.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>

#include "agent/scripted_backend.h"
#include "audit/audit_log.h"
#include "task/solution.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kda::loop::testing_fixture {

namespace stdfs = std::filesystem;
using nlohmann::json;

inline const stdfs::path kPack = stdfs::path(KDA_SOURCE_DIR) / "tasks/host/gemm";

// Fake evaluator: "// fake-speedup: X" in a source -> every workload PASSED at speedup X (one named
// by "// fake-slow-workload: <uuid> Y" at Y; the geomean stays X); "// fake-fail" -> the first
// workload is INCORRECT_NUMERICAL, "// fake-incorrect-workload: <uuid>" that one. The workloads: dev,
// all, or a uuid list.
struct FakeEval {
  int calls = 0;
  int fail_at = -1;  // the call (1-based) that fails, as if the process were killed there
  std::vector<std::string> workload_sets;
  // With intervals: every report has a 95 % interval of +-3 % around its geomean, so the loop's
  // head-to-head runs. Head-to-head evaluations (a baseline given) read the candidate's fake speedup
  // over the baseline's, or the next of `head_to_head` while it lasts (noise, scripted).
  bool with_intervals = false;
  std::vector<double> head_to_head;
  int head_to_head_calls = 0;
  static double fake_speedup(const task::Solution& s) {
    double speedup = 1.0;
    for (const auto& src : s.sources) {
      auto at = src.content.find("// fake-speedup: ");
      if (at != std::string::npos) speedup = std::stod(src.content.substr(at + 17));
    }
    return speedup;
  }
  Result<eval::EvalReport> operator()(const task::TaskPack& pack, const task::Solution& s, const eval::EvalOptions& o) {
    ++calls;
    if (calls == fail_at) return Status::io("injected evaluator failure");
    workload_sets.push_back(o.workloads);
    double speedup = fake_speedup(s);
    if (o.baseline) {
      speedup /= fake_speedup(*o.baseline);
      if (static_cast<size_t>(head_to_head_calls) < head_to_head.size()) speedup = head_to_head[head_to_head_calls];
      ++head_to_head_calls;
    }
    bool fail = false;
    for (const auto& src : s.sources) fail = fail || src.content.find("// fake-fail") != std::string::npos;
    eval::EvalReport r;
    r.definition = pack.definition.name;
    r.solution = s.name;
    r.backend = "host";
    r.baseline_name = "fake-baseline";  // the speedups are against a baseline: no_workload_slower applies
    r.seed = 42;
    std::vector<std::string> uuids = pack.dev_uuids;
    if (o.workloads == "all") {
      uuids.clear();
      for (const auto& w : pack.workloads) uuids.push_back(w.uuid);
    } else if (o.workloads != "dev") {
      uuids = util::split_list(o.workloads);  // uuid[,uuid...]
    }
    r.all_passed = !fail;
    for (const auto& u : uuids) {
      eval::WorkloadResult w;
      w.uuid = u;
      w.axes = pack.workload(u)->axes;
      w.baseline_ms = 1.0;
      w.latency_ms = 1.0 / speedup;
      w.speedup = speedup;
      for (const auto& src : s.sources)  // "// fake-slow-workload: <uuid> X": that workload alone at X
        if (auto at = src.content.find("// fake-slow-workload: " + u + " "); at != std::string::npos) {
          w.speedup = std::stod(src.content.substr(at + 24 + u.size()));
          w.latency_ms = 1.0 / w.speedup;
        }
      for (const auto& src : s.sources)  // "// fake-incorrect-workload: <uuid>": that workload alone INCORRECT
        if (src.content.find("// fake-incorrect-workload: " + u + "\n") != std::string::npos) {
          w.verdict = eval::Verdict::kIncorrectNumerical;
          w.reason = "numerical";
          w.speedup = 0;
          r.all_passed = false;
        }
      for (const auto& src : s.sources)  // "// fake-tolerance-used: X": the error budget the check spent
        if (auto at = src.content.find("// fake-tolerance-used: "); at != std::string::npos)
          w.kda["tolerance_used"] = std::stod(src.content.substr(at + 24));
      if (fail && r.workloads.empty()) {
        w.verdict = eval::Verdict::kIncorrectNumerical;
        w.reason = "numerical";
        w.speedup = 0;
      }
      r.workloads.push_back(w);
    }
    r.score_geomean = r.all_passed ? speedup : 0;
    r.score_mean = r.score_geomean;
    if (with_intervals && r.all_passed) r.geomean_ci = eval::Interval{0.97 * speedup, 1.03 * speedup};
    r.wall_s = 1;
    return r;
  }
};

// The sources of the run's final/ solution directory, concatenated (solution.json names them).
inline Result<std::string> final_sources(const stdfs::path& run) {
  KDA_ASSIGN_OR_RETURN(task::Solution s, task::load_solution(run / "final"));
  std::string all;
  for (const auto& f : s.sources) all += f.content;
  return all;
}

inline json writer_session(const std::string& phase, int index, json steps, const std::string& final_text = "done",
                           int tokens = 0) {
  json s = {{"role", "writer"}, {"phase", phase}, {"index", index}, {"steps", steps}, {"final_text", final_text}};
  if (tokens > 0) s["usage"] = {{"input_tokens", tokens}, {"output_tokens", 0}, {"cost_usd", tokens * 1e-5}};
  return s;
}
inline json reviewer_session(const std::string& phase, int index, const std::string& final_text, int tokens = 0) {
  json s = {{"role", "reviewer"}, {"phase", phase}, {"index", index}, {"final_text", final_text}};
  if (tokens > 0) s["usage"] = {{"input_tokens", tokens}, {"output_tokens", 0}};
  return s;
}
inline json write_kernel(double speedup, const std::string& extra = "") {
  return {{"write_file",
           {{"path", "kernel.cc"},
            {"content", "// candidate\n// fake-speedup: " + std::to_string(speedup) + "\n" + extra +
                            "int run() { return 0; }\n"}}}};
}
inline json finish(const std::string& summary, json claims = json::array()) {
  return {{"tool", "finish_round"}, {"arguments", {{"summary", summary}, {"claims", claims}}}};
}
inline json geomean_claim(double v) { return {{"metric", "geomean_speedup"}, {"value", v}}; }

// Plan phase shared by the scenarios: one revision, then approval.
inline json plan_sessions() {
  return json::array({
      writer_session("plan", 1, json::array(), "Plan v1: loop order.\nCRITERION: the kernel stays readable"),
      reviewer_session("plan_review", 1, "Rank the directions.\nPLAN: REVISE"),
      writer_session("plan", 2,
                     json::array({{{"write_file",
                                    {{"path", "../scratch/plan.md"},
                                     {"content",
                                      "Plan v2: 1. i-k-j order 2. blocking\nCRITERION: no "
                                      "special cases"}}}}})),
      reviewer_session("plan_review", 2, "Good.\nPLAN: APPROVE"),
  });
}

class RunLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-loop");
    ASSERT_TRUE(d.ok());
    tmp_ = *d;
    run_ = tmp_ / "run";
  }
  void TearDown() override { stdfs::remove_all(tmp_); }

  LoopOptions options(const std::string& target = "3x") {
    LoopOptions o;
    o.task = kPack;
    o.writer = "writer";
    o.reviewer = "reviewer";
    o.target = target;
    o.max_rounds = 6;
    return o;
  }
  // Two rounds writing kernels of speedup `first` and `second`, both reviewed ADVANCED, with
  // intervals and the head-to-head ratios the fake evaluator gives in turn.
  Result<RunOutcome> two_timed_rounds(double first, double second, std::vector<double> head_to_head) {
    for (const auto& p : plan_sessions()) sessions_.push_back(p);
    sessions_.push_back(writer_session("round", 1, {write_kernel(first), finish("round 1")}));
    sessions_.push_back(reviewer_session("review", 1, "Measured.\nDECISION: CONTINUE\nPROGRESS: ADVANCED"));
    sessions_.push_back(writer_session("round", 2, {write_kernel(second), finish("round 2")}));
    sessions_.push_back(reviewer_session("review", 2, "Measured.\nDECISION: STOP\nPROGRESS: ADVANCED"));
    fake_.with_intervals = true;
    fake_.head_to_head = std::move(head_to_head);
    LoopOptions o = options();
    o.max_rounds = 2;
    return start_run(run_, o, env());
  }
  LoopEnv env() {
    LoopEnv e;
    e.runner_binary = "/nonexistent/kda-runner";
    e.evaluate = [this](const task::TaskPack& p, const task::Solution& s, const eval::EvalOptions& o) {
      // The loop's evaluations take turns (a round's lanes write at the same time): count any overlap.
      if (++evals_in_flight_ > 1) ++evals_overlapped_;
      if (eval_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(eval_ms_));
      auto r = fake_(p, s, o);
      --evals_in_flight_;
      return r;
    };
    e.make_backend = [this](const std::string& spec) -> Result<std::unique_ptr<agent::Backend>> {
      ++sessions_made_;
      json all = json::array();
      for (const auto& s : sessions_) all.push_back(s);
      auto b = agent::make_scripted_backend(json{{"sessions", all}});
      if (!b.ok()) return b.status();
      if (spec != "writer" && spec != "reviewer") return Status::bad_input("unknown backend " + spec);
      return std::unique_ptr<agent::Backend>(new Counting(std::move(*b), this));
    };
    e.status = [this](const std::string& line) { status_lines_.push_back(line); };
    return e;
  }
  // Counts sessions and fails the Nth one, as if the process died during it.
  class Counting final : public agent::Backend {
   public:
    Counting(std::unique_ptr<agent::Backend> inner, RunLoopTest* t) : inner_(std::move(inner)), t_(t) {}
    std::string name() const override { return "counting"; }
    Result<agent::SessionResult> run_session(const agent::SessionRequest& r) override {
      {
        std::lock_guard<std::mutex> hold(t_->sessions_mu_);  // a round's lanes run at the same time
        ++t_->session_calls_;
        t_->session_log_.push_back(std::string(agent::role_name(r.role)) + ":" + r.phase + ":" +
                                   std::to_string(r.index));
        t_->prompts_.push_back(r.prompt);
        if (t_->session_calls_ == t_->fail_session_at_) return Status::io("injected backend failure");
      }
      return inner_->run_session(r);
    }

   private:
    std::unique_ptr<agent::Backend> inner_;
    RunLoopTest* t_;
  };

  json read_json(const stdfs::path& p) { return json::parse(*fs::read_file(p)); }
  // A fresh run in the same test: no run directory, no sessions or evaluations counted yet (the
  // scripted sessions stay).
  void start_over() {
    stdfs::remove_all(run_);
    session_calls_ = 0;
    session_log_.clear();
    prompts_.clear();
    fake_ = FakeEval{};
  }

  stdfs::path tmp_, run_;
  FakeEval fake_;
  std::atomic<int> evals_in_flight_{0}, evals_overlapped_{0};
  int eval_ms_ = 0;  // each fake evaluation takes this long
  std::mutex sessions_mu_;
  std::vector<json> sessions_;
  int sessions_made_ = 0;
  int session_calls_ = 0;
  int fail_session_at_ = -1;
  std::vector<std::string> session_log_;
  std::vector<std::string> prompts_;  // every session's prompt, in order
  std::vector<std::string> status_lines_;
};

// The scenario: improve, a false claim the verifier rejects, a stalled round with a garbage
// verdict, a further improvement, the reviewer completes, the completion check passes.
inline void add_full_scenario(std::vector<json>& s) {
  for (const auto& p : plan_sessions()) s.push_back(p);
  s.push_back(writer_session("round", 1,
                             {write_kernel(2.0), {{"tool", "evaluate"}}, finish("i-k-j order", {geomean_claim(2.0)})}));
  s.push_back(reviewer_session("review", 1, "Measured 2x.\nDECISION: CONTINUE\nPROGRESS: ADVANCED"));
  s.push_back(writer_session("round", 2, {write_kernel(3.0), finish("blocking", {geomean_claim(10.0)})}));
  s.push_back(reviewer_session("review", 2, "Claims 10x!\nDECISION: CONTINUE\nPROGRESS: ADVANCED"));
  s.push_back(writer_session("round", 3, {finish("tried unrolling, no gain")}));
  s.push_back(reviewer_session("review", 3, "meh, keep going i guess"));
  s.push_back(writer_session("round", 4, {write_kernel(4.0), finish("blocking done right", {geomean_claim(4.1)})}));
  s.push_back(reviewer_session("review", 4, "DECISION: COMPLETE\nPROGRESS: ADVANCED"));
}

inline void expect_full_scenario_result(const stdfs::path& run, const RunOutcome& o) {
  EXPECT_EQ(o.phase, "done") << o.stop_reason;
  EXPECT_TRUE(o.criteria_met);
  EXPECT_EQ(o.incumbent, "c004");
  EXPECT_DOUBLE_EQ(o.incumbent_speedup, 4.0);
  EXPECT_EQ(o.rounds, 4);
  auto ledger = load_ledger(run / "ledger.json");
  ASSERT_TRUE(ledger.ok());
  ASSERT_EQ(ledger->candidates.size(), 5u);
  EXPECT_EQ(ledger->incumbent, "c004");
  EXPECT_TRUE(ledger->find("c001")->accepted);
  EXPECT_FALSE(ledger->find("c002")->accepted);
  EXPECT_FALSE(ledger->find("c003")->accepted);
  EXPECT_TRUE(ledger->find("c004")->accepted);
  EXPECT_EQ(ledger->find("c004")->parent, "c001");
  auto v2 = json::parse(*fs::read_file(run / "rounds/002/verify.json"));
  EXPECT_FALSE(v2["verified"].get<bool>());
  EXPECT_EQ(v2["claims"][0]["status"], "false");
  auto v3 = json::parse(*fs::read_file(run / "rounds/003/verdict.json"));
  EXPECT_FALSE(v3["well_formed"].get<bool>());
  EXPECT_EQ(v3["decision"], "CONTINUE");
  auto state = load_state(run / "state.json");
  ASSERT_TRUE(state.ok());
  bool complained = false;
  for (const auto& c : state->complaints) complained = complained || c.find("round 3: malformed") != std::string::npos;
  EXPECT_TRUE(complained);
  auto final_solution = final_sources(run);
  ASSERT_TRUE(final_solution.ok());
  EXPECT_NE(final_solution->find("fake-speedup: 4.0"), std::string::npos);
  auto traces = fs::read_file(run / "final/traces.jsonl");
  ASSERT_TRUE(traces.ok());
  EXPECT_EQ(std::count(traces->begin(), traces->end(), '\n'), 8);  // all workloads
  auto plan = json::parse(*fs::read_file(run / "plan/plan.json"));
  EXPECT_NE(plan["plan"].get<std::string>().find("Plan v2"), std::string::npos);
  EXPECT_EQ(plan["criteria"]["reviewer"][0], "no special cases");
  auto v = audit::verify(run / "audit.jsonl", state->audit_head);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok());
}

}  // namespace kda::loop::testing_fixture
