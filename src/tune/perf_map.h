// The performance map: per regime, the configurations ranked by geomean latency over the regime's
// workloads (the best is the regime's choice, the rest are runners-up), the best single
// configuration over all tuned workloads, and its files map.json and map.md.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "tune/search.h"
#include "tune/tune.h"

namespace kda::tune {

// A regime is routed to its own fastest configuration only when that one beats the best single
// configuration there by more than this fraction, with disjoint 95 % intervals; otherwise to the best
// single (a winner by noise over-fits one or two workloads, and each route costs the dispatcher a
// table entry: on host rmsnorm, routing every regime to its own winner made the dispatcher 0.96x
// the best single's speed head-to-head).
inline constexpr double kRouteMinGain = 0.03;

struct PerfMapEntry {
  const Regime* regime = nullptr;
  std::vector<Ranked> ranked;  // fastest first; empty when no configuration passed there
  std::string chosen;          // the configuration the dispatcher routes this regime to ("" : none passed)
  std::string why;             // why that one (the rule above, with the numbers)
};

struct PerfMap {
  std::vector<PerfMapEntry> entries;  // one per regime, in regime order
  std::string best_single;            // config id; empty when none passed on every tuned workload
  double best_single_geomean_ms = 0;
  // Predicted from the measurements: each workload at its regime's choice (fallback-only regimes
  // at the best single configuration).
  double dispatcher_geomean_ms = 0;
};

Result<PerfMap> build_perf_map(const SearchSpace& space, const State& state);
const Config* find_config(const SearchSpace& space, const std::string& id);
// map.json and map.md under out_dir (`result` adds the final timing when there is one).
Status write_perf_map(const PerfMap& pm, const SearchSpace& space, const std::filesystem::path& out_dir,
                      const TuneResult& result);

}  // namespace kda::tune
