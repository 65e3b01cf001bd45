// The rules reviewer: each rule with evidence that makes it fire and evidence that does not, the
// verdict text parsed by the loop's own grammar, evidence read from verify.json/finish.json, and
// the plan check.
#include "loop/rules_reviewer.h"

#include <gtest/gtest.h>

#include "loop/backend_factory.h"
#include "loop/verdict.h"
#include "util/fs.h"

namespace kda::loop {
namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

// A clean round: verified, all PASSED, one confirmed claim, 10 % faster than the incumbent.
ReviewEvidence good() {
  ReviewEvidence e;
  e.have_verify = true;
  e.finished = true;
  e.verified = true;
  e.all_passed = true;
  e.improvement = true;
  e.geomean = 2.2;
  e.incumbent_speedup = 2.0;
  e.claims_confirmed = 1;
  return e;
}

void expect(const RulesVerdict& v, Rule rule, Decision d, Progress p) {
  EXPECT_EQ(v.rule, rule) << v.text();
  EXPECT_EQ(v.decision, d) << v.text();
  EXPECT_EQ(v.progress, p) << v.text();
  // The text is what the loop parses: it must round-trip exactly.
  ReviewVerdict parsed = parse_review_verdict(v.text());
  EXPECT_TRUE(parsed.well_formed) << parsed.complaint;
  EXPECT_EQ(parsed.decision, d);
  EXPECT_EQ(parsed.progress, p);
}

TEST(RulesReviewer, AdvancedFiresOnAVerifiedGainAboveTheThreshold) {
  expect(review_round(good()), Rule::kAdvanced, Decision::kContinue, Progress::kAdvanced);
  ReviewEvidence done = good();
  done.next = "none";  // the writer has nothing left: accept and complete
  expect(review_round(done), Rule::kAdvanced, Decision::kComplete, Progress::kAdvanced);
  ReviewEvidence more = good();
  more.next = "dispatcher";
  expect(review_round(more), Rule::kAdvanced, Decision::kContinue, Progress::kAdvanced);
  // Does not fire: the gain just below the threshold, or the loop's own improvement test failed.
  ReviewEvidence small = good();
  small.geomean = small.incumbent_speedup * (1 + kRulesAdvanceGain * 0.9);
  EXPECT_NE(review_round(small).rule, Rule::kAdvanced);
  ReviewEvidence no_improvement = good();
  no_improvement.improvement = false;
  EXPECT_NE(review_round(no_improvement).rule, Rule::kAdvanced);
}

// A repair of a failed completion check: no gain and no claim needed (kda measured the failing workloads
// itself); it completes, so the check runs again, unless the writer names more. A verified round that is
// not a repair (the flag without the loop's improvement) is judged by the other rules.
TEST(RulesReviewer, ARepairAdvancesAndCompletesWithoutAGainOrAClaim) {
  ReviewEvidence e = good();
  e.geomean = e.incumbent_speedup;
  e.claims_confirmed = 0;
  e.repaired = true;
  e.improvement_detail = "a repair of the last completion check on its 1 failing workload(s)";
  expect(review_round(e), Rule::kRepaired, Decision::kComplete, Progress::kAdvanced);
  EXPECT_NE(review_round(e).reason.find("a repair of the last completion check"), std::string::npos);
  e.next = "the other shapes";
  expect(review_round(e), Rule::kRepaired, Decision::kContinue, Progress::kAdvanced);
  e.repaired = false;
  EXPECT_NE(review_round(e).rule, Rule::kRepaired);
  EXPECT_NE(review_round(e).progress, Progress::kAdvanced);
}

TEST(RulesReviewer, StallCompletesUnlessTheWriterNamesANextStep) {
  ReviewEvidence e = good();
  e.geomean = 2.02;  // +1 %
  expect(review_round(e), Rule::kStalled, Decision::kComplete, Progress::kStalled);
  e.next = "none";
  expect(review_round(e), Rule::kStalled, Decision::kComplete, Progress::kStalled);
  e.next = "refine";
  expect(review_round(e), Rule::kStalled, Decision::kContinue, Progress::kStalled);
  // Does not fire on a clear gain.
  EXPECT_NE(review_round(good()).rule, Rule::kStalled);
}

TEST(RulesReviewer, SlowerIsRegressedAndEndsLikeAStall) {
  ReviewEvidence e = good();
  e.geomean = 1.8;  // -10 %
  expect(review_round(e), Rule::kSlower, Decision::kComplete, Progress::kRegressed);
  e.next = "dispatcher";
  expect(review_round(e), Rule::kSlower, Decision::kContinue, Progress::kRegressed);
  ReviewEvidence noise = good();
  noise.geomean = 2.0 * (1 - kRulesRegressLoss * 0.5);  // within the noise margin: a stall
  EXPECT_EQ(review_round(noise).rule, Rule::kStalled);
}

TEST(RulesReviewer, IntegrityViolationStops) {
  ReviewEvidence e = good();
  e.violation = true;
  e.rejections = {"protected_files: state.json changed"};
  expect(review_round(e), Rule::kIntegrity, Decision::kStop, Progress::kRegressed);
  EXPECT_NE(review_round(e).reason.find("state.json changed"), std::string::npos);
  EXPECT_NE(review_round(good()).rule, Rule::kIntegrity);
}

TEST(RulesReviewer, MissingEvidenceIsRegressed) {
  ReviewEvidence none;  // no verify.json at all
  expect(review_round(none), Rule::kNoEvidence, Decision::kContinue, Progress::kRegressed);
  ReviewEvidence unfinished = good();
  unfinished.finished = false;
  expect(review_round(unfinished), Rule::kNoEvidence, Decision::kContinue, Progress::kRegressed);
  EXPECT_NE(review_round(good()).rule, Rule::kNoEvidence);
}

TEST(RulesReviewer, FalseClaimIsRegressedEvenWhenFaster) {
  ReviewEvidence e = good();
  e.geomean = 3.0;
  e.verified = false;
  e.claims_false = 1;
  e.rejections = {"claim: geomean_speedup claimed 9, measured 3 (+200%)"};
  expect(review_round(e), Rule::kFalseClaim, Decision::kContinue, Progress::kRegressed);
  ReviewEvidence unverifiable = good();
  unverifiable.claims_unverifiable = 1;  // not false: does not fire
  EXPECT_NE(review_round(unverifiable).rule, Rule::kFalseClaim);
}

TEST(RulesReviewer, NotPassedIsRegressed) {
  ReviewEvidence e = good();
  e.all_passed = false;
  e.verified = false;
  e.rejections = {"all_passed: 3/4 PASSED"};
  expect(review_round(e), Rule::kNotPassed, Decision::kContinue, Progress::kRegressed);
  EXPECT_NE(review_round(good()).rule, Rule::kNotPassed);
}

TEST(RulesReviewer, OtherRejectionsAreRegressed) {
  ReviewEvidence e = good();
  e.verified = false;
  e.rejections = {"diff_scope: changed files outside the solution: notes.txt"};
  expect(review_round(e), Rule::kRejected, Decision::kContinue, Progress::kRegressed);
  EXPECT_NE(review_round(e).reason.find("notes.txt"), std::string::npos);
  EXPECT_NE(review_round(good()).rule, Rule::kRejected);
}

TEST(RulesReviewer, AGainWithoutAConfirmedClaimIsNotProgress) {
  ReviewEvidence e = good();
  e.claims_confirmed = 0;
  expect(review_round(e), Rule::kUnclaimed, Decision::kComplete, Progress::kStalled);
  e.next = "refine";
  expect(review_round(e), Rule::kUnclaimed, Decision::kContinue, Progress::kStalled);
  EXPECT_NE(review_round(good()).rule, Rule::kUnclaimed);
}

class RulesFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-rules");
    ASSERT_TRUE(d.ok());
    tmp_ = *d;
  }
  void TearDown() override { stdfs::remove_all(tmp_); }
  stdfs::path tmp_;
};

// verify.json as round_verify writes it.
json verify_json(double geomean, double incumbent, const std::string& claim_status, bool all_passed) {
  json checks = json::array({{{"name", "protected_files"}, {"passed", true}, {"detail", ""}},
                             {{"name", "finish_round"}, {"passed", true}, {"detail", "called"}},
                             {{"name", "all_passed"}, {"passed", all_passed}, {"detail", ""}}});
  json rejections = json::array();
  if (!all_passed) rejections.push_back("all_passed: 3/4 PASSED");
  if (claim_status == "false") rejections.push_back("claim: geomean_speedup claimed 5, measured 1.2");
  return {{"checks", checks},
          {"claims", json::array({{{"metric", "geomean_speedup"}, {"claimed", 1.2}, {"status", claim_status}}})},
          {"verified", rejections.empty()},
          {"improvement", rejections.empty() && geomean > incumbent * 1.02},
          {"incumbent_speedup", incumbent},
          {"geomean", geomean},
          {"eval", {{"all_passed", all_passed}, {"geomean", geomean}, {"workloads", json::array()}}},
          {"rejections", rejections}};
}

TEST_F(RulesFiles, ReadsTheRoundsEvidence) {
  const stdfs::path round = tmp_ / "rounds" / "002";
  ASSERT_TRUE(fs::ensure_dir(round).ok());
  ASSERT_TRUE(fs::write_file_atomic(round / "verify.json", verify_json(1.5, 1.2, "confirmed", true).dump()).ok());
  ASSERT_TRUE(
      fs::write_file_atomic(round / "finish.json",
                            json({{"summary", "Stage: refine.\nNEXT: dispatcher\n"}, {"claims", json::array()}}).dump())
          .ok());
  auto e = read_round_evidence(round);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_TRUE(e->verified);
  EXPECT_TRUE(e->finished);
  EXPECT_TRUE(e->all_passed);
  EXPECT_EQ(e->claims_confirmed, 1);
  EXPECT_DOUBLE_EQ(e->geomean, 1.5);
  EXPECT_DOUBLE_EQ(e->incumbent_speedup, 1.2);
  EXPECT_EQ(e->next, "dispatcher");
  expect(review_round(*e), Rule::kAdvanced, Decision::kContinue, Progress::kAdvanced);

  json repair = verify_json(1.2, 1.2, "confirmed", true);  // as fast as the incumbent, a repair
  repair["improvement"] = true;
  repair["repair"] = {{"repaired", true}, {"criteria", {"no_workload_slower"}}};
  ASSERT_TRUE(fs::write_file_atomic(round / "verify.json", repair.dump()).ok());
  EXPECT_TRUE(read_round_evidence(round)->repaired);
  expect(review_round(*read_round_evidence(round)), Rule::kRepaired, Decision::kContinue, Progress::kAdvanced);
  repair["repair"]["repaired"] = false;  // tried, not mended: no improvement either
  repair["improvement"] = false;
  ASSERT_TRUE(fs::write_file_atomic(round / "verify.json", repair.dump()).ok());
  EXPECT_FALSE(read_round_evidence(round)->repaired);

  ASSERT_TRUE(fs::write_file_atomic(round / "verify.json", verify_json(1.5, 1.2, "false", true).dump()).ok());
  expect(review_round(*read_round_evidence(round)), Rule::kFalseClaim, Decision::kContinue, Progress::kRegressed);
  ASSERT_TRUE(fs::write_file_atomic(round / "verify.json", verify_json(1.5, 1.2, "confirmed", false).dump()).ok());
  expect(review_round(*read_round_evidence(round)), Rule::kNotPassed, Decision::kContinue, Progress::kRegressed);
  EXPECT_FALSE(read_round_evidence(tmp_ / "rounds" / "009").ok());
}

TEST_F(RulesFiles, TheBackendReviewsFromTheReadablePaths) {
  auto b = make_backend("rules");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ((*b)->name(), "rules");
  ASSERT_TRUE(fs::ensure_dir(tmp_ / "rounds" / "001").ok());
  ASSERT_TRUE(fs::ensure_dir(tmp_ / "plan").ok());
  ASSERT_TRUE(
      fs::write_file_atomic(tmp_ / "rounds/001/verify.json", verify_json(1.01, 1.0, "confirmed", true).dump()).ok());
  agent::SessionRequest req;
  req.role = agent::Role::kReviewer;
  req.phase = "review";
  req.index = 1;
  req.readable = {tmp_ / "task", tmp_ / "plan", tmp_ / "rounds"};
  auto r = (*b)->run_session(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto v = parse_review_verdict(r->final_text);
  EXPECT_TRUE(v.well_formed);
  EXPECT_EQ(v.decision, Decision::kComplete);  // +1 %, no next step named
  EXPECT_EQ(v.progress, Progress::kStalled);

  req.phase = "plan_review";
  ASSERT_TRUE(
      fs::write_file_atomic(tmp_ / "plan/draft_1.md", "Plan\nTunables: BLOCK={64,128}\nRegimes: small, large\n").ok());
  r = (*b)->run_session(req);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(parse_plan_verdict(r->final_text).approve) << r->final_text;
  req.index = 2;  // no draft_2.md: the prompt's plan block is read instead
  req.prompt = "Plan review 2.\n--- plan draft ---\nmake it faster\n--- end ---\n";
  r = (*b)->run_session(req);
  ASSERT_TRUE(r.ok());
  auto pv = parse_plan_verdict(r->final_text);
  EXPECT_TRUE(pv.well_formed);
  EXPECT_FALSE(pv.approve);

  req.role = agent::Role::kWriter;
  EXPECT_FALSE((*b)->run_session(req).ok());
  EXPECT_FALSE(make_backend("rules:strict").ok());
}

TEST(RulesPlan, ApprovesOnlyAPlanNamingTunablesAndRegimes) {
  EXPECT_TRUE(review_plan("# Plan\n- **Tunables:** ROWS={1,2,4}; VEC={1,4}\nRegimes: h512, h4096\n").approve);
  EXPECT_TRUE(review_plan("Tunables: BLOCK={64}\nRegimes:\nregime  ranges\nsmall   N in [1,63]\n").approve);
  auto no_regimes = review_plan("Tunables: BLOCK={64}\nWe will see.\n");
  EXPECT_FALSE(no_regimes.approve);
  EXPECT_EQ(no_regimes.missing, std::vector<std::string>{"regimes"});
  auto nothing = review_plan("Make it faster with better tiling.\nTunables:\n");
  EXPECT_FALSE(nothing.approve);
  EXPECT_EQ(nothing.missing.size(), 2u);
  EXPECT_TRUE(parse_plan_verdict(nothing.text()).well_formed);
  EXPECT_FALSE(parse_plan_verdict(nothing.text()).approve);
}

}  // namespace
}  // namespace kda::loop
