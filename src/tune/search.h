// The search over configurations: exhaustive for small spaces, successive halving for large ones,
// and a model-guided search where a budget (--max-configs) covers only part of a large space,
// on a Measurer (the official evaluator in `kda tune`, a fake in tests), with every measurement
// persisted in a State so a killed search resumes without measuring anything twice.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tune/regimes.h"
#include "tune/tunables.h"
#include "util/status.h"

namespace kda::tune {

struct WorkloadTime {
  double ms = 0;
  double ci_low_ms = 0, ci_high_ms = 0;
};

// One configuration timed at one rung (rung 0: screening timing; each rung times longer).
struct Measurement {
  std::string config;  // Config::id()
  int rung = 0;
  bool passed = false;
  std::string reason;                         // why not (compile error, verdict and reason code)
  std::map<std::string, WorkloadTime> times;  // workload uuid -> time (passed only)
  double wall_s = 0;
  nlohmann::json phases = nlohmann::json::object();  // where the evaluation's time went (eval::EvalPhases)
  nlohmann::json to_json() const;
  static Result<Measurement> from_json(const nlohmann::json& j);
};

class Measurer {
 public:
  virtual ~Measurer() = default;
  // Compiles ahead, in parallel, what measure() will need (failures surface in measure()).
  virtual void prepare(const std::vector<const Config*>& configs) {}
  // Times `c` on `workloads` at `rung`. A configuration that fails is a Measurement with
  // passed == false; an error is the environment's and stops the search.
  virtual Result<Measurement> measure(const Config& c, const std::vector<std::string>& workloads, int rung) = 0;
  // How many measurements measure_many() takes at once to advantage (the devices of a pool); 1: one
  // at a time.
  virtual size_t parallelism() const { return 1; }
  // Times each (configuration, workloads) at `rung`, in order; by default one measure() after another.
  virtual Result<std::vector<Measurement>> measure_many(
      const std::vector<std::pair<const Config*, std::vector<std::string>>>& batch, int rung) {
    std::vector<Measurement> out;
    for (const auto& [c, ws] : batch) {
      KDA_ASSIGN_OR_RETURN(Measurement m, measure(*c, ws, rung));
      out.push_back(std::move(m));
    }
    return out;
  }
};

// Every measurement of one search, written atomically (state.json) after each one. The
// fingerprint names what the measurements are valid for (solution, tunables, workloads, timing).
class State {
 public:
  // resume: load `file` (its fingerprint must match); otherwise start empty (an existing file is
  // replaced on the first measurement).
  static Result<State> open(const std::filesystem::path& file, const std::string& fingerprint, bool resume);
  const Measurement* find(const std::string& config, int rung) const;
  Status add(Measurement m);
  size_t size() const { return by_key_.size(); }
  const std::map<std::string, Measurement>& all() const { return by_key_; }

 private:
  Status save() const;
  std::filesystem::path file_;
  std::string fingerprint_;
  std::map<std::string, Measurement> by_key_;  // "<id>@<rung>"
};

enum class Strategy { kAuto, kExhaustive, kHalving, kModel };
Result<Strategy> parse_strategy(const std::string& s);
const char* strategy_name(Strategy s);

struct SearchSpace {
  std::vector<Config> configs;                                 // the default configuration first
  std::map<std::string, std::vector<std::string>> applicable;  // id -> tuned workloads its constraints allow
  std::vector<std::string> workloads;                          // tuned workloads
  std::vector<Regime> regimes;
};

struct SearchOptions {
  Strategy strategy = Strategy::kAuto;
  int max_configs = 0;           // 0 = all
  double max_minutes = 0;        // 0 = no limit
  size_t exhaustive_limit = 32;  // auto: exhaustive up to this many candidates
  int eta = 3;                   // halving: about 1/eta of the configurations go on per rung (half for the
                                 // best single ranking, half shared among the regimes)
  int halving_rungs = 3;         // rungs 0..halving_rungs-1
  int stop_after = 0;            // tests: stop (as if killed) after this many new measurements
  // model: the first batch is this fraction of the budget (at least 8), the later ones this one
  // (at least 4); each later batch goes to the configurations an additive model of the rung-0
  // latencies predicts fastest, per ranking list, with this bonus (log latency) per rarely seen
  // parameter value.
  double model_first_share = 1.0 / 3;
  double model_batch_share = 1.0 / 6;
  double model_explore = 0.1;
  std::function<double()> clock_s;  // elapsed seconds; default steady clock since the search began
  std::function<void(const std::string&)> progress;
};

struct Ranked {
  std::string config;
  double geomean_ms = 0;
  double ci_low_ms = 0, ci_high_ms = 0;
  int rung = 0;
};

struct SearchOutcome {
  Strategy strategy = Strategy::kAuto;
  int candidates = 0;        // configurations in the search (after max_configs)
  int measured_new = 0;      // measurements taken in this session
  int configs_measured = 0;  // distinct configurations with a measurement (this and earlier sessions)
  int configs_failed = 0;
  int top_rung = 0;
  bool stopped = false;     // stop_after reached (resume continues)
  std::string budget_note;  // set when a budget cut the search short
};

// The candidates a search with `max_configs` visits: the default first, then a fixed pseudo-random
// order (the same every run, so a resumed search visits the same configurations).
std::vector<const Config*> candidates(const SearchSpace& space, int max_configs);

// The model-guided search's predictor: log latency = mean + one effect per parameter value (the
// variant counts as a parameter), fitted by ridge backfitting to the configurations measured. A
// numeric value never measured takes the effect interpolated between its measured neighbours
// (tile sizes, unrolls and thread counts change latency smoothly more often than not).
class AdditiveModel {
 public:
  // `observed`: (configuration, geomean latency ms > 0).
  void fit(const std::vector<std::pair<const Config*, double>>& observed);
  // Predicted log latency, less `explore` / sqrt(1 + n) for each value seen n times.
  double predict(const Config& c, double explore = 0) const;

 private:
  double effect(const std::string& key, const nlohmann::json& value) const;
  double mean_ = 0;
  std::map<std::string, double> effect_;  // "<key>=<value>"
  std::map<std::string, int> seen_;
  std::map<std::string, std::map<double, double>> numeric_;  // key -> numeric value -> effect
};

Result<SearchOutcome> run_search(const SearchSpace& space, Measurer& measurer, State& state, const SearchOptions& opts);

// The configurations ranked on `workloads` (fastest first): those measured and passed on all of
// them, at the highest rung any such configuration reached (or at `at_rung` when >= 0: the halving
// step, which must not see later rungs a resumed search measured before its kill); `among` (when
// non-empty) restricts.
std::vector<Ranked> rank(const SearchSpace& space, const State& state, const std::vector<std::string>& workloads,
                         const std::vector<std::string>& among = {}, int at_rung = -1);

}  // namespace kda::tune
