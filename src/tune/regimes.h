// Regimes: the tuned workloads grouped by shape, so each group can get its own configuration.
// Default grouping: a power-of-two bucket per var axis ([2^k, 2^(k+1) - 1]) and the roofline bound
// (memory or compute) from the pack's bytes and FLOPs formulas; [[regime]] tables override it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "task/task_pack.h"
#include "tune/tunables.h"

namespace kda::tune {

enum class Bound { kUnknown, kMemory, kCompute, kMixed };
const char* bound_name(Bound b);

struct Regime {
  std::string name;
  // Inclusive ranges over var axes that the dispatcher routes on (an axis not named matches all).
  std::map<std::string, std::pair<int64_t, int64_t>> ranges;
  Bound bound = Bound::kUnknown;
  std::vector<std::string> workloads;  // uuids, in the order given
  bool user = false;                   // from a [[regime]] table
  bool fallback_only = false;          // workloads no user regime covers: served by the fallback
};

// Arithmetic intensity above which a workload counts as compute-bound: the H200's peak FLOP/s over
// its bandwidth for CUDA packs; for host packs a nominal 10 FLOP/byte (one core: ~100 GFLOP/s
// vectorised, ~10 GB/s).
double ridge_flops_per_byte(const task::TaskPack& pack);
// The bound of one workload from the pack's [roofline] formulas (kUnknown without them).
Bound workload_bound(const task::TaskPack& pack, const std::map<std::string, int64_t>& axes);

// Groups `workloads` (all must be the pack's). With `specs`, each workload goes to the first regime
// whose ranges contain it; the rest form a fallback-only regime "other". Empty regimes are dropped.
std::vector<Regime> group_regimes(const task::TaskPack& pack, const std::vector<const task::Workload*>& workloads,
                                  const std::vector<RegimeSpec>& specs);

// A fixed-width text table: regime, ranges, bound, workloads.
std::string regimes_table(const std::vector<Regime>& regimes);

}  // namespace kda::tune
