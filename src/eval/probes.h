// Off-distribution correctness probes (task.toml [probes], threat S7): a solution whose numerics are
// fitted to the test distribution (a denominator estimated from the expected value of exp(x) for
// standard normal x, a term skipped because it is small on randn data) passes FlashInfer-Bench's
// inputs and fails once the same inputs are shifted, rescaled or given a few large values. The
// parameters derive from the evaluation's secret seed, so they cannot be anticipated.
#pragma once

#include <cstdint>
#include <string>

#include "task/settings.h"
#include "tensor/tensor.h"

namespace kda::eval {

// What apply_probe did, for the verdict's message ("x + 2.71", "x * 2^-3", "x: 17 outliers").
struct ProbeApplied {
  std::string description;
};

// Transforms `t` in place (floating-point dtypes; other dtypes are left alone and say so):
//   kOffset    x + c, |c| uniform in [2, 4], random sign
//   kScale     x * 2^k, k uniform in {-3, -2, -1, 1, 2, 3} (exact in every binary float format)
//   kOutliers  ~1 in 512 elements (at least one) set to +-(8..16) x the tensor's RMS (at least 1)
// Values are rounded to the tensor's dtype; fp8 stays within its finite range.
ProbeApplied apply_probe(task::Probe probe, uint64_t seed, const std::string& name, tensor::Tensor& t);

}  // namespace kda::eval
