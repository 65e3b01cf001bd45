// Baseline for host_softmax_f32: three passes per row (max, sum of exp, divide), float throughout.
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

// Checks arity, dtypes and shapes of host_softmax_f32; 0 when the call is well formed.
int check_softmax(const DLTensor* in, int64_t n_in, const DLTensor* out, int64_t n_out) {
  if (n_in != 1 || n_out != 1) return 1;
  if (!is_f32(in[0]) || !is_f32(out[0])) return 2;
  if (in[0].ndim != 2 || out[0].ndim != 2) return 3;
  if (out[0].shape[0] != in[0].shape[0] || out[0].shape[1] != in[0].shape[1]) return 3;
  return 0;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int run(const DLTensor* inputs, int64_t num_inputs,
                                                          DLTensor* outputs, int64_t num_outputs,
                                                          void* stream) {
  (void)stream;
  if (int rc = check_softmax(inputs, num_inputs, outputs, num_outputs)) return rc;
  const int64_t rows = inputs[0].shape[0], cols = inputs[0].shape[1];
  const float* __restrict xp = data_of<const float>(inputs[0]);
  float* __restrict yp = data_of<float>(outputs[0]);
  for (int64_t r = 0; r < rows; ++r) {
    float mx = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) mx = fmaxf(mx, xp[r * cols + c]);
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) sum += expf(xp[r * cols + c] - mx);
    for (int64_t c = 0; c < cols; ++c) yp[r * cols + c] = expf(xp[r * cols + c] - mx) / sum;
  }
  return 0;
}
