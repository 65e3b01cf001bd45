#include "tune/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <set>

#include <fmt/format.h>

#include "util/fs.h"

namespace kda::tune {

namespace {

std::string key_of(const std::string& config, int rung) { return config + "@" + std::to_string(rung); }

double geomean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::log(x);
  return v.empty() ? 0 : std::exp(s / static_cast<double>(v.size()));
}

// The model's features of a configuration: its variant and each parameter's value, as (key, value).
std::vector<std::pair<std::string, nlohmann::json>> features(const Config& c) {
  std::vector<std::pair<std::string, nlohmann::json>> out{{"variant", c.variant}};
  for (const auto& [name, value] : c.params) out.push_back({c.variant + "." + name, value});
  return out;
}

std::string token(const std::pair<std::string, nlohmann::json>& f) { return f.first + "=" + f.second.dump(); }

std::vector<std::string> tokens(const Config& c) {
  std::vector<std::string> out;
  for (const auto& f : features(c)) out.push_back(token(f));
  return out;
}

}  // namespace

void AdditiveModel::fit(const std::vector<std::pair<const Config*, double>>& observed) {
  effect_.clear();
  seen_.clear();
  numeric_.clear();
  mean_ = 0;
  if (observed.empty()) return;
  std::vector<std::vector<std::string>> toks;
  std::vector<double> y;
  for (const auto& [c, ms] : observed) {
    toks.push_back(tokens(*c));
    y.push_back(std::log(ms));
    mean_ += y.back();
    for (const auto& t : toks.back()) ++seen_[t];
  }
  mean_ /= static_cast<double>(y.size());
  // Backfitting: each effect is the shrunk mean residual of the configurations that have it.
  constexpr double kRidge = 0.2;
  for (int sweep = 0; sweep < 20; ++sweep) {
    for (const auto& [t, n] : seen_) {
      double sum = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        if (std::find(toks[i].begin(), toks[i].end(), t) == toks[i].end()) continue;
        double r = y[i] - mean_;
        for (const auto& u : toks[i])
          if (u != t) r -= effect_[u];
        sum += r;
      }
      effect_[t] = sum / (n + kRidge);
    }
  }
  for (const auto& [c, _] : observed)
    for (const auto& f : features(*c))
      if (f.second.is_number()) numeric_[f.first][f.second.get<double>()] = effect_[token(f)];
}

double AdditiveModel::effect(const std::string& key, const nlohmann::json& value) const {
  if (auto e = effect_.find(token({key, value})); e != effect_.end()) return e->second;
  auto levels = numeric_.find(key);
  if (!value.is_number() || levels == numeric_.end() || levels->second.empty()) return 0;
  const double x = value.get<double>();
  const auto& m = levels->second;
  auto hi = m.lower_bound(x);
  if (hi == m.begin()) return hi->second;
  if (hi == m.end()) return std::prev(hi)->second;
  auto lo = std::prev(hi);
  return lo->second + (hi->second - lo->second) * (x - lo->first) / (hi->first - lo->first);
}

double AdditiveModel::predict(const Config& c, double explore) const {
  double v = mean_;
  for (const auto& f : features(c)) {
    v += effect(f.first, f.second);
    auto n = seen_.find(token(f));
    v -= explore / std::sqrt(1.0 + (n == seen_.end() ? 0 : n->second));
  }
  return v;
}

nlohmann::json Measurement::to_json() const {
  nlohmann::json t = nlohmann::json::object();
  for (const auto& [uuid, w] : times)
    t[uuid] = {{"ms", w.ms}, {"ci_low_ms", w.ci_low_ms}, {"ci_high_ms", w.ci_high_ms}};
  nlohmann::json j{{"config", config}, {"rung", rung}, {"passed", passed},
                   {"reason", reason}, {"times", t},   {"wall_s", wall_s}};
  if (!phases.empty()) j["phases"] = phases;
  return j;
}

Result<Measurement> Measurement::from_json(const nlohmann::json& j) {
  Measurement m;
  try {
    m.config = j.at("config").get<std::string>();
    m.rung = j.at("rung").get<int>();
    m.passed = j.at("passed").get<bool>();
    m.reason = j.value("reason", "");
    m.wall_s = j.value("wall_s", 0.0);
    m.phases = j.value("phases", nlohmann::json::object());
    for (const auto& [uuid, w] : j.at("times").items())
      m.times[uuid] = {w.at("ms").get<double>(), w.at("ci_low_ms").get<double>(), w.at("ci_high_ms").get<double>()};
  } catch (const nlohmann::json::exception& e) {
    return Status::bad_input(std::string("measurement: ") + e.what());
  }
  return m;
}

Result<State> State::open(const std::filesystem::path& file, const std::string& fingerprint, bool resume) {
  State s;
  s.file_ = file;
  s.fingerprint_ = fingerprint;
  if (!resume || !std::filesystem::exists(file)) return s;
  KDA_ASSIGN_OR_RETURN(std::string text, fs::read_file(file));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("measurements") || !j["measurements"].is_array())
    return Status::bad_input(file.string() + ": not a kda tune state file");
  if (j.value("fingerprint", "") != fingerprint)
    return Status::bad_input(file.string() +
                             ": was written for another solution, tunables, workload set or timing; "
                             "tune into a new --out or drop --resume");
  for (const auto& mj : j["measurements"]) {
    auto m = Measurement::from_json(mj);
    if (!m.ok()) return m.status().with_context(file.string());
    s.by_key_[key_of(m->config, m->rung)] = std::move(*m);
  }
  return s;
}

const Measurement* State::find(const std::string& config, int rung) const {
  auto it = by_key_.find(key_of(config, rung));
  return it == by_key_.end() ? nullptr : &it->second;
}

Status State::add(Measurement m) {
  by_key_[key_of(m.config, m.rung)] = std::move(m);
  return save();
}

Status State::save() const {
  nlohmann::json ms = nlohmann::json::array();
  for (const auto& [_, m] : by_key_) ms.push_back(m.to_json());
  nlohmann::json j{{"kind", "kda-tune-state"}, {"version", 1}, {"fingerprint", fingerprint_}, {"measurements", ms}};
  KDA_RETURN_IF_ERROR(fs::ensure_dir(file_.parent_path()));
  return fs::write_file_atomic(file_, j.dump(1) + "\n");
}

Result<Strategy> parse_strategy(const std::string& s) {
  if (s == "auto") return Strategy::kAuto;
  if (s == "exhaustive") return Strategy::kExhaustive;
  if (s == "halving") return Strategy::kHalving;
  if (s == "model") return Strategy::kModel;
  return Status::bad_input("--strategy: '" + s + "' is not one of auto, exhaustive, halving, model");
}

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kExhaustive: return "exhaustive";
    case Strategy::kHalving: return "halving";
    case Strategy::kModel: return "model";
    case Strategy::kAuto: break;
  }
  return "auto";
}

std::vector<const Config*> candidates(const SearchSpace& space, int max_configs) {
  std::vector<const Config*> all;
  for (const auto& c : space.configs) all.push_back(&c);
  if (max_configs <= 0 || static_cast<size_t>(max_configs) >= all.size()) return all;
  // A fixed seed: the same subset every run, spread over the space rather than its first corner.
  std::vector<const Config*> rest(all.begin() + 1, all.end());
  std::mt19937_64 rng(0x6b6461u);
  std::shuffle(rest.begin(), rest.end(), rng);
  std::vector<const Config*> out{all.front()};
  out.insert(out.end(), rest.begin(), rest.begin() + (max_configs - 1));
  return out;
}

std::vector<Ranked> rank(const SearchSpace& space, const State& state, const std::vector<std::string>& workloads,
                         const std::vector<std::string>& among, int at_rung) {
  std::vector<Ranked> out;
  int top = -1;
  for (const auto& c : space.configs) {
    const std::string id = c.id();
    if (!among.empty() && std::find(among.begin(), among.end(), id) == among.end()) continue;
    for (int rung = at_rung >= 0 ? at_rung : 16; rung >= 0; --rung) {
      const Measurement* m = state.find(id, rung);
      if (at_rung >= 0 && rung != at_rung) break;
      if (m == nullptr) continue;
      if (!m->passed) break;
      std::vector<double> ms, lo, hi;
      for (const auto& w : workloads) {
        auto it = m->times.find(w);
        if (it == m->times.end() || it->second.ms <= 0) break;
        ms.push_back(it->second.ms);
        lo.push_back(std::max(it->second.ci_low_ms, 1e-12));
        hi.push_back(std::max(it->second.ci_high_ms, 1e-12));
      }
      if (ms.size() != workloads.size() || ms.empty()) break;
      out.push_back({id, geomean(ms), geomean(lo), geomean(hi), rung});
      top = std::max(top, rung);
      break;
    }
  }
  // Compare like with like: the rung the survivors reached, not a lucky short screening.
  out.erase(std::remove_if(out.begin(), out.end(), [top](const Ranked& r) { return r.rung != top; }), out.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const Ranked& a, const Ranked& b) { return a.geomean_ms < b.geomean_ms; });
  return out;
}

namespace {

// What kAuto means for this space and budget: exhaustive for small ones; a budget that covers at
// most half of a large space is spent where a model points; halving otherwise.
Strategy chosen_strategy(const SearchSpace& space, const SearchOptions& opts, bool budgeted) {
  if (opts.strategy != Strategy::kAuto) return opts.strategy;
  const size_t n = budgeted ? static_cast<size_t>(opts.max_configs) : space.configs.size();
  return n <= opts.exhaustive_limit                  ? Strategy::kExhaustive
         : budgeted && 2 * n <= space.configs.size() ? Strategy::kModel
                                                     : Strategy::kHalving;
}

// The next batch of the model-guided search: for each ranking list, the unpicked configurations
// (applicable to the whole list) an additive model fitted to the measured ones predicts fastest;
// taken round-robin over the lists (the best single's first), at most `want`, each marked picked.
std::vector<const Config*> model_batch(const SearchSpace& space, const State& state,
                                       const std::vector<std::vector<std::string>>& lists,
                                       const std::vector<const Config*>& alive,
                                       const std::vector<std::pair<std::string, const Config*>>& with_ids,
                                       const std::map<std::string, const Config*>& by_id, std::set<std::string>& picked,
                                       size_t want, const SearchOptions& opts) {
  std::vector<std::string> ids;
  for (const Config* c : alive) ids.push_back(c->id());
  std::vector<std::vector<const Config*>> proposals;  // per list, best predicted first
  for (const auto& list : lists) {
    std::vector<std::pair<const Config*, double>> observed;
    for (const auto& r : rank(space, state, list, ids, 0)) observed.push_back({by_id.at(r.config), r.geomean_ms});
    AdditiveModel m;
    m.fit(observed);
    std::vector<std::pair<double, const Config*>> scored;
    for (const auto& [id, c] : with_ids) {
      if (picked.count(id)) continue;
      auto apply = space.applicable.find(id);
      const auto& ws = apply != space.applicable.end() ? apply->second : space.workloads;
      if (!std::all_of(list.begin(), list.end(),
                       [&](const std::string& w) { return std::count(ws.begin(), ws.end(), w); }))
        continue;
      scored.push_back({m.predict(*c, opts.model_explore), c});
    }
    std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<const Config*> p;
    for (const auto& [_, c] : scored) p.push_back(c);
    proposals.push_back(std::move(p));
  }
  std::vector<const Config*> batch;
  std::vector<size_t> at(proposals.size(), 0);
  bool any = true;
  while (batch.size() < want && any) {
    any = false;
    for (size_t li = 0; li < proposals.size() && batch.size() < want; ++li) {
      while (at[li] < proposals[li].size() && picked.count(proposals[li][at[li]]->id())) ++at[li];
      if (at[li] == proposals[li].size()) continue;
      const Config* c = proposals[li][at[li]++];
      picked.insert(c->id());
      batch.push_back(c);
      any = true;
    }
  }
  return batch;
}

// Survivors of a rung: the best 1/eta (at least 2) of every ranking list, so each regime keeps its
// own. Halving keeps about 1/eta of the configurations in all: the overall ranking's best
// ceil(n / eta / 2) (at least 2) and each regime's best share of the other half (at least 1);
// exhaustive keeps the best two of each list.
std::vector<const Config*> survivors(const SearchSpace& space, const State& state,
                                     const std::vector<std::vector<std::string>>& lists,
                                     const std::vector<const Config*>& alive, int rung, Strategy strategy, int eta) {
  std::vector<std::string> ids;
  for (const Config* c : alive) ids.push_back(c->id());
  std::set<std::string> keep;
  const size_t target = (alive.size() + eta - 1) / static_cast<size_t>(eta);
  for (size_t li = 0; li < lists.size(); ++li) {
    auto r = rank(space, state, lists[li], ids, rung);
    size_t k = 2;
    if (strategy != Strategy::kExhaustive) {
      const size_t regimes = std::max<size_t>(1, lists.size() - 1);
      k = li == 0 ? std::max<size_t>(2, (target + 1) / 2) : std::max<size_t>(1, (target / 2 + regimes - 1) / regimes);
    }
    for (size_t i = 0; i < r.size() && i < k; ++i) keep.insert(r[i].config);
  }
  std::vector<const Config*> next;
  for (const Config* c : alive)
    if (keep.count(c->id())) next.push_back(c);
  return next;
}

}  // namespace

namespace {

// run_search's measurements of one batch at one rung: what the state already holds is never measured
// again, the budgets are checked between configurations, and `parallelism` configurations at a time go
// to the measurer together (a pool's devices take them at once), each recorded in order.
struct RungBatch {
  const SearchSpace& space;
  Measurer& measurer;
  State& state;
  const SearchOptions& opts;
  SearchOutcome& out;
  std::function<double()> elapsed;
  std::function<void(const std::string&)> say;
  std::vector<std::pair<const Config*, std::vector<std::string>>> pending;
  std::vector<size_t> positions;  // their [done/total] numbers

  // false when a budget or stop_after ended the search.
  Result<bool> measure(const std::vector<const Config*>& batch, int rung, size_t offset, size_t total) {
    measurer.prepare(batch);
    const size_t chunk = std::max<size_t>(1, measurer.parallelism());
    size_t done = offset;
    for (const Config* c : batch) {
      ++done;
      const std::string id = c->id();
      if (state.find(id, rung) != nullptr) continue;  // measured before a kill: never twice
      if (opts.max_minutes > 0 && elapsed() > opts.max_minutes * 60) {
        KDA_RETURN_IF_ERROR(flush(rung, total));
        out.budget_note = fmt::format("time budget of {} min reached at rung {}", opts.max_minutes, rung);
        return false;
      }
      if (opts.stop_after > 0 && out.measured_new + pending.size() >= static_cast<size_t>(opts.stop_after)) {
        KDA_RETURN_IF_ERROR(flush(rung, total));
        out.stopped = true;
        return false;
      }
      auto apply = space.applicable.find(id);
      const std::vector<std::string>& ws = apply != space.applicable.end() ? apply->second : space.workloads;
      if (ws.empty()) continue;
      pending.push_back({c, ws});
      positions.push_back(done);
      if (pending.size() >= chunk) KDA_RETURN_IF_ERROR(flush(rung, total));
    }
    KDA_RETURN_IF_ERROR(flush(rung, total));
    return true;
  }

  // Measures what is pending and records each measurement in order, with a progress line.
  Status flush(int rung, size_t total) {
    if (pending.empty()) return {};
    KDA_ASSIGN_OR_RETURN(std::vector<Measurement> ms, measurer.measure_many(pending, rung));
    for (size_t i = 0; i < ms.size() && i < pending.size(); ++i) {
      const Config* c = pending[i].first;
      Measurement& m = ms[i];
      m.config = c->id();
      m.rung = rung;
      const bool passed = m.passed;
      const std::string reason = m.reason;
      KDA_RETURN_IF_ERROR(state.add(std::move(m)));
      ++out.measured_new;
      auto best = rank(space, state, space.workloads);
      std::string best_text = "none yet";
      if (!best.empty())
        for (const auto& cfg : space.configs)
          if (cfg.id() == best.front().config)
            best_text = fmt::format("{:.6g} ms ({})", best.front().geomean_ms, cfg.label());
      say(fmt::format("rung {} [{}/{}] {}: {}; best so far {}; {:.1f} min{}", rung, positions[i], total, c->label(),
                      passed ? "passed" : "FAILED " + reason, best_text, elapsed() / 60,
                      opts.max_minutes > 0 ? fmt::format(" of {}", opts.max_minutes) : std::string()));
    }
    pending.clear();
    positions.clear();
    return {};
  }
};

}  // namespace

Result<SearchOutcome> run_search(const SearchSpace& space, Measurer& measurer, State& state,
                                 const SearchOptions& opts) {
  SearchOutcome out;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return opts.clock_s ? opts.clock_s()
                        : std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  auto say = [&](const std::string& line) {
    if (opts.progress) opts.progress(line);
  };
  const bool budgeted = opts.max_configs > 0 && static_cast<size_t>(opts.max_configs) < space.configs.size();
  out.strategy = chosen_strategy(space, opts, budgeted);
  const bool model = out.strategy == Strategy::kModel;
  std::vector<const Config*> alive = model ? std::vector<const Config*>{} : candidates(space, opts.max_configs);
  const size_t budget =
      model ? (budgeted ? static_cast<size_t>(opts.max_configs) : space.configs.size()) : alive.size();
  out.candidates = static_cast<int>(budget);
  const int rungs = out.strategy == Strategy::kExhaustive ? 2 : std::max(1, opts.halving_rungs);
  say(fmt::format("{} configurations ({} in the space), strategy {}, {} regimes, {} workloads", budget,
                  space.configs.size(), strategy_name(out.strategy), space.regimes.size(), space.workloads.size()));

  // Ranking lists: the whole tuned set (best single) and each regime.
  std::vector<std::vector<std::string>> lists{space.workloads};
  for (const auto& r : space.regimes) lists.push_back(r.workloads);

  // Measures `batch` at `rung` (what state already holds is never measured again); false when a
  // budget or stop_after ended the search.
  RungBatch rung_batch{space, measurer, state, opts, out, elapsed, say};
  auto measure_batch = [&](const std::vector<const Config*>& batch, int rung, size_t offset, size_t total) {
    return rung_batch.measure(batch, rung, offset, total);
  };

  bool go_on = true;
  if (model) {
    // Rung 0 in batches: a spread sample first (the default and a fixed pseudo-random order), then
    // each batch from a model fitted to the batches before it only, so a resumed search picks the
    // same batches whatever a kill left half measured.
    const size_t first = std::min(budget, std::max<size_t>(8, static_cast<size_t>(opts.model_first_share * budget)));
    const size_t step = std::max<size_t>(4, static_cast<size_t>(opts.model_batch_share * budget));
    alive = candidates(space, static_cast<int>(first));
    // Ids are hashes: computed once here. In space order, which breaks ties between equal predictions.
    std::vector<std::pair<std::string, const Config*>> with_ids;
    std::map<std::string, const Config*> by_id;
    for (const auto& c : space.configs) {
      with_ids.push_back({c.id(), &c});
      by_id[with_ids.back().first] = &c;
    }
    std::set<std::string> picked;
    for (const Config* c : alive) picked.insert(c->id());
    KDA_ASSIGN_OR_RETURN(go_on, measure_batch(alive, 0, 0, budget));
    while (go_on && alive.size() < budget && alive.size() < space.configs.size()) {
      std::vector<const Config*> batch =
          model_batch(space, state, lists, alive, with_ids, by_id, picked, std::min(step, budget - alive.size()), opts);
      if (batch.empty()) break;
      say(fmt::format("model: {} more configurations where the model of the {} measured predicts the fastest",
                      batch.size(), alive.size()));
      const size_t offset = alive.size();
      alive.insert(alive.end(), batch.begin(), batch.end());
      KDA_ASSIGN_OR_RETURN(go_on, measure_batch(batch, 0, offset, budget));
    }
  }

  for (int rung = 0; rung < rungs && go_on; ++rung) {
    if (!(model && rung == 0)) {
      KDA_ASSIGN_OR_RETURN(go_on, measure_batch(alive, rung, 0, alive.size()));
    }
    out.top_rung = rung;
    if (!go_on || rung + 1 == rungs) break;
    std::vector<const Config*> next = survivors(space, state, lists, alive, rung, out.strategy, opts.eta);
    if (next.empty() || (out.strategy != Strategy::kExhaustive && next.size() == alive.size())) break;
    say(fmt::format("rung {} done: {} of {} configurations go on to rung {}", rung, next.size(), alive.size(),
                    rung + 1));
    alive = std::move(next);
  }
  std::set<std::string> measured, failed;
  for (const auto& [_, m] : state.all()) {
    measured.insert(m.config);
    if (!m.passed) failed.insert(m.config);
  }
  out.configs_measured = static_cast<int>(measured.size());
  out.configs_failed = static_cast<int>(failed.size());
  return out;
}

}  // namespace kda::tune
