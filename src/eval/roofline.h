// Roofline floors: the least time a workload can take on the device, from the pack's bytes and
// FLOPs formulas and the device's peaks. Used by the integrity gate (faster than the floor is
// impossible, so it is flagged) and by reports (fraction of roofline).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "task/task_pack.h"

namespace kda::eval {

struct DevicePeaks {
  double bytes_per_s = 0;  // memory bandwidth
  double flops_per_s = 0;  // peak arithmetic rate (dense, highest precision the packs use on tensor cores)
};

// H200 SXM datasheet figures: 4.8 TB/s HBM3e; 989 TFLOP/s dense BF16 tensor core.
DevicePeaks h200_peaks();

// nullopt when the pack has no roofline formula or the backend has no known peaks (host).
std::optional<double> roofline_floor_ms(const task::TaskPack& pack, const std::map<std::string, int64_t>& axes,
                                        const std::string& backend);

}  // namespace kda::eval
