// Trusted reference for host_gemm_f32: i-j-k loops with a double accumulator, one rounding per
// output element.
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

// Checks arity, dtypes and shapes of host_gemm_f32; 0 when the call is well formed.
int check_gemm(const DLTensor* in, int64_t n_in, const DLTensor* out, int64_t n_out) {
  if (n_in != 2 || n_out != 1) return 1;
  if (!is_f32(in[0]) || !is_f32(in[1]) || !is_f32(out[0])) return 2;
  if (in[0].ndim != 2 || in[1].ndim != 2 || out[0].ndim != 2) return 3;
  if (in[1].shape[0] != in[0].shape[1] || out[0].shape[0] != in[0].shape[0] ||
      out[0].shape[1] != in[1].shape[1])
    return 3;
  return 0;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int run(const DLTensor* inputs, int64_t num_inputs,
                                                          DLTensor* outputs, int64_t num_outputs,
                                                          void* stream) {
  (void)stream;
  if (int rc = check_gemm(inputs, num_inputs, outputs, num_outputs)) return rc;
  const int64_t M = inputs[0].shape[0], K = inputs[0].shape[1], N = inputs[1].shape[1];
  const float* __restrict A = data_of<const float>(inputs[0]);
  const float* __restrict B = data_of<const float>(inputs[1]);
  float* __restrict C = data_of<float>(outputs[0]);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(A[i * K + k]) * B[k * N + j];
      C[i * N + j] = static_cast<float>(acc);
    }
  return 0;
}
