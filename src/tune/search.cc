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

}  // namespace

nlohmann::json Measurement::to_json() const {
  nlohmann::json t = nlohmann::json::object();
  for (const auto& [uuid, w] : times) t[uuid] = {{"ms", w.ms}, {"ci_low_ms", w.ci_low_ms}, {"ci_high_ms", w.ci_high_ms}};
  nlohmann::json j{{"config", config}, {"rung", rung}, {"passed", passed}, {"reason", reason}, {"times", t}, {"wall_s", wall_s}};
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
  return Status::bad_input("--strategy: '" + s + "' is not one of auto, exhaustive, halving");
}

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kExhaustive: return "exhaustive";
    case Strategy::kHalving: return "halving";
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
  std::stable_sort(out.begin(), out.end(), [](const Ranked& a, const Ranked& b) { return a.geomean_ms < b.geomean_ms; });
  return out;
}

Result<SearchOutcome> run_search(const SearchSpace& space, Measurer& measurer, State& state, const SearchOptions& opts) {
  SearchOutcome out;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return opts.clock_s ? opts.clock_s()
                        : std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  auto say = [&](const std::string& line) {
    if (opts.progress) opts.progress(line);
  };
  std::vector<const Config*> alive = candidates(space, opts.max_configs);
  out.candidates = static_cast<int>(alive.size());
  out.strategy = opts.strategy;
  if (out.strategy == Strategy::kAuto)
    out.strategy = alive.size() <= opts.exhaustive_limit ? Strategy::kExhaustive : Strategy::kHalving;
  const int rungs = out.strategy == Strategy::kExhaustive ? 2 : std::max(1, opts.halving_rungs);
  say(fmt::format("{} configurations ({} in the space), strategy {}, {} regimes, {} workloads", alive.size(),
                  space.configs.size(), strategy_name(out.strategy), space.regimes.size(), space.workloads.size()));

  // Ranking lists: the whole tuned set (best single) and each regime.
  std::vector<std::vector<std::string>> lists{space.workloads};
  for (const auto& r : space.regimes) lists.push_back(r.workloads);

  std::set<std::string> seen;
  for (int rung = 0; rung < rungs; ++rung) {
    measurer.prepare(alive);
    size_t done = 0;
    for (const Config* c : alive) {
      ++done;
      const std::string id = c->id();
      if (state.find(id, rung) != nullptr) continue;  // measured before a kill: never twice
      if (opts.max_minutes > 0 && elapsed() > opts.max_minutes * 60) {
        out.budget_note = fmt::format("time budget of {} min reached at rung {}", opts.max_minutes, rung);
        break;
      }
      if (opts.stop_after > 0 && out.measured_new >= opts.stop_after) {
        out.stopped = true;
        break;
      }
      auto apply = space.applicable.find(id);
      const std::vector<std::string>& ws = apply != space.applicable.end() ? apply->second : space.workloads;
      if (ws.empty()) continue;
      KDA_ASSIGN_OR_RETURN(Measurement m, measurer.measure(*c, ws, rung));
      m.config = id;
      m.rung = rung;
      const bool passed = m.passed;
      const std::string reason = m.reason;
      KDA_RETURN_IF_ERROR(state.add(std::move(m)));
      ++out.measured_new;
      auto best = rank(space, state, space.workloads);
      std::string best_text = "none yet";
      if (!best.empty())
        for (const auto& cfg : space.configs)
          if (cfg.id() == best.front().config) best_text = fmt::format("{:.6g} ms ({})", best.front().geomean_ms, cfg.label());
      say(fmt::format("rung {} [{}/{}] {}: {}; best so far {}; {:.1f} min{}", rung, done, alive.size(), c->label(),
                      passed ? "passed" : "FAILED " + reason, best_text, elapsed() / 60,
                      opts.max_minutes > 0 ? fmt::format(" of {}", opts.max_minutes) : std::string()));
    }
    out.top_rung = rung;
    if (out.stopped || !out.budget_note.empty() || rung + 1 == rungs) break;
    // Survivors: the best 1/eta (at least 2) of every ranking list, so each regime keeps its own.
    std::vector<std::string> ids;
    for (const Config* c : alive) ids.push_back(c->id());
    // Halving keeps about 1/eta of the configurations in all: the overall ranking's best
    // ceil(n / eta / 2) (at least 2) and each regime's best share of the other half (at least 1).
    std::set<std::string> keep;
    const size_t target = (alive.size() + opts.eta - 1) / static_cast<size_t>(opts.eta);
    for (size_t li = 0; li < lists.size(); ++li) {
      auto r = rank(space, state, lists[li], ids, rung);
      size_t k = 2;
      if (out.strategy != Strategy::kExhaustive) {
        const size_t regimes = std::max<size_t>(1, lists.size() - 1);
        k = li == 0 ? std::max<size_t>(2, (target + 1) / 2) : std::max<size_t>(1, (target / 2 + regimes - 1) / regimes);
      }
      for (size_t i = 0; i < r.size() && i < k; ++i) keep.insert(r[i].config);
    }
    std::vector<const Config*> next;
    for (const Config* c : alive)
      if (keep.count(c->id())) next.push_back(c);
    if (next.empty() || (out.strategy != Strategy::kExhaustive && next.size() == alive.size())) break;
    say(fmt::format("rung {} done: {} of {} configurations go on to rung {}", rung, next.size(), alive.size(), rung + 1));
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
