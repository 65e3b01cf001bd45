// The no-regression guard's rule (tune/guard.h) on tasks/host/rmsnorm's visible workloads with
// planted times: a configuration that wins the tuned shapes but is 3x slower than the baseline on
// shapes the search never saw is routed away from them, and a regime where nothing beats the
// baseline keeps the baseline.
#include "tune/guard.h"

#include <gtest/gtest.h>

#include "tune/regimes.h"

namespace kda::tune {
namespace {

const std::filesystem::path kSource = KDA_SOURCE_DIR;

struct Fixture {
  task::TaskPack pack;
  std::vector<const task::Workload*> visible;
  std::vector<Regime> regimes;
  PerfMap pm;
  std::map<std::string, Measurement> measured;

  // Each target's time on each visible workload, with a +-2 % interval.
  void time(const std::string& id, const std::function<double(const task::Workload&)>& ms) {
    Measurement m;
    m.config = id;
    m.passed = true;
    for (const auto* w : visible) {
      const double t = ms(*w);
      m.times[w->uuid] = {t, t * 0.98, t * 1.02};
    }
    measured[id] = m;
  }
};

int64_t hidden(const task::Workload& w) { return w.axes.at("hidden_size"); }

// Two tuned regimes over the long rows (hidden 128 and 512..4096), as the search chose them: "fast"
// (also the best single) and "mid"; the short rows (hidden 4, 12, 24) were never tuned.
Fixture rmsnorm_fixture() {
  Fixture f;
  auto pack = task::load_task_pack(kSource / "tasks/host/rmsnorm");
  EXPECT_TRUE(pack.ok()) << pack.status().message();
  f.pack = *pack;
  for (const auto& w : f.pack.workloads) f.visible.push_back(&w);
  Regime small{"hidden 128", {{"hidden_size", {128, 255}}}, Bound::kMemory, {}, false, false};
  Regime large{"hidden 512-4096", {{"hidden_size", {512, 4096}}}, Bound::kMemory, {}, false, false};
  for (const auto* w : f.visible) {
    if (hidden(*w) == 128) small.workloads.push_back(w->uuid);
    if (hidden(*w) >= 512) large.workloads.push_back(w->uuid);
  }
  f.regimes = {small, large};
  f.pm.best_single = "fast";
  f.pm.entries.push_back({&f.regimes[0], {}, "mid", "chosen"});
  f.pm.entries.push_back({&f.regimes[1], {}, "fast", "chosen"});
  return f;
}

const GuardRegime* regime_of(const GuardPlan& plan, const task::TaskPack& pack, const task::Workload& w) {
  std::map<std::string, int64_t> axes(w.axes.begin(), w.axes.end());
  for (const auto& g : plan.regimes)
    if (in_ranges(g.ranges, axes)) return &g;
  (void)pack;
  return nullptr;
}

TEST(Guard, AConfigurationThreeTimesSlowerThanTheBaselineOnUnseenShapesIsRoutedAway) {
  Fixture f = rmsnorm_fixture();
  f.time(kBaselineTarget, [](const task::Workload&) { return 1.0; });
  f.time("fast", [](const task::Workload& w) { return hidden(w) < 128 ? 3.0 : 0.5; });
  f.time("mid", [](const task::Workload&) { return 0.8; });
  auto plan = plan_guard(f.pack, f.pm, guard_finalists(f.pm, ""), f.visible, f.measured);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_TRUE(plan->ran);
  int short_rows = 0;
  for (const auto* w : f.visible) {
    const GuardRegime* g = regime_of(*plan, f.pack, *w);
    ASSERT_NE(g, nullptr) << "workload " << w->uuid << " is in no regime";
    if (hidden(*w) < 128) {
      ++short_rows;
      EXPECT_TRUE(g->visible_only) << g->regime;
      EXPECT_EQ(g->target, "mid") << g->regime << ": " << g->why;  // the fastest finalist that beats the baseline
    } else if (hidden(*w) >= 512) {
      EXPECT_EQ(g->target, "fast") << g->why;
    }
  }
  EXPECT_EQ(short_rows, 3);
  // "fast" loses to the baseline on the short rows, so shapes outside every range go to "mid".
  EXPECT_EQ(plan->fallback, "mid");
  EXPECT_NE(plan->fallback_why.find("slower on 545b9a25"), std::string::npos) << plan->fallback_why;
  EXPECT_NEAR(plan->worst_ratio, 1.0 / 0.8, 1e-9);  // every visible workload now at least 1.25x the baseline
  // Shapes outside every regime go to the nearest regime's target: that rule, checked on the visible
  // workloads no tuned regime covers (each one's regime left out), is slower than the baseline on none
  // of them; the short rows route to each other's regimes, all served by "mid".
  EXPECT_EQ(plan->unseen, "nearest") << plan->unseen_why;
  EXPECT_NE(plan->unseen_why.find("checked on 3 visible workload(s)"), std::string::npos) << plan->unseen_why;
  ASSERT_EQ(plan->unseen_checks.size(), 3u);
  for (const auto& c : plan->unseen_checks) {
    EXPECT_EQ(c["target"], "mid") << c.dump();
    EXPECT_FALSE(c["slower"].get<bool>()) << c.dump();
  }
  EXPECT_EQ(plan->to_json()["unseen"], "nearest");
  // Its reach is the farthest a check lay from the regime it was routed to.
  double farthest = 0;
  for (const auto& c : plan->unseen_checks) farthest = std::max(farthest, c["distance"].get<double>());
  EXPECT_GT(farthest, 0);
  EXPECT_DOUBLE_EQ(plan->reach, farthest);
}

TEST(Guard, WhereNothingBeatsTheBaselineTheRegimeKeepsTheBaseline) {
  Fixture f = rmsnorm_fixture();
  f.time(kBaselineTarget, [](const task::Workload&) { return 1.0; });
  f.time("fast", [](const task::Workload& w) { return hidden(w) < 128 ? 3.0 : 0.5; });
  // Within the baseline's noise on the tuned 128 regime, slower on the short rows: beats it nowhere there.
  f.time("mid", [](const task::Workload& w) { return hidden(w) < 128 ? 1.5 : 0.99; });
  auto plan = plan_guard(f.pack, f.pm, guard_finalists(f.pm, ""), f.visible, f.measured);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  for (const auto& g : plan->regimes) {
    if (g.regime == "hidden 128") {
      // "mid" is not apart from the baseline; "fast" (0.5 on hidden 128) is, and takes it.
      EXPECT_EQ(g.target, "fast") << g.why;
    }
    if (g.visible_only) {
      EXPECT_EQ(g.target, kBaselineTarget) << g.regime << ": " << g.why;
      EXPECT_NE(g.why.find("kept on the baseline"), std::string::npos) << g.why;
    }
  }
  EXPECT_NEAR(plan->worst_ratio, 1.0, 1e-9);
  EXPECT_EQ(plan->fallback, kBaselineTarget);  // no finalist is safe everywhere: the baseline serves, saying so
  EXPECT_NE(plan->fallback_why.find("every finalist is slower"), std::string::npos) << plan->fallback_why;
  const auto j = plan->to_json();
  EXPECT_TRUE(j["ran"].get<bool>());
  EXPECT_EQ(j["regimes"].size(), plan->regimes.size());
}

TEST(Guard, WithoutABaselineTheGuardSaysItDidNotRun) {
  Fixture f = rmsnorm_fixture();
  f.time("fast", [](const task::Workload&) { return 0.5; });
  auto plan = plan_guard(f.pack, f.pm, guard_finalists(f.pm, ""), f.visible, f.measured);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->ran);
  EXPECT_EQ(plan->skipped, "no baseline measured");
  EXPECT_EQ(plan->to_json()["ran"], false);
}

// One visible workload (16384 x 4) where the nearest other regime's target is slower than the
// baseline: the nearest rule does not hold, and neither does the margin rule everywhere (left out,
// 16384 x 4 is nearest 8192 x 12, whose target "mid" is 3x slower on it). The margin rule held on the
// other ten, so it serves unseen shapes except those nearest to 16384 x 4 (kLocalQuorum), and says so.
TEST(Guard, ARuleThatFailsOnOneVisibleWorkloadServesOnlyWhereItHeld) {
  Fixture f = rmsnorm_fixture();
  f.time(kBaselineTarget, [](const task::Workload&) { return 1.0; });
  f.time("fast", [](const task::Workload& w) { return hidden(w) < 128 ? 3.0 : 0.5; });
  // "mid" wins every short row but 16384 x 4, where it is 3x slower (that regime keeps the baseline).
  f.time("mid", [](const task::Workload& w) { return hidden(w) == 4 ? 3.0 : 0.8; });
  auto plan = plan_guard(f.pack, f.pm, guard_finalists(f.pm, ""), f.visible, f.measured);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_NE(plan->unseen_why.find("slower than the baseline on 07ffcad2"), std::string::npos) << plan->unseen_why;
  bool found = false;
  for (const auto& c : plan->unseen_checks)
    if (c["rule"] == "nearest" && c["workload"].get<std::string>().starts_with("07ffcad2")) {
      found = true;
      EXPECT_TRUE(c["slower"].get<bool>()) << c.dump();
      EXPECT_EQ(c["target"], "mid") << c.dump();
    }
  EXPECT_TRUE(found);
  ASSERT_EQ(plan->unseen, "margin") << plan->unseen_why;
  ASSERT_EQ(plan->vetoed.size(), 1u) << plan->unseen_why;
  EXPECT_TRUE(plan->vetoed[0].starts_with("07ffcad2")) << plan->vetoed[0];
  EXPECT_NE(plan->unseen_why.find("where it held"), std::string::npos) << plan->unseen_why;
  EXPECT_EQ(plan->to_json()["vetoed"].size(), 1u);
  // A long row far from the short ones takes "fast"; a shape nearest 16384 x 4 the fallback (the
  // baseline here), though its nearest workload's own target would be the baseline as well.
  EXPECT_EQ(margin_target(*plan, {{"batch_size", 97}, {"hidden_size", 1031}}), "fast");
  EXPECT_EQ(margin_target(*plan, {{"batch_size", 20000}, {"hidden_size", 4}}), "");
  EXPECT_EQ(margin_target(*plan, {{"batch_size", 5000}, {"hidden_size", 20}}), "mid");
}

// A rule's check tolerates what the spread between runner processes hides (kRuleTolerance): a target
// 5 % slower than the baseline on one short-row workload, the left-out regime's, leaves the nearest
// rule standing; 10 % slower fails it.
TEST(Guard, ARuleCheckFailsOnlyBeyondTheSpreadBetweenProcesses) {
  for (const double slow : {1.05, 1.10}) {
    Fixture f = rmsnorm_fixture();
    f.time(kBaselineTarget, [](const task::Workload&) { return 1.0; });
    f.time("fast", [](const task::Workload& w) { return hidden(w) < 128 ? 3.0 : 0.5; });
    f.time("mid", [slow](const task::Workload& w) { return hidden(w) == 4 ? slow : 0.8; });
    auto plan = plan_guard(f.pack, f.pm, guard_finalists(f.pm, ""), f.visible, f.measured);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_EQ(plan->unseen == "nearest", slow < 1 + kRuleTolerance) << slow << ": " << plan->unseen_why;
    bool checked = false;
    for (const auto& c : plan->unseen_checks)
      if (c["rule"] == "nearest" && c["workload"].get<std::string>().starts_with("07ffcad2")) {
        checked = true;
        EXPECT_EQ(c["target"], "mid") << c.dump();
        EXPECT_NEAR(c["ratio"].get<double>(), 1 / slow, 1e-9);
        EXPECT_EQ(c["slower"].get<bool>(), slow > 1 + kRuleTolerance) << c.dump();
      }
    EXPECT_TRUE(checked) << slow;
  }
}

// Where the nearest-regime rule fails its check, the margin rule is tried: an unseen shape takes its
// nearest visible workload's target only when every visible workload where that target is slower
// lies more than twice as far away. Here "mid" wins 4096 x 24 but is 3x slower on 8192 x 12 and
// 16384 x 4; nothing beats the baseline on those two, so the fallback is the baseline.
TEST(Guard, WhereTheNearestRuleFailsTheMarginRuleKeepsUnseenShapesAwayFromSlowerNeighbours) {
  Fixture f = rmsnorm_fixture();
  f.time(kBaselineTarget, [](const task::Workload&) { return 1.0; });
  f.time("fast", [](const task::Workload& w) { return hidden(w) < 128 ? 3.0 : 0.5; });
  f.time("mid", [](const task::Workload& w) { return hidden(w) < 24 ? 3.0 : 0.8; });
  auto plan = plan_guard(f.pack, f.pm, guard_finalists(f.pm, ""), f.visible, f.measured);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->fallback, kBaselineTarget) << plan->fallback_why;
  EXPECT_EQ(plan->unseen, "margin") << plan->unseen_why;
  EXPECT_NE(plan->unseen_why.find("the nearest-regime rule"), std::string::npos) << plan->unseen_why;
  size_t margin_checks = 0;
  for (const auto& c : plan->unseen_checks) {
    if (c["rule"] != "margin") continue;
    ++margin_checks;
    EXPECT_FALSE(c["slower"].get<bool>()) << c.dump();
  }
  EXPECT_EQ(margin_checks, f.visible.size());  // every visible workload, each left out in turn
  ASSERT_EQ(plan->points.size(), f.visible.size());
  EXPECT_EQ(plan->slower_on.at("mid").size(), 2u);
  // Unseen shapes: a long row near 128 x 1024 takes "fast" (slower only on rows far away); one
  // nearest 8192 x 12 takes its target, the baseline; one nearest 4096 x 24 takes "mid" only when
  // 8192 x 12, where "mid" is slower, lies more than twice as far.
  EXPECT_EQ(margin_target(*plan, {{"batch_size", 97}, {"hidden_size", 1031}}), "fast");
  EXPECT_EQ(margin_target(*plan, {{"batch_size", 6000}, {"hidden_size", 14}}), kBaselineTarget);
  EXPECT_EQ(margin_target(*plan, {{"batch_size", 5000}, {"hidden_size", 20}}), "mid");
  EXPECT_EQ(margin_target(*plan, {{"batch_size", 6000}, {"hidden_size", 18}}), "");
  // The rule's reach: the farthest its checks routed by it; a shape farther from every visible
  // workload goes to the fallback.
  double farthest = 0;
  for (const auto& c : plan->unseen_checks)
    if (c["rule"] == "margin") farthest = std::max(farthest, c["distance"].get<double>());
  EXPECT_GT(farthest, 0);
  EXPECT_DOUBLE_EQ(plan->reach, farthest);
  EXPECT_EQ(margin_target(*plan, {{"batch_size", 1}, {"hidden_size", 1}}), "");
  const auto j = plan->to_json();
  EXPECT_DOUBLE_EQ(j["reach"].get<double>(), farthest);
  EXPECT_EQ(j["unseen"], "margin");
  EXPECT_EQ(j["points"].size(), f.visible.size());
  EXPECT_EQ(j["slower_on"]["mid"].size(), 2u);
}

// A visible regime (no tuned regime covers it) takes the finalist fastest there, not the best single
// configuration that merely beats the baseline: "mid" at 2.5x on 8192 x 12 and 4096 x 24 over "fast"
// (the best single) at 1.4x. And a route faster than the baseline with the intervals apart, but by
// less than kRouteMargin (1.04x on 16384 x 4), keeps the baseline there.
TEST(Guard, AVisibleRegimeTakesTheFastestFinalistThatBeatsTheBaselineByTheMargin) {
  Fixture f = rmsnorm_fixture();
  f.time(kBaselineTarget, [](const task::Workload&) { return 1.0; });
  f.time("fast", [](const task::Workload& w) { return hidden(w) == 4 ? 0.96 : hidden(w) < 128 ? 0.7 : 0.5; });
  f.time("mid", [](const task::Workload& w) { return hidden(w) == 4 ? 0.96 : hidden(w) < 128 ? 0.4 : 0.8; });
  auto plan = plan_guard(f.pack, f.pm, guard_finalists(f.pm, ""), f.visible, f.measured);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  int visible_regimes = 0;
  for (const auto* w : f.visible) {
    const GuardRegime* g = regime_of(*plan, f.pack, *w);
    ASSERT_NE(g, nullptr) << w->uuid;
    if (!g->visible_only) continue;
    ++visible_regimes;
    if (hidden(*w) == 4) {
      EXPECT_EQ(g->target, kBaselineTarget) << g->why;
      EXPECT_NE(g->why.find("less than the 5 % margin"), std::string::npos) << g->why;
    } else {
      EXPECT_EQ(g->preferred, "mid") << g->regime;
      EXPECT_EQ(g->target, "mid") << g->why;
      EXPECT_NE(g->why.find("2.50x the baseline's speed here, intervals apart"), std::string::npos) << g->why;
    }
  }
  EXPECT_EQ(visible_regimes, 3);
  EXPECT_NEAR(plan->ratio_by_workload.at(f.visible[8]->uuid), 2.5, 1e-9);  // 8192 x 12
}

// The shipped check's rule (bench/results/host/placement_2026-12-07.md): the dispatcher as built timed beside
// the baseline; the workload where it is slower (16384 x 4 at 0.75x) gets a route of its shape alone to the
// baseline, first in the table, and a second screening that finds it slower again adds no second route.
TEST(Guard, TheDispatcherAsBuiltSlowerOnAVisibleShapeSendsThatShapeToTheBaseline) {
  Fixture f = rmsnorm_fixture();
  f.time(kBaselineTarget, [](const task::Workload& w) { return 0.01 * static_cast<double>(hidden(w)); });
  f.time("fast", [](const task::Workload& w) { return 0.005 * static_cast<double>(hidden(w)); });
  f.time("mid", [](const task::Workload& w) { return 0.006 * static_cast<double>(hidden(w)); });
  auto plan = plan_guard(f.pack, f.pm, {"fast", "mid"}, f.visible, f.measured);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const size_t routes_before = plan->regimes.size();
  const task::Workload* short_rows = nullptr;
  for (const auto* w : f.visible)
    if (hidden(*w) == 4) short_rows = w;
  ASSERT_NE(short_rows, nullptr);
  Measurement shipped = f.measured.at("fast");  // twice the baseline's speed everywhere...
  shipped.times[short_rows->uuid] = {0.04 / 0.75, 0.04 / 0.75 * 0.98, 0.04 / 0.75 * 1.02};  // ...but 0.75x here
  const nlohmann::json slower = reroute_shipped_regressions(*plan, f.visible, shipped, f.measured.at(kBaselineTarget));
  ASSERT_EQ(slower.size(), 1u) << slower.dump(1);
  EXPECT_EQ(slower[0]["workload"], short_rows->uuid);
  EXPECT_NEAR(slower[0]["ratio"].get<double>(), 0.75, 1e-9);
  EXPECT_TRUE(slower[0]["rerouted"].get<bool>());
  ASSERT_EQ(plan->regimes.size(), routes_before + 1);
  const GuardRegime& first = plan->regimes.front();
  EXPECT_EQ(first.target, kBaselineTarget);
  EXPECT_TRUE(first.shipped);
  EXPECT_EQ(first.ranges.at("hidden_size"), std::make_pair(int64_t{4}, int64_t{4}));
  EXPECT_EQ(first.ranges.at("batch_size"),
            std::make_pair(short_rows->axes.at("batch_size"), short_rows->axes.at("batch_size")));
  EXPECT_NE(first.why.find("0.75x the baseline's speed"), std::string::npos) << first.why;
  EXPECT_EQ(regime_of(*plan, f.pack, *short_rows), &first);  // the first route that holds it
  // Within the tolerance (2 % slower, intervals overlapping) is not slower; a second screening still slower
  // at 16384 x 4 reports it without a second route.
  shipped.times[short_rows->uuid] = {0.04 * 1.02, 0.04 * 1.02 * 0.98, 0.04 * 1.02 * 1.02};
  EXPECT_TRUE(reroute_shipped_regressions(*plan, f.visible, shipped, f.measured.at(kBaselineTarget)).empty());
  shipped.times[short_rows->uuid] = {0.06, 0.06 * 0.98, 0.06 * 1.02};
  const nlohmann::json again = reroute_shipped_regressions(*plan, f.visible, shipped, f.measured.at(kBaselineTarget));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_FALSE(again[0]["rerouted"].get<bool>());
  EXPECT_EQ(plan->regimes.size(), routes_before + 1);
  EXPECT_EQ(plan->to_json().contains("shipped"), false);  // tune.cc records the screenings
}

TEST(Guard, ShapeDistanceIsLog2OutsideTheRangesSummedOverAxes) {
  const std::map<std::string, std::pair<int64_t, int64_t>> r{{"m", {128, 255}}, {"n", {16, 31}}};
  EXPECT_DOUBLE_EQ(shape_distance(r, {{"m", 200}, {"n", 20}}), 0.0);
  EXPECT_DOUBLE_EQ(shape_distance(r, {{"m", 32}, {"n", 20}}), 2.0);          // 128 / 32
  EXPECT_NEAR(shape_distance(r, {{"m", 510}, {"n", 4}}), 1.0 + 2.0, 1e-12);  // 510 / 255, 16 / 4
  EXPECT_DOUBLE_EQ(shape_distance(r, {{"m", 200}, {"k", 1 << 20}}), 0.0);    // an axis not ranged adds nothing
  EXPECT_DOUBLE_EQ(shape_distance(r, {{"m", 0}, {"n", 16}}), 8.0);           // 0 counts as 0.5: 128 / 0.5
}

}  // namespace
}  // namespace kda::tune
