// Baseline for host_rmsnorm_f32: the loop an engineer writes first. Float accumulation, two passes
// over each row, no vectorisation hints.
#include <dlpack/dlpack.h>
#include <math.h>
#include <stdint.h>

namespace {

bool is_f32(const DLTensor& t) {
  return t.device.device_type == kDLCPU && t.dtype.code == kDLFloat && t.dtype.bits == 32 &&
         t.dtype.lanes == 1;
}

template <class T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int run(const DLTensor* inputs, int64_t num_inputs,
                                                          DLTensor* outputs, int64_t num_outputs,
                                                          void* stream) {
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
  if (w.shape[0] != hidden || y.shape[0] != batch || y.shape[1] != hidden || inv.shape[0] != batch)
    return 3;

  const float* xp = data_of<const float>(x);
  const float* wp = data_of<const float>(w);
  const float eps = *data_of<const float>(eps_t);
  float* yp = data_of<float>(y);
  float* ip = data_of<float>(inv);
  for (int64_t r = 0; r < batch; ++r) {
    float sum_sq = 0.0f;
    for (int64_t c = 0; c < hidden; ++c) sum_sq += xp[r * hidden + c] * xp[r * hidden + c];
    const float inv_rms = 1.0f / sqrtf(sum_sq / static_cast<float>(hidden) + eps);
    for (int64_t c = 0; c < hidden; ++c) yp[r * hidden + c] = xp[r * hidden + c] * inv_rms * wp[c];
    ip[r] = inv_rms;
  }
  return 0;
}
