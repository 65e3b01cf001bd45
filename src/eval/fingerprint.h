// The "fingerprint" positions of a plain random input: the first and last 16 elements and every 64th.
// Timing set B takes A's values there (eval::copy_fingerprint on the host, the CUDA runner's device
// generation), so a cache keyed on a sparse sample of the inputs sees the same key for different
// inputs (threat S12b). One definition for both sides.
#pragma once

#include <cstdint>

#include "tensor/hd.h"

namespace kda::eval {

KDA_HD_FORCEINLINE bool is_fingerprint_position(int64_t k, int64_t numel) {
  return k < 16 || k >= numel - 16 || k % 64 == 0;
}

}  // namespace kda::eval
