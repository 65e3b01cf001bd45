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

struct PerfMapEntry {
  const Regime* regime = nullptr;
  std::vector<Ranked> ranked;  // fastest first; empty when no configuration passed there
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
