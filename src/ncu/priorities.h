// Internal to src/ncu: the ranked advice of `kda ncu analyze` (priorities.cc) and the metric
// accessors it shares with analyze.cc.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ncu/analyze.h"
#include "ncu/metric_names.h"

namespace kda::ncu::detail {

// A metric's value (under any of its names), or `fallback` when the report lacks it.
inline double get(const KernelResult& k, std::string_view name, double fallback = 0) {
  return metric_value(k, name).value_or(fallback);
}
// The metric as evidence: the name the report uses, its value and unit.
inline Evidence ev(const KernelResult& k, std::string_view name, std::string unit = "") {
  std::string resolved = resolved_name(k, name);
  const Metric* m = k.find(resolved);
  return {resolved, get(k, name), unit.empty() && m ? m->unit : unit};
}
// The PC a per-instruction metric instance belongs to.
inline uint64_t pc_of(const Instance& i) {
  return i.correlation.is_integer() ? i.correlation.integer : static_cast<uint64_t>(i.correlation.number);
}

// The ranked advice for one kernel: every diagnosis of the table in priorities.cc that applies,
// then the ncu rule findings with a global estimate that none of them covered, by expected gain.
std::vector<Priority> compute_priorities(const KernelResult& k, const KernelAnalysis& a,
                                         const std::vector<Hotspot>& all_pcs);

}  // namespace kda::ncu::detail
