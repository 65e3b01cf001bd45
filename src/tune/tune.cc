#include "tune/tune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "eval/solution_build.h"
#include "tune/generate.h"
#include "tune/guard.h"
#include "tune/perf_map.h"
#include "tune/regimes.h"
#include "tune/search.h"
#include "tune/tunables.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kda::tune {

namespace {

double geomean_of(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += std::log(std::max(x, 1e-12));
  return std::exp(s / static_cast<double>(v.size()));
}

WorkloadTime time_of(const eval::WorkloadResult& w) {
  // Normal-approximation 95 % interval of the pooled samples' mean, centred on the evaluator's latency.
  const auto& s = w.candidate;
  const double half = s.n > 1 ? 1.96 * s.stddev / std::sqrt(static_cast<double>(s.n)) : 0.0;
  return {w.latency_ms, std::max(w.latency_ms - half, s.n > 0 ? std::min(s.min, w.latency_ms) : 0.0),
          w.latency_ms + half};
}

// The official evaluator as a Measurer: every configuration is its own plain solution, compiled
// ahead in parallel into the content-addressed build cache (a configuration never compiles twice),
// then evaluated (correctness on fresh seeds first, then timing) without the baseline.
class EvalMeasurer : public Measurer {
 public:
  EvalMeasurer(const task::TaskPack& pack, const task::Solution& base, const Tunables& t, const TuneOptions& o)
      : pack_(pack), base_(base), t_(t), o_(o) {}

  void prepare(const std::vector<const Config*>& configs) override {
    std::vector<const Config*> todo;
    for (const Config* c : configs)
      if (!prepared_.count(c->id())) todo.push_back(c);
    if (todo.empty()) return;
    const int jobs = o_.jobs > 0 ? o_.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::mutex mu;
    size_t next = 0;
    auto worker = [&] {
      while (true) {
        const Config* c;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (next >= todo.size()) return;
          c = todo[next++];
        }
        auto sol = config_solution(base_, t_, *c);
        if (!sol.ok()) continue;  // measure() reports it
        eval::BuildSettings bs;
        bs.cuda_arch = o_.eval.cuda_arch;
        bs.cuda = pack_.backend == task::Backend::kCuda;
        bs.allowed_libraries = pack_.settings.libraries;
        (void)eval::build_solution(*sol, bs);  // warms the cache; the evaluator's own build then hits
        std::lock_guard<std::mutex> lock(mu);
        prepared_.insert(c->id());
      }
    };
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int i = 1; i < std::min<int>(jobs, static_cast<int>(todo.size())); ++i) threads.emplace_back(worker);
    worker();
    for (auto& th : threads) th.join();
    if (o_.progress)
      o_.progress(fmt::format("compiled {} configurations on {} jobs in {:.1f} s", todo.size(), jobs,
                              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
  }

  Result<Measurement> measure(const Config& c, const std::vector<std::string>& workloads, int rung) override {
    auto sol = config_solution(base_, t_, c);
    if (!sol.ok()) return sol.status();
    KDA_ASSIGN_OR_RETURN(Measurement m, measure_solution(*sol, workloads, rung, false));
    m.config = c.id();
    m.rung = rung;
    return m;
  }

  size_t parallelism() const override { return o_.evaluate_many ? std::max<size_t>(1, o_.parallelism) : 1; }

  Result<std::vector<Measurement>> measure_many(
      const std::vector<std::pair<const Config*, std::vector<std::string>>>& batch, int rung) override {
    if (!o_.evaluate_many) return Measurer::measure_many(batch, rung);
    std::vector<task::Solution> sols;
    std::vector<std::vector<std::string>> lists;
    for (const auto& [c, ws] : batch) {
      KDA_ASSIGN_OR_RETURN(task::Solution sol, config_solution(base_, t_, *c));
      sols.push_back(std::move(sol));
      lists.push_back(ws);
    }
    KDA_ASSIGN_OR_RETURN(std::vector<Measurement> out, measure_solutions(sols, lists, rung, false));
    for (size_t i = 0; i < out.size(); ++i) {
      out[i].config = batch[i].first->id();
      out[i].rung = rung;
    }
    return out;
  }

  // Several solutions, each on its workloads at `rung`'s timing: one batch through evaluate_many, or
  // one measure_solution after another.
  Result<std::vector<Measurement>> measure_solutions(const std::vector<task::Solution>& sols,
                                                     const std::vector<std::vector<std::string>>& workloads, int rung,
                                                     bool keep_partial) {
    std::vector<Measurement> out;
    if (!o_.evaluate_many) {
      for (size_t i = 0; i < sols.size(); ++i) {
        KDA_ASSIGN_OR_RETURN(Measurement m, measure_solution(sols[i], workloads[i], rung, keep_partial));
        out.push_back(std::move(m));
      }
      return out;
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<EvalJob> jobs;
    for (size_t i = 0; i < sols.size(); ++i) jobs.push_back({sols[i], rung_options(workloads[i], rung)});
    KDA_ASSIGN_OR_RETURN(std::vector<eval::EvalReport> reports, o_.evaluate_many(jobs));
    if (reports.size() != jobs.size())
      return Status::internal(fmt::format("tune: {} reports for {} evaluations", reports.size(), jobs.size()));
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& report : reports) {
      Measurement m = measurement_of(report, keep_partial);
      m.wall_s = wall;  // the batch's: its evaluations ran side by side
      out.push_back(std::move(m));
    }
    return out;
  }

  // One solution (a configuration, or the pack's baseline for the guard) on `workloads` at `rung`'s
  // timing. keep_partial: the times of the workloads that passed stay when another failed (the guard
  // routes per workload); otherwise a failure anywhere clears them (the search's rule).
  Result<Measurement> measure_solution(const task::Solution& sol, const std::vector<std::string>& workloads, int rung,
                                       bool keep_partial) {
    if (o_.evaluate_many) {
      KDA_ASSIGN_OR_RETURN(std::vector<Measurement> one, measure_solutions({sol}, {workloads}, rung, keep_partial));
      return std::move(one.front());
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::string list;
    for (const auto& w : workloads) list += (list.empty() ? "" : ",") + w;
    const int trials = o_.screen_trials + rung, iterations = o_.screen_iterations * static_cast<int>(std::pow(3, rung));
    eval::EvalReport report;
    if (o_.screen) {
      if (!screener_) {
        eval::EvalOptions e = o_.eval;
        e.progress = nullptr;
        KDA_ASSIGN_OR_RETURN(screener_, eval::Screener::open(pack_, e));
      }
      // Rung 0 looks at every configuration: correctness only; the ones that go on get every check.
      KDA_ASSIGN_OR_RETURN(
          report, screener_->evaluate(sol, list, trials, o_.screen_warmup, iterations,
                                      rung == 0 ? eval::ScreenChecks::kCorrectness : eval::ScreenChecks::kAll));
    } else {
      KDA_ASSIGN_OR_RETURN(report, eval::evaluate(pack_, sol, rung_options(workloads, rung)));
    }
    Measurement m = measurement_of(report, keep_partial);
    m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return m;
  }

  // The evaluator's options of one measurement at `rung`: screening timing, longer at each rung, no baseline.
  eval::EvalOptions rung_options(const std::vector<std::string>& workloads, int rung) const {
    eval::EvalOptions e = o_.eval;
    e.with_baseline = false;
    e.progress = nullptr;
    e.workloads.clear();
    for (const auto& w : workloads) e.workloads += (e.workloads.empty() ? "" : ",") + w;
    e.trials = o_.screen_trials + rung;
    e.warmup = o_.screen_warmup;
    e.iterations = o_.screen_iterations * static_cast<int>(std::pow(3, rung));
    return e;
  }

  // A report as a measurement: passed only when every workload passed; keep_partial keeps the times of
  // the workloads that passed when another failed (the guard routes per workload).
  static Measurement measurement_of(const eval::EvalReport& report, bool keep_partial) {
    Measurement m;
    m.passed = report.all_passed && !report.workloads.empty();
    for (const auto& w : report.workloads) {
      if (w.verdict != eval::Verdict::kPassed) {
        if (m.reason.empty())
          m.reason = std::string(eval::verdict_name(w.verdict)) + (w.reason.empty() ? "" : ":" + w.reason);
        continue;
      }
      m.times[w.uuid] = time_of(w);
    }
    if (!m.passed && !keep_partial) m.times.clear();
    m.phases = report.phases.to_json(report.wall_s);
    return m;
  }

 private:
  const task::TaskPack& pack_;
  const task::Solution& base_;
  const Tunables& t_;
  const TuneOptions& o_;
  std::set<std::string> prepared_;
  std::unique_ptr<eval::Screener> screener_;  // o_.screen: one session for every measurement
};

Result<std::vector<const task::Workload*>> tuned_workloads(const task::TaskPack& pack, const std::string& sel) {
  std::vector<const task::Workload*> out;
  if (sel == "all") {
    for (const auto& w : pack.workloads) out.push_back(&w);
  } else if (sel == "holdout") {
    for (const auto& w : pack.holdout) out.push_back(&w);
  } else if (sel == "dev" || sel.empty()) {
    for (const auto& u : pack.dev_uuids)
      if (const auto* w = pack.workload(u)) out.push_back(w);
  } else {
    size_t pos = 0;
    while (pos <= sel.size()) {
      size_t comma = sel.find(',', pos);
      std::string u = sel.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      const auto* w = pack.workload(u);
      if (w == nullptr) return Status::not_found("--workloads: no workload '" + u + "' in " + pack.root.string());
      out.push_back(w);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  if (out.empty()) return Status::bad_input("--workloads '" + sel + "' selects no workload");
  return out;
}

std::string fingerprint_of(const task::Solution& base, const std::string& tunables_text,
                           const std::vector<std::string>& workloads, const TuneOptions& o,
                           const task::TaskPack& pack) {
  nlohmann::json j{{"solution", task::solution_hash(base)},
                   {"tunables", sha256_hex(tunables_text)},
                   {"definition", pack.definition.name},
                   {"workloads", workloads},
                   {"screen", {o.screen_trials, o.screen_warmup, o.screen_iterations}},
                   {"arch", o.eval.cuda_arch}};
  return sha256_hex(j.dump());
}

}  // namespace

nlohmann::json TuneResult::to_json() const {
  nlohmann::json m = nlohmann::json::array();
  for (const auto& c : map)
    m.push_back({{"regime", c.regime},
                 {"config", c.config},
                 {"latency_ms", c.latency_ms},
                 {"ci_low_ms", c.ci_low_ms},
                 {"ci_high_ms", c.ci_high_ms},
                 {"workloads", c.workloads}});
  return {{"dispatcher_dir", dispatcher_dir.string()},
          {"best_single_dir", best_single_dir.string()},
          {"map", m},
          {"baseline_geomean_ms", baseline_geomean_ms},
          {"dispatcher_speedup_ci_low", dispatcher_speedup_ci_low},
          {"best_single_speedup_ci_low", best_single_speedup_ci_low},
          {"best_single_geomean_ms", best_single_geomean_ms},
          {"dispatcher_geomean_ms", dispatcher_geomean_ms},
          {"dispatcher_passed", dispatcher_passed},
          {"final_timing", final_timing},
          {"dispatcher_vs_best_single", dispatcher_vs_best_single},
          {"best_single_screen_ms", best_single_screen_ms},
          {"dispatcher_screen_ms", dispatcher_screen_ms},
          {"configs_measured", configs_measured},
          {"configs_total", configs_total},
          {"configs_failed", configs_failed},
          {"guard", guard},
          {"worst_visible_ratio", worst_visible_ratio},
          {"wall_s", wall_s}};
}

namespace {

// Every configuration against every tuned workload (which ones its constraints admit), and the
// regimes the workloads fall into.
Result<SearchSpace> search_space(const task::TaskPack& pack, const Tunables& tunables,
                                 const std::vector<const task::Workload*>& workloads) {
  SearchSpace space;
  KDA_ASSIGN_OR_RETURN(space.configs, enumerate_configs(tunables));
  for (const auto* w : workloads) space.workloads.push_back(w->uuid);
  for (const auto& c : space.configs) {
    auto& list = space.applicable[c.id()];
    for (const auto* w : workloads) {
      std::map<std::string, int64_t> axes = pack.definition.const_axes();
      for (const auto& [k, v] : w->axes) axes[k] = v;
      KDA_ASSIGN_OR_RETURN(bool ok, applies_to(tunables, c, axes));
      if (ok) list.push_back(w->uuid);
    }
  }
  space.regimes = group_regimes(pack, workloads, tunables.regimes);
  return space;
}

// Every visible workload (workloads.jsonl; never the holdout) and its uuid, in the pack's order.
struct Visible {
  std::vector<const task::Workload*> workloads;
  std::vector<std::string> uuids;
};
Visible visible_of(const task::TaskPack& pack) {
  Visible v;
  for (const auto& w : pack.workloads) {
    v.workloads.push_back(&w);
    v.uuids.push_back(w.uuid);
  }
  return v;
}

// The guard (tune/guard.h): the finalists and the baseline screened on every visible workload in
// the same session, at rung 1's timing, then the plan. Skipped (saying why) without a baseline.
Result<GuardPlan> guard_phase(const task::TaskPack& pack, const TuneOptions& options, const task::Solution& base,
                              const Tunables& tunables, const SearchSpace& space, const PerfMap& pm,
                              EvalMeasurer& measurer) {
  GuardPlan skipped;
  const task::Solution* baseline = pack.baseline();
  if (!options.guard || baseline == nullptr) {
    skipped.skipped = !options.guard ? "--no-guard" : "the pack has no baseline";
    return skipped;
  }
  const auto [visible, uuids] = visible_of(pack);
  const auto finalists = guard_finalists(pm, space.configs.empty() ? std::string() : space.configs.front().id());
  if (options.progress)
    options.progress(fmt::format("guard: {} finalist configuration(s) and the baseline on all {} visible workloads",
                                 finalists.size(), uuids.size()));
  std::vector<task::Solution> sols;
  std::vector<std::string> targets;
  for (const auto& id : finalists) {
    KDA_ASSIGN_OR_RETURN(task::Solution sol, config_solution(base, tunables, *find_config(space, id)));
    sols.push_back(std::move(sol));
    targets.push_back(id);
  }
  sols.push_back(*baseline);
  targets.push_back(kBaselineTarget);
  KDA_ASSIGN_OR_RETURN(
      std::vector<Measurement> ms,
      measurer.measure_solutions(sols, std::vector<std::vector<std::string>>(sols.size(), uuids), kGuardRung, true));
  std::map<std::string, Measurement> measured;
  for (size_t i = 0; i < targets.size(); ++i) measured[targets[i]] = std::move(ms[i]);
  KDA_ASSIGN_OR_RETURN(GuardPlan plan, plan_guard(pack, pm, finalists, visible, measured));
  if (options.progress && plan.ran)
    options.progress(fmt::format("guard: fallback {}: {}", plan.fallback.substr(0, 8), plan.fallback_why));
  if (options.progress)
    for (const auto& g : plan.regimes)
      options.progress(fmt::format("guard: {} -> {}: {}", g.regime,
                                   g.target == kBaselineTarget ? std::string("baseline") : g.target.substr(0, 8),
                                   g.why));
  return plan;
}

// The dispatcher: each regime's winner (as the guard routed it, when it ran), shapes outside every
// regime by the rule the guard's check let stand (the nearest regime, or the margin rule over the
// visible workloads), else to the fallback (the guard's, which may be the baseline, or the best single
// configuration), and the pack's baseline compiled in when a route or the fallback goes to it.
Result<task::Solution> dispatcher_of(const task::TaskPack& pack, const task::Solution& base, const Tunables& tunables,
                                     const SearchSpace& space, const PerfMap& pm, const GuardPlan& guard) {
  std::vector<Config> used;
  bool any_base = false;
  // Configurations in the order first used; the baseline's slot is fixed after all of them below.
  constexpr size_t kBase = static_cast<size_t>(-1);
  auto index_of = [&](const std::string& id) {
    if (id == kBaselineTarget) {
      any_base = true;
      return kBase;
    }
    for (size_t i = 0; i < used.size(); ++i)
      if (used[i].id() == id) return i;
    used.push_back(*find_config(space, id));
    return used.size() - 1;
  };
  const std::string& fallback_id = guard.ran ? guard.fallback : pm.best_single;
  size_t fallback = index_of(fallback_id);
  std::vector<Route> table;
  Unmatched unmatched;
  if (guard.ran) {
    if (guard.unseen == "nearest") unmatched.rule = Unmatched::Rule::kNearest;
    if (guard.unseen == "margin") unmatched.rule = Unmatched::Rule::kMargin;
    unmatched.reach = guard.reach;
    // Beyond the rule's reach nothing was checked, the fallback configuration included: the shape runs
    // the baseline, what it ran before tuning (the host pack's 1 x 1, 7 from the nearest regime, read
    // 0.83x-0.91x on a ROWS=4 fallback configuration in runs I1-I3, 0.9x-1.0x on the baseline).
    if (unmatched.rule != Unmatched::Rule::kFallback && std::isfinite(guard.reach) && pack.baseline() != nullptr)
      unmatched.beyond = index_of(kBaselineTarget);
    for (const auto& g : guard.regimes) {
      if (g.ranges.empty()) continue;
      // The fallback serves a regime routed to it when unseen shapes go to the fallback too;
      // under the other rules every regime is a route, so that no rule reroutes its shapes.
      if (g.target == fallback_id && unmatched.rule == Unmatched::Rule::kFallback) continue;
      table.push_back({g.regime, g.ranges, index_of(g.target)});
    }
    if (unmatched.rule == Unmatched::Rule::kMargin) {
      for (const auto& p : guard.points)
        unmatched.points.push_back(
            {p.axes, index_of(p.target),
             std::find(guard.vetoed.begin(), guard.vetoed.end(), p.workload) != guard.vetoed.end()});
      for (const auto& [target, ws] : guard.slower_on)
        for (const auto& w : ws)
          for (const auto& q : guard.points)
            if (q.workload == w) unmatched.slower.push_back({q.axes, index_of(target)});
    }
  } else {
    for (const auto& e : pm.entries) {
      // Regimes routed to the best single configuration need no route: the fallback serves them.
      if (e.ranked.empty() || e.regime->fallback_only || e.chosen == pm.best_single) continue;
      table.push_back({e.regime->name, e.regime->ranges, index_of(e.chosen)});
    }
  }
  if (used.empty()) used.push_back(*find_config(space, pm.best_single));  // the table needs one configuration
  auto slot = [&](size_t& c) { c = c == kBase ? used.size() : c; };
  slot(fallback);
  for (auto& r : table) slot(r.config);
  for (auto& p : unmatched.points) slot(p.config);
  for (auto& p : unmatched.slower) slot(p.config);
  if (unmatched.beyond) slot(*unmatched.beyond);
  unmatched.factor = kMarginFactor;
  return dispatcher_solution(base, pack.definition, tunables, used, table, fallback,
                             any_base ? pack.baseline() : nullptr, unmatched);
}

// The shipped check: the dispatcher as built and the baseline, screened together on every visible
// workload at the guard's timing. The guard screened each configuration built alone; in the dispatcher's
// library its code lies elsewhere, and a host row loop's speed can follow where it lies (host rmsnorm at
// 16384 x 4: 0.93x the baseline built alone, 0.735x inside the dispatcher, in four builds each;
// bench/results/host/placement_2026-12-07.md). A visible workload where the dispatcher is slower gets a
// route of its shape to the baseline and the dispatcher is built and screened again, kShippedPasses
// screenings at most; what the last one found slower stays in map.json's guard.shipped.
constexpr int kShippedPasses = 2;
Result<task::Solution> shipped_check(const task::TaskPack& pack, const TuneOptions& options, const task::Solution& base,
                                     const Tunables& tunables, const SearchSpace& space, const PerfMap& pm,
                                     GuardPlan& guard, EvalMeasurer& measurer, task::Solution disp) {
  if (!guard.ran || pack.baseline() == nullptr) return disp;
  const auto [visible, uuids] = visible_of(pack);
  for (int pass = 1; pass <= kShippedPasses; ++pass) {
    if (options.progress)
      options.progress(fmt::format("guard: the dispatcher as built and the baseline on all {} visible workloads ({})",
                                   uuids.size(), pass));
    KDA_ASSIGN_OR_RETURN(std::vector<Measurement> ms,
                         measurer.measure_solutions({disp, *pack.baseline()}, {uuids, uuids}, kGuardRung, true));
    if (ms.size() != 2) return Status::internal("tune: the shipped check came back incomplete");
    nlohmann::json slower = reroute_shipped_regressions(guard, visible, ms[0], ms[1]);
    const bool rerouted =
        std::any_of(slower.begin(), slower.end(), [](const nlohmann::json& s) { return s.value("rerouted", false); });
    if (options.progress)
      options.progress(slower.empty()
                           ? std::string("guard: the dispatcher as built is slower than the baseline on no "
                                         "visible workload")
                           : fmt::format("guard: the dispatcher as built is slower than the baseline on {} "
                                         "visible workload(s){}",
                                         slower.size(),
                                         rerouted && pass < kShippedPasses ? "; their shapes go to the baseline" : ""));
    guard.shipped.push_back({{"pass", pass}, {"slower", slower}});
    if (!rerouted || pass == kShippedPasses) break;
    KDA_ASSIGN_OR_RETURN(disp, dispatcher_of(pack, base, tunables, space, pm, guard));
  }
  return disp;
}

// The official timing of the dispatcher and the best single configuration (task.toml or the
// caller's overrides) with the baseline interleaved, then the two head-to-head.
Status final_timing(const task::TaskPack& pack, const TuneOptions& options, const SearchSpace& space,
                    const task::Solution& disp, const task::Solution& single, TuneResult& result) {
  auto say = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };
  eval::EvalOptions e = options.eval;
  e.with_baseline = pack.baseline() != nullptr;
  e.progress = nullptr;
  std::string list;
  for (const auto& w : space.workloads) list += (list.empty() ? "" : ",") + w;
  e.workloads = list;
  say("final timing: dispatcher and best single configuration on the tuned workloads");
  eval::EvalReport rd, rs;
  if (options.evaluate_many) {
    KDA_ASSIGN_OR_RETURN(std::vector<eval::EvalReport> both, options.evaluate_many({{disp, e}, {single, e}}));
    if (both.size() != 2) return Status::internal("tune: the final timing came back incomplete");
    rd = std::move(both[0]);
    rs = std::move(both[1]);
  } else {
    KDA_ASSIGN_OR_RETURN(rd, eval::evaluate(pack, disp, e));
    KDA_ASSIGN_OR_RETURN(rs, eval::evaluate(pack, single, e));
  }
  std::vector<double> d, s, b;
  for (const auto& w : rd.workloads) {
    d.push_back(w.latency_ms);
    if (w.baseline_ms > 0) b.push_back(w.baseline_ms);
  }
  for (const auto& w : rs.workloads) s.push_back(w.latency_ms);
  result.dispatcher_passed = rd.all_passed;
  if (rd.all_passed && rd.geomean_ci) result.dispatcher_speedup_ci_low = rd.geomean_ci->low;
  if (rs.all_passed && rs.geomean_ci) result.best_single_speedup_ci_low = rs.geomean_ci->low;
  result.dispatcher_geomean_ms = rd.all_passed ? geomean_of(d) : 0;
  if (rs.all_passed) result.best_single_geomean_ms = geomean_of(s);
  if (b.size() == rd.workloads.size()) result.baseline_geomean_ms = geomean_of(b);
  result.final_timing = true;
  if (!rd.all_passed) say("the dispatcher did NOT pass the final evaluation; use best_single");
  // Head-to-head: the dispatcher timed against the best single configuration as its baseline,
  // call by call on the same inputs (two separate evaluations differ by more than the few per cent
  // routing wins on a noisy host).
  if (rd.all_passed && rs.all_passed && options.evaluate_many) {
    say("final timing: no head-to-head of the dispatcher against the best single configuration through a pool (a "
        "server times its pack's baseline beside a solution, not another solution)");
  } else if (rd.all_passed && rs.all_passed) {
    eval::EvalOptions h = e;
    h.with_baseline = true;
    h.baseline = single;
    say("final timing: dispatcher against the best single configuration, interleaved");
    KDA_ASSIGN_OR_RETURN(auto rh, eval::evaluate(pack, disp, h));
    if (rh.all_passed) result.dispatcher_vs_best_single = rh.score_geomean;
  }
  return {};
}

}  // namespace

Result<TuneResult> tune(const task::TaskPack& pack, const std::filesystem::path& solution_dir,
                        const TuneOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  auto say = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };
  if (options.out_dir.empty()) return Status::bad_input("tune: no output directory (--out)");
  KDA_ASSIGN_OR_RETURN(task::Solution base, task::load_solution(solution_dir));
  if (base.definition != pack.definition.name)
    return Status::bad_input(solution_dir.string() + ": solution is for definition '" + base.definition +
                             "', the pack is '" + pack.definition.name + "'");
  if (base.spec.language != "cpp" && base.spec.language != "cuda")
    return Status::bad_input(solution_dir.string() + ": kda tune builds cpp and cuda solutions, not '" +
                             base.spec.language + "'");
  std::vector<std::string> paths;
  for (const auto& s : base.sources) paths.push_back(s.path);
  KDA_ASSIGN_OR_RETURN(Tunables tunables, load_tunables(solution_dir, pack.definition, base.spec.entry_point, paths));
  KDA_ASSIGN_OR_RETURN(std::string tunables_text, fs::read_file(solution_dir / kTunablesFile));
  if (!options.regimes_file.empty()) {
    KDA_ASSIGN_OR_RETURN(tunables.regimes, load_regimes_file(options.regimes_file, pack.definition));
  }
  KDA_ASSIGN_OR_RETURN(auto strategy, parse_strategy(options.strategy));
  KDA_ASSIGN_OR_RETURN(auto workloads, tuned_workloads(pack, options.eval.workloads));

  KDA_ASSIGN_OR_RETURN(SearchSpace space, search_space(pack, tunables, workloads));
  say("regimes:\n" + regimes_table(space.regimes));

  KDA_RETURN_IF_ERROR(fs::ensure_dir(options.out_dir));
  const std::string fp = fingerprint_of(base, tunables_text, space.workloads, options, pack);
  KDA_ASSIGN_OR_RETURN(State state, State::open(options.out_dir / "state.json", fp, options.resume));
  if (options.resume) say(fmt::format("resuming: {} measurements in state.json", state.size()));

  EvalMeasurer measurer(pack, base, tunables, options);
  SearchOptions so;
  so.strategy = strategy;
  so.max_configs = options.max_configs;
  so.max_minutes = options.max_minutes;
  so.progress = options.progress;
  so.stop_after = options.stop_after;
  KDA_ASSIGN_OR_RETURN(SearchOutcome outcome, run_search(space, measurer, state, so));
  if (!outcome.budget_note.empty()) say(outcome.budget_note);
  if (outcome.stopped)
    return Status::failed("tune: stopped after " + std::to_string(outcome.measured_new) +
                          " measurements (--resume continues)");

  TuneResult result;
  result.configs_measured = outcome.configs_measured;
  result.configs_failed = outcome.configs_failed;
  result.configs_total = static_cast<int>(space.configs.size());
  KDA_ASSIGN_OR_RETURN(PerfMap pm, build_perf_map(space, state));
  if (pm.best_single.empty()) {
    KDA_RETURN_IF_ERROR(write_perf_map(pm, space, options.out_dir, result));
    return Status::failed(fmt::format("tune: none of the {} measured configurations passed on every tuned workload",
                                      outcome.configs_measured));
  }
  const Config* best = find_config(space, pm.best_single);
  KDA_ASSIGN_OR_RETURN(task::Solution single, config_solution(base, tunables, *best));
  result.best_single_dir = options.out_dir / "best_single";
  KDA_RETURN_IF_ERROR(write_solution_dir(single, result.best_single_dir));

  KDA_ASSIGN_OR_RETURN(GuardPlan guard, guard_phase(pack, options, base, tunables, space, pm, measurer));
  result.worst_visible_ratio = guard.ran ? guard.worst_ratio : 0;
  KDA_ASSIGN_OR_RETURN(task::Solution built, dispatcher_of(pack, base, tunables, space, pm, guard));
  KDA_ASSIGN_OR_RETURN(task::Solution disp,
                       shipped_check(pack, options, base, tunables, space, pm, guard, measurer, std::move(built)));
  result.guard = guard.to_json();
  result.dispatcher_dir = options.out_dir / "dispatcher";
  KDA_RETURN_IF_ERROR(write_solution_dir(disp, result.dispatcher_dir));
  result.best_single_geomean_ms = result.best_single_screen_ms = pm.best_single_geomean_ms;
  result.dispatcher_geomean_ms = result.dispatcher_screen_ms = pm.dispatcher_geomean_ms;
  result.dispatcher_passed = true;

  if (options.final_eval) {
    KDA_RETURN_IF_ERROR(final_timing(pack, options, space, disp, single, result));
  }
  for (const auto& e : pm.entries) {
    if (e.ranked.empty()) continue;
    auto it = std::find_if(e.ranked.begin(), e.ranked.end(), [&](const Ranked& x) { return x.config == e.chosen; });
    const Ranked& top = it != e.ranked.end() ? *it : e.ranked.front();
    result.map.push_back({e.regime->name, find_config(space, top.config)->to_json(), top.geomean_ms, top.ci_low_ms,
                          top.ci_high_ms, e.regime->workloads});
  }
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  KDA_RETURN_IF_ERROR(write_perf_map(pm, space, options.out_dir, result));
  say(fmt::format(
      "done: {} configurations measured ({} failed) in {:.1f} s; best single {:.6g} ms, dispatcher {:.6g} ms{}{}",
      result.configs_measured, result.configs_failed, result.wall_s, result.best_single_geomean_ms,
      result.dispatcher_geomean_ms,
      result.baseline_geomean_ms > 0 ? fmt::format(", baseline {:.6g} ms", result.baseline_geomean_ms) : "",
      result.dispatcher_vs_best_single > 0
          ? fmt::format("; dispatcher vs best single, interleaved: {:.3f}x", result.dispatcher_vs_best_single)
          : ""));
  return result;
}

}  // namespace kda::tune
