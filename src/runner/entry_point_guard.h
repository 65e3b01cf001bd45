// Driver entry points a candidate may fetch at run time. Hopper TMA kernels written the usual way
// (CUTLASS/CuTe, hand-written cp.async.bulk.tensor) encode their tensor maps with
// cuTensorMapEncode*, which the CUDA runtime hands out only through cudaGetDriverEntryPoint. Any
// other driver function fetched that way escapes the import audit (T1: cuStreamCreate for a side
// stream), so kda-runner defines and exports the cudaGetDriverEntryPoint family itself: the
// candidate's imports bind to it first, the tensor-map encoders are forwarded to the real runtime,
// everything else is refused (symbol not found) and reported in the next call's reply as
// `driver_entry_points_refused`, which the evaluator turns into VIOLATION_FORBIDDEN_IMPORT
// (forbidden_import:driver_entry_point).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kda::runner {

// True for the driver functions a candidate may fetch by name: the tensor-map encoders.
bool allowed_driver_entry_point(std::string_view symbol);

// Records a refused lookup (thread-safe); take_refused_entry_points returns and clears them.
void record_refused_entry_point(std::string_view symbol);
std::vector<std::string> take_refused_entry_points();

}  // namespace kda::runner
