// Tunable softmax for host_softmax_f32 (kda tune, tunables.toml). Every configuration is correct on
// every shape.
//   UNROLL: independent accumulators in the max and sum reductions.
//   STORE_EXP: 1 keeps exp(x - max) in y during the sum pass and rescales it (one exp per element);
//              0 recomputes the exponential in the final pass (no second write stream).
//   RECIP: 1 multiplies by 1/sum, 0 divides.
#include <dlpack/dlpack.h>
#include <math.h>
#include <stdint.h>

#ifndef UNROLL
#define UNROLL 4
#endif
#ifndef STORE_EXP
#define STORE_EXP 1
#endif
#ifndef RECIP
#define RECIP 1
#endif

namespace {

bool is_f32(const DLTensor& t) {
  return t.device.device_type == kDLCPU && t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
}

template <class T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

inline float row_max(const float* __restrict x, int64_t n) {
  float acc[UNROLL];
  for (int u = 0; u < UNROLL; ++u) acc[u] = -INFINITY;
  int64_t c = 0;
  for (; c + UNROLL <= n; c += UNROLL)
    for (int u = 0; u < UNROLL; ++u) acc[u] = x[c + u] > acc[u] ? x[c + u] : acc[u];
  float m = -INFINITY;
  for (int u = 0; u < UNROLL; ++u) m = acc[u] > m ? acc[u] : m;
  for (; c < n; ++c) m = x[c] > m ? x[c] : m;
  return m;
}

// Sum of exp(x - mx); with STORE_EXP the exponentials go to y.
inline float exp_sum(const float* __restrict x, float mx, float* __restrict y, int64_t n) {
  float acc[UNROLL];
  for (int u = 0; u < UNROLL; ++u) acc[u] = 0.0f;
  int64_t c = 0;
  for (; c + UNROLL <= n; c += UNROLL)
    for (int u = 0; u < UNROLL; ++u) {
      const float e = expf(x[c + u] - mx);
      if (STORE_EXP) y[c + u] = e;
      acc[u] += e;
    }
  float s = 0.0f;
  for (int u = 0; u < UNROLL; ++u) s += acc[u];
  for (; c < n; ++c) {
    const float e = expf(x[c] - mx);
    if (STORE_EXP) y[c] = e;
    s += e;
  }
  return s;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int run(const DLTensor* inputs, int64_t num_inputs,
                                                          DLTensor* outputs, int64_t num_outputs, void* stream) {
  (void)stream;
  if (num_inputs != 1 || num_outputs != 1) return 1;
  if (!is_f32(inputs[0]) || !is_f32(outputs[0])) return 2;
  if (inputs[0].ndim != 2 || outputs[0].ndim != 2) return 3;
  if (outputs[0].shape[0] != inputs[0].shape[0] || outputs[0].shape[1] != inputs[0].shape[1]) return 3;
  const int64_t rows = inputs[0].shape[0], cols = inputs[0].shape[1];
  const float* __restrict xp = data_of<const float>(inputs[0]);
  float* __restrict yp = data_of<float>(outputs[0]);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = xp + r * cols;
    float* y = yp + r * cols;
    const float mx = row_max(x, cols);
    const float sum = exp_sum(x, mx, y, cols);
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < cols; ++c) {
      const float e = STORE_EXP ? y[c] : expf(x[c] - mx);
      y[c] = RECIP ? e * inv : e / sum;
    }
  }
  return 0;
}
