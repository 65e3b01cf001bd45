// Tunable RMSNorm for host_rmsnorm_f32 (kda tune, tunables.toml). Every configuration is correct on
// every shape (remainder loops), so the dispatcher's fallback can serve shapes no regime covers.
//   UNROLL: independent accumulators in the sum of squares (breaks the add chain; without
//           -ffast-math the compiler vectorises a float reduction only this way).
//   ROWS:   rows whose statistics are computed before they are scaled (row blocking).
//   SCALE_UNROLL: unroll of the scaling loop.
#include <dlpack/dlpack.h>
#include <math.h>
#include <stdint.h>

#ifndef UNROLL
#define UNROLL 8
#endif
#ifndef ROWS
#define ROWS 1
#endif
#ifndef SCALE_UNROLL
#define SCALE_UNROLL 4
#endif

namespace {

bool is_f32(const DLTensor& t) {
  return t.device.device_type == kDLCPU && t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
}

template <class T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

inline float sum_of_squares(const float* __restrict x, int64_t n) {
  float acc[UNROLL];
  for (int u = 0; u < UNROLL; ++u) acc[u] = 0.0f;
  int64_t c = 0;
  for (; c + UNROLL <= n; c += UNROLL)
    for (int u = 0; u < UNROLL; ++u) acc[u] += x[c + u] * x[c + u];
  float s = 0.0f;
  for (int u = 0; u < UNROLL; ++u) s += acc[u];
  for (; c < n; ++c) s += x[c] * x[c];
  return s;
}

inline void scale_row(const float* __restrict x, const float* __restrict w, float inv, float* __restrict y, int64_t n) {
  int64_t c = 0;
  for (; c + SCALE_UNROLL <= n; c += SCALE_UNROLL)
    for (int u = 0; u < SCALE_UNROLL; ++u) y[c + u] = x[c + u] * inv * w[c + u];
  for (; c < n; ++c) y[c] = x[c] * inv * w[c];
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int run(const DLTensor* inputs, int64_t num_inputs,
                                                          DLTensor* outputs, int64_t num_outputs, void* stream) {
  (void)stream;
  if (num_inputs != 3 || num_outputs != 2) return 1;
  const DLTensor& x = inputs[0];
  const DLTensor& w = inputs[1];
  const DLTensor& eps_t = inputs[2];
  DLTensor& y = outputs[0];
  DLTensor& inv = outputs[1];
  if (!is_f32(x) || !is_f32(w) || !is_f32(eps_t) || !is_f32(y) || !is_f32(inv)) return 2;
  if (x.ndim != 2 || w.ndim != 1 || eps_t.ndim != 0 || y.ndim != 2 || inv.ndim != 1) return 3;
  const int64_t batch = x.shape[0];
  const int64_t hidden = x.shape[1];
  if (w.shape[0] != hidden || y.shape[0] != batch || y.shape[1] != hidden || inv.shape[0] != batch) return 3;

  const float* xp = data_of<const float>(x);
  const float* wp = data_of<const float>(w);
  const float eps = *data_of<const float>(eps_t);
  float* yp = data_of<float>(y);
  float* ip = data_of<float>(inv);
  const float inv_n = 1.0f / static_cast<float>(hidden > 0 ? hidden : 1);
  for (int64_t r0 = 0; r0 < batch; r0 += ROWS) {
    const int64_t r1 = r0 + ROWS < batch ? r0 + ROWS : batch;
    for (int64_t r = r0; r < r1; ++r) ip[r] = 1.0f / sqrtf(sum_of_squares(xp + r * hidden, hidden) * inv_n + eps);
    for (int64_t r = r0; r < r1; ++r) scale_row(xp + r * hidden, wp, ip[r], yp + r * hidden, hidden);
  }
  return 0;
}
