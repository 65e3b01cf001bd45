// `kda run --lanes N`: N writer sessions per round from the same incumbent, each verified on its
// own; the best verified lane is the round's candidate, the reviewer sees every lane, the others stay
// in the ledger, and the audit log records each lane. Scripted agents and the fake evaluator.
#include "loop/run_loop_fixture.h"

namespace kda::loop::testing_fixture {
namespace {

std::vector<json> audit_records(const stdfs::path& run) {
  std::vector<json> out;
  std::istringstream in(*fs::read_file(run / "audit.jsonl"));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

// Two lanes from c000: lane 1 reaches 1.5x, lane 2 2.5x; the reviewer completes; target 2x.
void add_two_lanes(std::vector<json>& s, json lane1, json lane2) {
  for (const auto& p : plan_sessions()) s.push_back(p);
  s.push_back(writer_session("round.lane1", 1, std::move(lane1)));
  s.push_back(writer_session("round.lane2", 1, std::move(lane2)));
  s.push_back(reviewer_session("review", 1, "Two lanes measured.\nDECISION: COMPLETE\nPROGRESS: ADVANCED"));
}

TEST_F(RunLoopTest, TwoLanesEndWithTheBetterLane) {
  add_two_lanes(sessions_, {write_kernel(1.5), {{"tool", "evaluate"}}, finish("loop order", {geomean_claim(1.5)})},
                {write_kernel(2.5), finish("blocking", {geomean_claim(2.5)})});
  LoopOptions o = options("2x");
  o.lanes = 2;
  auto r = start_run(run_, o, env());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->phase, "done") << r->stop_reason;
  EXPECT_TRUE(r->criteria_met);
  EXPECT_EQ(r->incumbent, "c001");
  EXPECT_DOUBLE_EQ(r->incumbent_speedup, 2.5);
  auto final_solution = final_sources(run_);
  ASSERT_TRUE(final_solution.ok());
  EXPECT_NE(final_solution->find("fake-speedup: 2.5"), std::string::npos);

  // Each lane verified on its own; the round's verify.json is lane 2's and lists both.
  EXPECT_DOUBLE_EQ(read_json(run_ / "rounds/001/lanes/1/verify.json")["geomean"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(read_json(run_ / "rounds/001/lanes/2/verify.json")["geomean"].get<double>(), 2.5);
  const json v = read_json(run_ / "rounds/001/verify.json");
  EXPECT_EQ(v["lane"], 2);
  ASSERT_EQ(v["lanes"].size(), 2u);
  EXPECT_FALSE(v["lanes"][0]["chosen"].get<bool>());
  EXPECT_TRUE(v["lanes"][1]["chosen"].get<bool>());
  EXPECT_TRUE(v["lanes"][0]["improvement"].get<bool>());  // an improvement too, just not the best
  EXPECT_NE(read_json(run_ / "rounds/001/finish.json")["summary"].get<std::string>().find("blocking"),
            std::string::npos);

  // Both lanes' writers started from c000; the second lane's prompt says which lane it is and names its
  // own work tree and directory (the lanes write at the same time, so in either order).
  ASSERT_GE(prompts_.size(), 7u);
  const std::string& lane2_prompt = prompts_[4].find("## Lane 2 of 2") != std::string::npos ? prompts_[4] : prompts_[5];
  EXPECT_NE(lane2_prompt.find("## Lane 2 of 2"), std::string::npos);
  EXPECT_NE(lane2_prompt.find("rounds/001/lanes/2"), std::string::npos) << "this round: names the lane's directory";
  EXPECT_NE(lane2_prompt.find("Your workspace: " + (run_ / "lanes/lane2").string()), std::string::npos);
  EXPECT_FALSE(stdfs::exists(run_ / "lanes/lane2")) << "a lane's work tree goes when its writer is done";
  // The reviewer saw every lane.
  const std::string& review_prompt = prompts_[6];
  EXPECT_NE(review_prompt.find("- lane 1: verified yes, geomean 1.500x"), std::string::npos) << review_prompt;
  EXPECT_NE(review_prompt.find("- lane 2 (chosen): verified yes, geomean 2.500x"), std::string::npos);

  // The ledger keeps the lane not chosen; the audit log records each lane's verdict and the choice.
  auto ledger = load_ledger(run_ / "ledger.json");
  ASSERT_TRUE(ledger.ok());
  ASSERT_NE(ledger->find("c001.lane1"), nullptr);
  EXPECT_FALSE(ledger->find("c001.lane1")->accepted);
  EXPECT_DOUBLE_EQ(ledger->find("c001.lane1")->eval["geomean"].get<double>(), 1.5);
  EXPECT_TRUE(ledger->find("c001")->accepted);
  EXPECT_EQ(ledger->find("c001")->notes.rfind("lane 2 of 2: ", 0), 0u);
  int lane_verdicts = 0, chosen = 0;
  for (const auto& rec : audit_records(run_)) {
    const json& d = rec["data"];
    if (rec["type"] == "verdict" && rec["actor"] == "verifier" && d.contains("lane")) ++lane_verdicts;
    if (d.value("event", "") == "lane chosen") {
      ++chosen;
      EXPECT_EQ(d["lane"], 2);
    }
  }
  EXPECT_EQ(lane_verdicts, 2);
  EXPECT_EQ(chosen, 1);
  auto state = load_state(run_ / "state.json");
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->options.lanes, 2);
  auto verified = audit::verify(run_ / "audit.jsonl", state->audit_head);
  ASSERT_TRUE(verified.ok());
  EXPECT_TRUE(verified->ok());
}

// A faster lane whose claim kda does not confirm is not verified: the slower verified lane wins.
TEST_F(RunLoopTest, AnUnverifiedLaneLosesToAVerifiedOne) {
  add_two_lanes(sessions_, {write_kernel(4.0), finish("claims too much", {geomean_claim(10.0)})},
                {write_kernel(2.5), finish("blocking", {geomean_claim(2.5)})});
  LoopOptions o = options("2x");
  o.lanes = 2;
  auto r = start_run(run_, o, env());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->incumbent, "c001");
  EXPECT_DOUBLE_EQ(r->incumbent_speedup, 2.5);
  const json v = read_json(run_ / "rounds/001/verify.json");
  EXPECT_EQ(v["lane"], 2);
  EXPECT_FALSE(v["lanes"][0]["verified"].get<bool>());
  EXPECT_EQ(v["lanes"][0]["rejections"].size(), 1u);
}

// Killed in the second lane's writer session: the resumed run redoes the round's writers from the
// incumbent and ends as the uninterrupted run does.
TEST_F(RunLoopTest, ARunKilledInALaneResumesToTheSameEnd) {
  add_two_lanes(sessions_, {write_kernel(1.5), finish("loop order", {geomean_claim(1.5)})},
                {write_kernel(2.5), finish("blocking", {geomean_claim(2.5)})});
  LoopOptions o = options("2x");
  o.lanes = 2;
  fail_session_at_ = 6;  // 4 plan sessions, then the lanes (at once: the second to start fails)
  auto first = start_run(run_, o, env());
  ASSERT_FALSE(first.ok());
  ASSERT_EQ(session_log_.size(), 6u);
  EXPECT_EQ(session_log_[5].rfind("writer:round.lane", 0), 0u) << session_log_[5];
  fail_session_at_ = -1;
  auto resumed = resume_run(run_, env());
  ASSERT_TRUE(resumed.ok()) << resumed.status().message();
  EXPECT_EQ(resumed->phase, "done") << resumed->stop_reason;
  EXPECT_EQ(resumed->incumbent, "c001");
  EXPECT_DOUBLE_EQ(resumed->incumbent_speedup, 2.5);
  EXPECT_EQ(std::count(session_log_.begin(), session_log_.end(), "writer:round.lane1:1"), 2);
}

// The lanes' writers run at the same time, each in a work tree of its own: both sessions start before
// either ends, neither sees the other's files, and their `evaluate` calls take turns.
TEST_F(RunLoopTest, TheLanesWritersRunAtTheSameTimeInWorkTreesOfTheirOwn) {
  const json other_file = {{"write_file", {{"path", "lane1_notes.txt"}, {"content", "lane 1 only\n"}}}};
  add_two_lanes(sessions_,
                {other_file,
                 write_kernel(1.5),
                 {{"sleep_ms", 400}},
                 {{"tool", "evaluate"}},
                 {{"sleep_ms", 400}},
                 finish("loop order", {geomean_claim(1.5)})},
                {write_kernel(2.5),
                 {{"sleep_ms", 400}},
                 {{"tool", "evaluate"}},
                 {{"sleep_ms", 400}},
                 finish("blocking", {geomean_claim(2.5)})});
  LoopOptions o = options("2x");
  o.lanes = 2;
  eval_ms_ = 100;
  auto r = start_run(run_, o, env());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->incumbent, "c001");
  EXPECT_DOUBLE_EQ(r->incumbent_speedup, 2.5);

  // Both lanes' writer sessions started before either ended; every session record names its lane.
  std::vector<std::string> order;
  for (const auto& rec : audit_records(run_)) {
    const json& d = rec["data"];
    if (rec["type"] == "session" && d.value("phase", "").starts_with("round.lane"))
      order.push_back(d["event"].get<std::string>() + ":" + d["phase"].get<std::string>());
    if (rec["type"] == "agent_event" && rec["actor"] == "writer" && d["kind"] == "tool_call") {
      EXPECT_TRUE(d.contains("lane")) << d.dump();
    }
  }
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[0].rfind("start:", 0), 0u);
  EXPECT_EQ(order[1].rfind("start:", 0), 0u) << order[1];
  EXPECT_EQ(evals_overlapped_.load(), 0) << "evaluations take turns";

  // Lane 2 never saw lane 1's file: its diff is its kernel alone; lane 1's diff has both.
  const std::string diff2 = *fs::read_file(run_ / "rounds/001/lanes/2/diff.patch");
  const std::string diff1 = *fs::read_file(run_ / "rounds/001/lanes/1/diff.patch");
  EXPECT_EQ(diff2.find("lane1_notes.txt"), std::string::npos) << diff2;
  EXPECT_NE(diff1.find("lane1_notes.txt"), std::string::npos) << diff1;
  EXPECT_FALSE(stdfs::exists(run_ / "workspace/lane1_notes.txt"));
  EXPECT_FALSE(stdfs::exists(run_ / "lanes"));

  // Each lane's commit stays reachable after its work tree went.
  auto state = load_state(run_ / "state.json");
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(stdfs::exists(run_ / "git/refs/kda/rounds/001/lane1"));
  EXPECT_TRUE(stdfs::exists(run_ / "git/refs/kda/rounds/001/lane2"));
}

TEST_F(RunLoopTest, LanesOutOfRangeAreRefusedOnLoad) {
  LoopOptions o = options();
  o.lanes = 9;
  auto back = LoopOptions::from_json(o.to_json());
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("options.lanes: 9 is not in 1..8"), std::string::npos);
  o.lanes = 3;
  back = LoopOptions::from_json(o.to_json());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->lanes, 3);
  json old = o.to_json();
  old.erase("lanes");  // a state.json written before lanes existed
  EXPECT_EQ(LoopOptions::from_json(old)->lanes, 1);
}

}  // namespace
}  // namespace kda::loop::testing_fixture
