// Metric names the analysis reads, keyed by their sm_90 (Hopper) name, with the names other
// architectures use for the same quantity. Lookups resolve against what the report contains.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ncu/report.h"

namespace kda::ncu {

// The sm_90 name first, then aliases (sm_89 "_v2" names, sm_100 "tc"/"subpipe" names, sm_120 "op_read").
std::vector<std::string_view> metric_aliases(std::string_view sm90_name);

// The value of the first alias the kernel has (numbers only).
std::optional<double> metric_value(const KernelResult& k, std::string_view sm90_name);
// The first alias present in the kernel (for evidence), or the sm_90 name when none is.
std::string resolved_name(const KernelResult& k, std::string_view sm90_name);

// Warp stall reasons of the aggregate ratios smsp__average_warps_issue_stalled_<r>_per_issue_active.ratio.
std::span<const std::string_view> stall_reasons();
// Per-PC sampling reason names (smsp__pcsamp_warps_issue_stalled_<r>); differ slightly from the above.
std::span<const std::string_view> pc_stall_reasons();

}  // namespace kda::ncu
