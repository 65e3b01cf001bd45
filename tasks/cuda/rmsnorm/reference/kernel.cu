// Trusted reference for cuda_rmsnorm_bf16: one thread per row, the mean square and the scaling in
// double, one rounding to bf16 per output element. Slow on purpose; only its results matter.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <stdint.h>

namespace {

bool is_bf16_cuda(const DLTensor& t) {
  return t.device.device_type == kDLCUDA && t.dtype.code == kDLBfloat && t.dtype.bits == 16 &&
         t.dtype.lanes == 1;
}

bool is_f32_host_scalar(const DLTensor& t) {
  return t.device.device_type == kDLCPU && t.ndim == 0 && t.dtype.code == kDLFloat &&
         t.dtype.bits == 32 && t.dtype.lanes == 1;
}

template <class T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

// Checks arity, dtypes, devices and shapes of cuda_rmsnorm_bf16; 0 when the call is well formed.
int check_rmsnorm(const DLTensor* in, int64_t n_in, const DLTensor* out, int64_t n_out) {
  if (n_in != 3 || n_out != 1) return 1;
  if (!is_bf16_cuda(in[0]) || !is_bf16_cuda(in[1]) || !is_f32_host_scalar(in[2]) ||
      !is_bf16_cuda(out[0]))
    return 2;
  if (in[0].ndim != 2 || in[1].ndim != 1 || out[0].ndim != 2) return 3;
  const int64_t batch = in[0].shape[0], hidden = in[0].shape[1];
  if (in[1].shape[0] != hidden || out[0].shape[0] != batch || out[0].shape[1] != hidden) return 3;
  return 0;
}

}  // namespace

namespace {

__global__ void rmsnorm_reference(const __nv_bfloat16* x, const __nv_bfloat16* w, double eps,
                                  __nv_bfloat16* y, int64_t batch, int64_t hidden) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= batch) return;
  const __nv_bfloat16* row = x + r * hidden;
  double sum_sq = 0.0;
  for (int64_t c = 0; c < hidden; ++c) {
    const double v = __bfloat162float(row[c]);
    sum_sq += v * v;
  }
  const double inv_rms = 1.0 / sqrt(sum_sq / static_cast<double>(hidden) + eps);
  for (int64_t c = 0; c < hidden; ++c) {
    const double v = static_cast<double>(__bfloat162float(row[c])) * inv_rms *
                     static_cast<double>(__bfloat162float(w[c]));
    y[r * hidden + c] = __float2bfloat16(static_cast<float>(v));
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int run(const DLTensor* inputs, int64_t num_inputs,
                                                          DLTensor* outputs, int64_t num_outputs,
                                                          void* stream) {
  if (int rc = check_rmsnorm(inputs, num_inputs, outputs, num_outputs)) return rc;
  const int64_t batch = inputs[0].shape[0], hidden = inputs[0].shape[1];
  const __nv_bfloat16* x = data_of<const __nv_bfloat16>(inputs[0]);
  const __nv_bfloat16* w = data_of<const __nv_bfloat16>(inputs[1]);
  const float eps = *data_of<const float>(inputs[2]);
  __nv_bfloat16* y = data_of<__nv_bfloat16>(outputs[0]);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (batch == 0 || hidden == 0) return 0;
  const int threads = 128;
  const unsigned blocks = static_cast<unsigned>((batch + threads - 1) / threads);
  rmsnorm_reference<<<blocks, threads, 0, s>>>(x, w, eps, y, batch, hidden);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
