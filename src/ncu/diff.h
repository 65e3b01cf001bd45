// What moved between two reports: kernels matched by name and launch order (then by function name,
// then a lone kernel on each side), then duration,
// throughputs, occupancy, stalls and memory efficiency compared (absolute and %).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ncu/report.h"

namespace kda::ncu {

struct MetricDelta {
  std::string metric;  // ncu name, or a derived quantity ("sectors_per_request.global_ld")
  std::string unit;
  double before = 0, after = 0;
  double delta = 0;      // after - before
  double delta_pct = 0;  // 100 * delta / |before|; 0 when before is 0
};

struct KernelDiff {
  std::string name;
  int id_before = 0, id_after = 0;
  std::vector<MetricDelta> deltas;                               // every compared quantity present in both reports
  std::vector<std::string> priorities_before, priorities_after;  // priority ids, ranked
  std::string verdict;       // "faster by 12.3%", "slower by 4.0%", "unchanged (within 1%)"
  std::string renamed_from;  // set when paired as a rename (no name or signature in common)
};

struct ReportDiff {
  std::vector<KernelDiff> kernels;
  std::vector<std::string> only_before, only_after;  // kernel names without a partner
};

ReportDiff diff_reports(const Report& before, const Report& after);

nlohmann::json to_json(const ReportDiff& diff);
// Markdown; rows that moved by less than min_move_pct are left out (duration is always shown).
std::string to_markdown(const ReportDiff& diff, double min_move_pct = 1.0);

}  // namespace kda::ncu
