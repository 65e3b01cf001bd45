#include "tune/search.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>

#include <gtest/gtest.h>

#include "tune/perf_map.h"
#include "task/solution.h"
#include "task/task_pack.h"
#include "tune/regimes.h"
#include "tune/tunables.h"
#include "util/fs.h"

namespace kda::tune {
namespace {

using Span = std::pair<int64_t, int64_t>;

// A measurer with a known cost model: latency = base(workload) * factor(config), plus a record of
// every call so tests can see what was measured (and that nothing was measured twice).
class FakeMeasurer : public Measurer {
 public:
  std::function<double(const Config&, const std::string&)> latency;
  std::function<bool(const Config&)> fails = [](const Config&) { return false; };
  std::vector<std::pair<std::string, int>> calls;  // (id, rung)
  int prepared = 0;

  void prepare(const std::vector<const Config*>& cs) override { prepared += static_cast<int>(cs.size()); }
  Result<Measurement> measure(const Config& c, const std::vector<std::string>& ws, int rung) override {
    calls.push_back({c.id(), rung});
    Measurement m;
    m.passed = !fails(c);
    if (!m.passed) {
      m.reason = "INCORRECT_NUMERICAL";
      return m;
    }
    for (const auto& w : ws) {
      double ms = latency(c, w);
      m.times[w] = {ms, ms * 0.98, ms * 1.02};
    }
    return m;
  }
};

task::TaskPack toy_pack() {
  task::TaskPack p;
  p.definition.name = "toy";
  p.definition.axes = {{"n", task::AxisSpec::Kind::kVar, 0, ""}, {"m", task::AxisSpec::Kind::kVar, 0, ""}};
  p.definition.inputs = {{"x", std::vector<std::string>{"n", "m"}, tensor::DType::kFloat32, ""}};
  p.definition.outputs = {{"y", std::vector<std::string>{"n", "m"}, tensor::DType::kFloat32, ""}};
  p.settings.roofline_bytes = *task::Expression::parse("8 * n * m");
  p.settings.roofline_flops = *task::Expression::parse("n * m * m");  // intensity m / 8
  int i = 0;
  for (auto [n, m] : std::vector<std::pair<int, int>>{{1, 16}, {3, 16}, {64, 16}, {100, 16}, {64, 512}, {64, 1024}}) {
    task::Workload w;
    w.uuid = "w" + std::to_string(i++);
    w.axes = {{"n", n}, {"m", m}};
    p.workloads.push_back(w);
  }
  return p;
}

std::vector<const task::Workload*> ptrs(const task::TaskPack& p) {
  std::vector<const task::Workload*> out;
  for (const auto& w : p.workloads) out.push_back(&w);
  return out;
}

TEST(Regimes, GroupsByPowerOfTwoBucketsAndBound) {
  auto p = toy_pack();
  auto rs = group_regimes(p, ptrs(p), {});
  // (1,16) | (3,16) | (64,16),(100,16) | (64,512) | (64,1024): host ridge 10 FLOP/byte, m/8 >= 10 for m >= 80.
  ASSERT_EQ(rs.size(), 5u);
  EXPECT_EQ(rs[2].workloads, (std::vector<std::string>{"w2", "w3"}));
  EXPECT_EQ(rs[2].ranges.at("n"), (Span{64, 127}));
  EXPECT_EQ(rs[2].ranges.at("m"), (Span{16, 31}));
  EXPECT_EQ(rs[1].ranges.at("n"), (Span{2, 3}));
  EXPECT_EQ(rs[0].bound, Bound::kMemory);
  EXPECT_EQ(rs[4].bound, Bound::kCompute);
  EXPECT_NE(regimes_table(rs).find("compute"), std::string::npos);
  EXPECT_EQ(workload_bound(p, {{"n", 1}, {"m", 16}}), Bound::kMemory);
}

TEST(Regimes, SplitsABucketWithBothBoundsOnTheHulls) {
  auto p = toy_pack();
  // m in [64, 127]: m = 64 is memory-bound (8 < 10), m = 120 compute-bound (15 >= 10).
  p.workloads = {};
  for (auto [u, n, m] : std::vector<std::tuple<std::string, int, int>>{{"a", 4, 64}, {"b", 4, 120}}) {
    task::Workload w;
    w.uuid = u;
    w.axes = {{"n", n}, {"m", m}};
    p.workloads.push_back(w);
  }
  auto rs = group_regimes(p, ptrs(p), {});
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].ranges.at("m"), (Span{64, 64}));
  EXPECT_EQ(rs[1].ranges.at("m"), (Span{120, 120}));
}

TEST(Regimes, UserRegimesFirstMatchAndOther) {
  auto p = toy_pack();
  std::vector<RegimeSpec> specs{
      {"narrow", {{"m", {1, 100}}}, 1}, {"tiny", {{"n", {1, 1}}}, 2}, {"none", {{"n", {5000, 6000}}}, 3}};
  auto rs = group_regimes(p, ptrs(p), specs);
  ASSERT_EQ(rs.size(), 2u);  // "tiny" gets nothing (narrow matched first), "none" is empty; other has w4, w5
  EXPECT_EQ(rs[0].name, "narrow");
  EXPECT_EQ(rs[0].workloads.size(), 4u);
  EXPECT_EQ(rs[1].name, "other");
  EXPECT_TRUE(rs[1].fallback_only);
}

// Configs: A in 1..N. Config A is fastest on small-m workloads when A is small and on large-m ones
// when A is large, so the regimes disagree.
SearchSpace toy_space(const task::TaskPack& p, int n_configs) {
  SearchSpace s;
  for (int a = 1; a <= n_configs; ++a) s.configs.push_back({"default", {{"A", a}}});
  for (const auto& w : p.workloads) s.workloads.push_back(w.uuid);
  for (const auto& c : s.configs) s.applicable[c.id()] = s.workloads;
  s.regimes = group_regimes(p, ptrs(p), {});
  return s;
}

double toy_latency(const task::TaskPack& p, const Config& c, const std::string& uuid) {
  const auto& w = *std::find_if(p.workloads.begin(), p.workloads.end(), [&](const auto& x) { return x.uuid == uuid; });
  const double a = c.params.at("A").get<int>();
  const double m = static_cast<double>(w.axes.at("m"));
  const double best = m < 100 ? 2 : 9;  // best A per regime family
  return (1 + w.axes.at("n") * m / 1000.0) * (1 + (a - best) * (a - best) / 10.0);
}

std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("kda_tune_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

TEST(Search, ExhaustiveMeasuresAllThenConfirmsTheBestPerRegime) {
  auto p = toy_pack();
  auto space = toy_space(p, 10);
  FakeMeasurer fm;
  fm.latency = [&](const Config& c, const std::string& w) { return toy_latency(p, c, w); };
  auto dir = temp_dir("exh");
  auto st = State::open(dir / "state.json", "fp", false);
  ASSERT_TRUE(st.ok());
  SearchOptions o;
  auto out = run_search(space, fm, *st, o);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->strategy, Strategy::kExhaustive);
  EXPECT_EQ(out->configs_measured, 10);
  int rung0 = 0, rung1 = 0;
  for (const auto& [id, r] : fm.calls) (r == 0 ? rung0 : rung1)++;
  EXPECT_EQ(rung0, 10);
  EXPECT_GT(rung1, 0);
  EXPECT_LE(rung1, 6);  // the best two of each list, shared between lists
  auto pm = build_perf_map(space, *st);
  ASSERT_TRUE(pm.ok());
  // Small-m regimes pick A=2, large-m ones A=9.
  for (const auto& e : pm->entries) {
    ASSERT_FALSE(e.ranked.empty());
    const Config* best = find_config(space, e.ranked.front().config);
    EXPECT_EQ(best->params.at("A"), e.regime->ranges.at("m").first < 100 ? 2 : 9) << e.regime->name;
    EXPECT_EQ(e.ranked.front().rung, 1);
  }
  EXPECT_FALSE(pm->best_single.empty());
  EXPECT_LT(pm->dispatcher_geomean_ms, pm->best_single_geomean_ms);
}

TEST(Search, HalvingPrunesAndKeepsEachRegimesBest) {
  auto p = toy_pack();
  auto space = toy_space(p, 81);
  FakeMeasurer fm;
  fm.latency = [&](const Config& c, const std::string& w) { return toy_latency(p, c, w); };
  fm.fails = [](const Config& c) { return c.params.at("A") == 40; };
  auto dir = temp_dir("halving");
  auto st = State::open(dir / "state.json", "fp", false);
  ASSERT_TRUE(st.ok());
  SearchOptions o;  // 81 > 32: halving
  auto out = run_search(space, fm, *st, o);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->strategy, Strategy::kHalving);
  EXPECT_EQ(out->top_rung, 2);
  EXPECT_EQ(out->configs_failed, 1);
  std::map<int, int> per_rung;
  for (const auto& [id, r] : fm.calls) per_rung[r]++;
  EXPECT_EQ(per_rung[0], 81);
  EXPECT_LT(per_rung[1], 81 / 2);
  EXPECT_LT(per_rung[2], per_rung[1]);
  EXPECT_GT(per_rung[2], 0);
  auto pm = build_perf_map(space, *st);
  ASSERT_TRUE(pm.ok());
  for (const auto& e : pm->entries) {
    const Config* best = find_config(space, e.ranked.front().config);
    EXPECT_EQ(best->params.at("A"), e.regime->ranges.at("m").first < 100 ? 2 : 9);
  }
}

TEST(Search, BudgetsCapConfigsAndTime) {
  auto p = toy_pack();
  auto space = toy_space(p, 50);
  FakeMeasurer fm;
  fm.latency = [&](const Config& c, const std::string& w) { return toy_latency(p, c, w); };
  auto st = State::open(temp_dir("budget") / "state.json", "fp", false);
  ASSERT_TRUE(st.ok());
  SearchOptions o;
  o.max_configs = 7;
  auto out = run_search(space, fm, *st, o);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->candidates, 7);
  EXPECT_EQ(out->configs_measured, 7);
  EXPECT_EQ(fm.calls.front().first, space.configs.front().id());  // the default comes first
  // A fake clock: each measurement takes a minute; a 3-minute budget stops after 4 (the check is before each).
  FakeMeasurer fm2 = fm;
  fm2.calls.clear();
  auto st2 = State::open(temp_dir("budget2") / "state.json", "fp", false);
  double now = 0;
  SearchOptions o2;
  o2.max_minutes = 3;
  o2.clock_s = [&] { return now; };
  fm2.latency = [&](const Config& c, const std::string& w) {
    now += 60.0 / static_cast<double>(p.workloads.size());
    return toy_latency(p, c, w);
  };
  auto out2 = run_search(space, fm2, *st2, o2);
  ASSERT_TRUE(out2.ok());
  EXPECT_EQ(fm2.calls.size(), 4u);
  EXPECT_FALSE(out2->budget_note.empty());
}

// Runs the search once uninterrupted, then again in sessions killed after stop_after(session)
// measurements and resumed: nothing is measured twice, the measurements add up to the
// uninterrupted run's, and the map ends the same. Returns the resumed run's state directory.
std::filesystem::path expect_resumes_like_uninterrupted(
    const SearchSpace& space, const std::function<double(const Config&, const std::string&)>& lat,
    const SearchOptions& base, const std::function<int(int)>& stop_after, const std::string& name) {
  FakeMeasurer ref;
  ref.latency = lat;
  auto st_ref = State::open(temp_dir(name + "_ref") / "state.json", "fp", false);
  EXPECT_TRUE(st_ref.ok() && run_search(space, ref, *st_ref, base).ok());
  auto pm_ref = build_perf_map(space, *st_ref);
  EXPECT_TRUE(pm_ref.ok());
  auto dir = temp_dir(name);
  std::vector<std::pair<std::string, int>> all_calls;
  bool finished = false;
  for (int session = 0; session < 20 && !finished; ++session) {
    FakeMeasurer fm;
    fm.latency = lat;
    auto st = State::open(dir / "state.json", "fp", /*resume=*/session > 0);
    EXPECT_TRUE(st.ok()) << st.status().message();
    if (!st.ok()) return dir;
    SearchOptions o = base;
    o.stop_after = stop_after(session);
    auto out = run_search(space, fm, *st, o);
    EXPECT_TRUE(out.ok());
    if (!out.ok()) return dir;
    all_calls.insert(all_calls.end(), fm.calls.begin(), fm.calls.end());
    finished = !out->stopped;
  }
  EXPECT_TRUE(finished);
  std::set<std::pair<std::string, int>> unique(all_calls.begin(), all_calls.end());
  EXPECT_EQ(unique.size(), all_calls.size()) << "a measurement was taken twice";
  EXPECT_EQ(all_calls.size(), ref.calls.size());
  auto st_final = State::open(dir / "state.json", "fp", true);
  EXPECT_TRUE(st_final.ok());
  if (!st_final.ok() || !pm_ref.ok()) return dir;
  auto pm = build_perf_map(space, *st_final);
  EXPECT_TRUE(pm.ok());
  if (!pm.ok()) return dir;
  EXPECT_EQ(pm->best_single, pm_ref->best_single);
  EXPECT_EQ(pm->entries.size(), pm_ref->entries.size());
  for (size_t i = 0; i < pm->entries.size() && i < pm_ref->entries.size(); ++i)
    EXPECT_EQ(pm->entries[i].ranked.front().config, pm_ref->entries[i].ranked.front().config);
  return dir;
}

TEST(Search, ResumeAfterAKillMeasuresNothingTwiceAndEndsWithTheSameMap) {
  auto p = toy_pack();
  auto space = toy_space(p, 81);
  auto lat = [&](const Config& c, const std::string& w) { return toy_latency(p, c, w); };
  // Killed after a varying number of measurements.
  const auto dir = expect_resumes_like_uninterrupted(
      space, lat, {}, [](int session) { return 13 + session; }, "resume");
  // Another fingerprint refuses to resume.
  auto other = State::open(dir / "state.json", "other", true);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().kind(), ErrorKind::kBadInput);
}

// Two parameters of 12 values each (144 configurations): latency separable in A and B, fastest at
// A = 9, B = 3 on small-m workloads and A = 4, B = 11 on large-m ones.
SearchSpace grid_space(const task::TaskPack& p) {
  SearchSpace s;
  for (int a = 1; a <= 12; ++a)
    for (int b = 1; b <= 12; ++b) s.configs.push_back({"default", {{"A", a}, {"B", b}}});
  for (const auto& w : p.workloads) s.workloads.push_back(w.uuid);
  for (const auto& c : s.configs) s.applicable[c.id()] = s.workloads;
  s.regimes = group_regimes(p, ptrs(p), {});
  return s;
}

double grid_latency(const task::TaskPack& p, const Config& c, const std::string& uuid) {
  const auto& w = *std::find_if(p.workloads.begin(), p.workloads.end(), [&](const auto& x) { return x.uuid == uuid; });
  const double a = c.params.at("A").get<int>(), b = c.params.at("B").get<int>();
  const bool small = w.axes.at("m") < 100;
  const double da = a - (small ? 9 : 4), db = b - (small ? 3 : 11);
  return (1 + w.axes.at("n") * w.axes.at("m") / 1000.0) * (1 + da * da / 20.0) * (1 + db * db / 30.0);
}

TEST(AdditiveModel, RanksASeparableCostByItsParameterEffects) {
  auto p = toy_pack();
  auto space = grid_space(p);
  // Fitted on a spread quarter of the configurations (the search's own first sample), it points at
  // the optimum among the other three quarters. (A lattice sample, every 5th, aliases A with B.)
  std::vector<std::pair<const Config*, double>> seen;
  for (const Config* c : candidates(space, 36)) seen.push_back({c, grid_latency(p, *c, "w0")});
  AdditiveModel m;
  m.fit(seen);
  const Config* best = nullptr;
  for (const auto& c : space.configs)
    if (best == nullptr || m.predict(c) < m.predict(*best)) best = &c;
  // Within 5 % of the optimum (A = 9, B = 3; the ridge shrinks the effects of values seen once).
  EXPECT_LT(grid_latency(p, *best, "w0"), 1.05 * grid_latency(p, Config{"default", {{"A", 9}, {"B", 3}}}, "w0"))
      << best->label();
  // An unmeasured numeric value takes its neighbours' interpolated effect, not the mean's.
  std::vector<std::pair<const Config*, double>> ends;
  std::vector<Config> grid;
  for (int a : {1, 12})
    for (int b : {1, 12}) grid.push_back({"default", {{"A", a}, {"B", b}}});
  for (const auto& c : grid) ends.push_back({&c, grid_latency(p, c, "w0")});
  AdditiveModel lin;
  lin.fit(ends);
  const double mid = lin.predict(Config{"default", {{"A", 6}, {"B", 1}}});
  EXPECT_LT(lin.predict(Config{"default", {{"A", 12}, {"B", 1}}}), mid);
  EXPECT_LT(mid, lin.predict(Config{"default", {{"A", 1}, {"B", 1}}}));
  // Rarely seen values get the exploration bonus.
  Config unseen{"default", {{"A", 99}, {"B", 3}}};
  EXPECT_LT(m.predict(unseen, 0.5), m.predict(unseen, 0));
}

TEST(Search, ModelGuidedBeatsARandomSampleOfTheSameBudget) {
  auto p = toy_pack();
  auto space = grid_space(p);
  auto lat = [&](const Config& c, const std::string& w) { return grid_latency(p, c, w); };
  FakeMeasurer fm;
  fm.latency = lat;
  auto st = State::open(temp_dir("model") / "state.json", "fp", false);
  ASSERT_TRUE(st.ok());
  SearchOptions o;
  o.max_configs = 36;  // a quarter of the space: auto picks the model
  auto out = run_search(space, fm, *st, o);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->strategy, Strategy::kModel);
  std::set<std::string> rung0;
  for (const auto& [id, r] : fm.calls)
    if (r == 0) rung0.insert(id);
  EXPECT_EQ(rung0.size(), 36u);
  EXPECT_GT(out->top_rung, 0);  // the survivors are re-timed longer, as in halving
  auto pm = build_perf_map(space, *st);
  ASSERT_TRUE(pm.ok());
  // Per regime: the true latency of the chosen configuration, against the optimum of the whole
  // space and against the best of the fixed pseudo-random sample of the same budget.
  const auto random = candidates(space, 36);
  for (const auto& e : pm->entries) {
    auto truth = [&](const Config& c) {
      double l = 0;
      for (const auto& w : e.regime->workloads) l += std::log(grid_latency(p, c, w));
      return l;
    };
    double optimum = 1e300, sampled = 1e300;
    for (const auto& c : space.configs) optimum = std::min(optimum, truth(c));
    for (const Config* c : random) sampled = std::min(sampled, truth(*c));
    const double chosen = truth(*find_config(space, e.ranked.front().config));
    EXPECT_LE(chosen, sampled) << e.regime->name;
    EXPECT_LE(chosen - optimum, std::log(1.06) * static_cast<double>(e.regime->workloads.size())) << e.regime->name;
  }
}

TEST(Search, ModelGuidedResumeMeasuresNothingTwiceAndEndsWithTheSameMap) {
  auto p = toy_pack();
  auto space = grid_space(p);
  auto lat = [&](const Config& c, const std::string& w) { return grid_latency(p, c, w); };
  SearchOptions base;
  base.max_configs = 36;
  // Killed inside batches, at varying points.
  expect_resumes_like_uninterrupted(
      space, lat, base, [](int session) { return 5 + 3 * session; }, "model_resume");
}

// Held-out check of the model-guided search on recorded measurements (not what its constants were
// set on: the synthetic grid above). Each recorded search measured every configuration at rung 0;
// replayed, the model spends a quarter or a third of that, and so does the fixed pseudo-random
// sample. The regret of a ranking list (the tuned set, each regime) is the true latency of its
// pick over the best recorded, less 1. The model must not do worse than the sample on average.
class ReplayMeasurer : public Measurer {
 public:
  std::map<std::string, Measurement> rung0;
  Result<Measurement> measure(const Config& c, const std::vector<std::string>&, int rung) override {
    Measurement m = rung0.at(c.id());
    m.rung = rung;
    return m;
  }
};

TEST(Search, ModelGuidedOnRecordedSearchesDoesNoWorseThanARandomSample) {
  struct Recorded {
    const char* pack;
    const char* state;
  };
  const Recorded recorded[] = {
      {"tasks/cuda/rmsnorm", "bench/results/h200/tune_2026-12-02_run31/rmsnorm/state.json"},
      // run 61: the softmax space of the current tunables.toml (CACHE added after run 31, UNROLL after run 59).
      {"tasks/cuda/softmax", "bench/results/h200/tune_2026-12-04_run61/softmax/state.json"},
      {"tasks/cuda/gemm", "bench/results/h200/tune_2026-12-02_run31/gemm/state.json"},
      {"tasks/host/gemm", "bench/results/host/tune_gemm_2026-12-02_state.json"},
  };
  const std::filesystem::path src = KDA_SOURCE_DIR;
  double model_sum = 0, random_sum = 0;
  int cases = 0;
  for (const auto& r : recorded) {
    SCOPED_TRACE(r.state);
    auto pack = task::load_task_pack(src / r.pack);
    ASSERT_TRUE(pack.ok()) << pack.status().message();
    auto text = fs::read_file(src / r.state);
    ASSERT_TRUE(text.ok());
    ReplayMeasurer replay;
    const nlohmann::json doc = nlohmann::json::parse(*text);
    for (const auto& j : doc.at("measurements")) {
      auto m = Measurement::from_json(j);
      ASSERT_TRUE(m.ok());
      if (m->rung == 0) replay.rung0[m->config] = *m;
    }
    const auto sol_dir = src / r.pack / "solutions/tunable";
    auto sol = task::load_solution(sol_dir);
    ASSERT_TRUE(sol.ok());
    std::vector<std::string> paths;
    for (const auto& f : sol->sources) paths.push_back(f.path);
    auto tunables = load_tunables(sol_dir, pack->definition, sol->spec.entry_point, paths);
    ASSERT_TRUE(tunables.ok()) << tunables.status().message();
    auto all = enumerate_configs(*tunables);
    ASSERT_TRUE(all.ok());
    // The space: the recorded configurations (a budgeted recorded search measured a subset).
    SearchSpace space;
    for (const auto& c : *all)
      if (replay.rung0.count(c.id())) space.configs.push_back(c);
    ASSERT_FALSE(replay.rung0.empty());
    ASSERT_EQ(space.configs.size(), replay.rung0.size()) << "recorded configurations no longer in tunables.toml";
    const Measurement& any = replay.rung0.begin()->second;
    std::vector<const task::Workload*> ws;
    for (const auto& w : pack->workloads)
      if (any.times.count(w.uuid)) ws.push_back(&w), space.workloads.push_back(w.uuid);
    for (const auto& [id, m] : replay.rung0)
      for (const auto& [uuid, _] : m.times) space.applicable[id].push_back(uuid);
    space.regimes = group_regimes(*pack, ws, tunables->regimes);
    std::vector<std::vector<std::string>> lists{space.workloads};
    for (const auto& g : space.regimes) lists.push_back(g.workloads);
    auto truth = [&](const std::string& id, const std::vector<std::string>& list) {
      const Measurement& m = replay.rung0.at(id);
      if (!m.passed) return 1e300;
      double l = 0;
      for (const auto& w : list) {
        auto t = m.times.find(w);
        if (t == m.times.end()) return 1e300;
        l += std::log(t->second.ms);
      }
      return l / static_cast<double>(list.size());
    };
    for (double share : {0.25, 1.0 / 3}) {
      const int budget = std::max(4, static_cast<int>(share * static_cast<double>(space.configs.size())));
      auto st = State::open(temp_dir("replay") / "state.json", "fp", false);
      ASSERT_TRUE(st.ok());
      SearchOptions o;
      o.strategy = Strategy::kModel;
      o.max_configs = budget;
      ASSERT_TRUE(run_search(space, replay, *st, o).ok());
      const auto sample = candidates(space, budget);
      double model_regret = 0, random_regret = 0;
      for (const auto& list : lists) {
        double best = 1e300, sampled = 1e300, picked = 1e300;
        for (const auto& c : space.configs) best = std::min(best, truth(c.id(), list));
        for (const Config* c : sample) sampled = std::min(sampled, truth(c->id(), list));
        auto ranked = rank(space, *st, list);
        if (!ranked.empty()) picked = truth(ranked.front().config, list);
        model_regret += std::exp(picked - best) - 1;
        random_regret += std::exp(sampled - best) - 1;
      }
      model_regret /= static_cast<double>(lists.size());
      random_regret /= static_cast<double>(lists.size());
      std::cout << r.pack << " " << space.configs.size() << " configurations, budget " << budget << ", " << lists.size()
                << " lists: mean regret model " << model_regret << ", random sample " << random_regret << "\n";
      model_sum += model_regret;
      random_sum += random_regret;
      ++cases;
    }
  }
  std::cout << "over " << cases << " replays: mean regret model " << model_sum / cases << ", random sample "
            << random_sum / cases << "\n";
  EXPECT_LE(model_sum, random_sum);
}

TEST(PerfMap, WritesMapJsonAndMarkdown) {
  auto p = toy_pack();
  auto space = toy_space(p, 10);
  FakeMeasurer fm;
  fm.latency = [&](const Config& c, const std::string& w) { return toy_latency(p, c, w); };
  auto dir = temp_dir("map");
  auto st = State::open(dir / "state.json", "fp", false);
  ASSERT_TRUE(run_search(space, fm, *st, {}).ok());
  auto pm = build_perf_map(space, *st);
  ASSERT_TRUE(pm.ok());
  TuneResult r;
  r.configs_total = 10;
  r.configs_measured = 10;
  ASSERT_TRUE(write_perf_map(*pm, space, dir, r).ok());
  auto j = nlohmann::json::parse(*fs::read_file(dir / "map.json"));
  ASSERT_EQ(j["regimes"].size(), space.regimes.size());
  const auto& first = j["regimes"][0];
  EXPECT_EQ(first["best"]["config"]["params"]["A"], 2);
  EXPECT_LE(first["best"]["ci_low_ms"].get<double>(), first["best"]["latency_ms"].get<double>());
  EXPECT_GE(first["best"]["ci_high_ms"].get<double>(), first["best"]["latency_ms"].get<double>());
  EXPECT_GE(first["runners_up"].size(), 1u);  // rung 1 holds the best two of each ranking
  EXPECT_LE(first["runners_up"].size(), 3u);
  EXPECT_EQ(first["ranges"]["m"][0], 16);
  EXPECT_TRUE(j.contains("best_single"));
  auto md = *fs::read_file(dir / "map.md");
  EXPECT_NE(md.find("| regime | routes on |"), std::string::npos);
  EXPECT_NE(md.find("A=2"), std::string::npos);
}

TEST(Regimes, RegimesFileOverridesAndRejectsOtherSections) {
  auto p = toy_pack();
  auto dir = temp_dir("regimes");
  ASSERT_TRUE(fs::write_file_atomic(dir / "r.toml", "[[regime]]\nname = \"tiny\"\nn = [1, 3]\n").ok());
  auto r = load_regimes_file(dir / "r.toml", p.definition);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].ranges.at("n"), (Span{1, 3}));
  ASSERT_TRUE(fs::write_file_atomic(dir / "bad.toml", "[parameters.A]\nvalues = [1]\n").ok());
  auto bad = load_regimes_file(dir / "bad.toml", p.definition);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.toml:1: parameters: unknown section"), std::string::npos)
      << bad.status().message();
}

TEST(Search, StrategyNames) {
  EXPECT_EQ(*parse_strategy("halving"), Strategy::kHalving);
  EXPECT_EQ(*parse_strategy("model"), Strategy::kModel);
  EXPECT_STREQ(strategy_name(Strategy::kModel), "model");
  EXPECT_FALSE(parse_strategy("random").ok());
}

}  // namespace
}  // namespace kda::tune
