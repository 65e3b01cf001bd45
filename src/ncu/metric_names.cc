#include "ncu/metric_names.h"

#include <array>
#include <vector>

namespace kda::ncu {

namespace {

struct AliasSet {
  std::string_view names[4];
  size_t count;
};

// Only quantities whose name differs somewhere need an entry; others resolve to themselves.
constexpr std::array<AliasSet, 6> kAliases = {{
    {{"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed"},
     2},
    {{"dram__bytes_read.sum", "dram__bytes_op_read.sum"}, 2},
    {{"dram__bytes_write.sum", "dram__bytes_op_write.sum"}, 2},
    {{"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
      "sm__pipe_tensor_cycles_active_v2.avg.pct_of_peak_sustained_active",
      "sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_active"},
     3},
    {{"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
      "sm__pipe_tensor_op_hmma_cycles_active_v2.avg.pct_of_peak_sustained_active",
      "sm__pipe_tensor_subpipe_hmma_cycles_active.avg.pct_of_peak_sustained_active"},
     3},
    {{"sm__pipe_tensor_op_imma_cycles_active.avg.pct_of_peak_sustained_active",
      "sm__pipe_tensor_op_imma_cycles_active_v2.avg.pct_of_peak_sustained_active",
      "sm__pipe_tensor_subpipe_imma_cycles_active.avg.pct_of_peak_sustained_active"},
     3},
}};

constexpr std::array<std::string_view, 19> kStallReasons = {"long_scoreboard",
                                                            "short_scoreboard",
                                                            "barrier",
                                                            "mio_throttle",
                                                            "lg_throttle",
                                                            "math_pipe_throttle",
                                                            "wait",
                                                            "not_selected",
                                                            "selected",
                                                            "no_instruction",
                                                            "branch_resolving",
                                                            "dispatch_stall",
                                                            "drain",
                                                            "gmma",
                                                            "imc_miss",
                                                            "membar",
                                                            "misc",
                                                            "sleeping",
                                                            "tex_throttle"};

constexpr std::array<std::string_view, 19> kPcStallReasons = {"long_scoreboard",
                                                              "short_scoreboard",
                                                              "barrier",
                                                              "mio_throttle",
                                                              "lg_throttle",
                                                              "math_pipe_throttle",
                                                              "wait",
                                                              "not_selected",
                                                              "selected",
                                                              "no_instructions",
                                                              "branch_resolving",
                                                              "dispatch_stall",
                                                              "drain",
                                                              "warpgroup_arrive",
                                                              "imc_miss",
                                                              "membar",
                                                              "misc",
                                                              "sleeping",
                                                              "tex_throttle"};

}  // namespace

std::vector<std::string_view> metric_aliases(std::string_view sm90_name) {
  for (const auto& set : kAliases)
    if (set.names[0] == sm90_name) return {set.names, set.names + set.count};
  return {sm90_name};
}

std::optional<double> metric_value(const KernelResult& k, std::string_view sm90_name) {
  for (auto name : metric_aliases(sm90_name))
    if (auto v = k.number(name)) return v;
  return std::nullopt;
}

std::string resolved_name(const KernelResult& k, std::string_view sm90_name) {
  for (auto name : metric_aliases(sm90_name))
    if (k.find(name) != nullptr) return std::string(name);
  return std::string(sm90_name);
}

std::span<const std::string_view> stall_reasons() { return kStallReasons; }
std::span<const std::string_view> pc_stall_reasons() { return kPcStallReasons; }

}  // namespace kda::ncu
