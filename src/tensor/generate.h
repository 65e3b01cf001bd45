// Seeded random tensors (FlashInfer-Bench distributions), reproducible from (seed, stream, element index).
//
// The values are defined element by element in random_values.h, so a CUDA kernel that includes it produces the
// same bits in parallel. `stream` separates the inputs of one workload: use the input's index in the definition
// (or any other 64-bit id). fill_random uses several threads for large tensors; the result never depends on it.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace kda::tensor {

// Version of the value definition in random_values.h. Task packs record it next to their seeds; bump it whenever any
// generated value changes (Generate.GoldenValues pins a sample).
inline constexpr int kRandomGeneratorVersion = 1;

Tensor generate_random(DType dtype, std::vector<int64_t> shape, uint64_t seed, uint64_t stream);
void fill_random(Tensor& t, uint64_t seed, uint64_t stream);

struct FillOptions {
  int threads = 0;           // 0: up to std::thread::hardware_concurrency(), for tensors big enough to pay off
  bool use_fma_unit = true;  // use the CPU's FMA instructions when present (else libm fmaf); same bits either way
};
void fill_random(Tensor& t, uint64_t seed, uint64_t stream, const FillOptions& options);

// Whether this CPU has the FMA instructions that the fast host path uses.
bool host_has_fma();

}  // namespace kda::tensor
