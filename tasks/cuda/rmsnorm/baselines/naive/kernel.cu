// Baseline for cuda_rmsnorm_bf16: what an engineer writes first. One block of 256 threads per row,
// scalar bf16 loads, float accumulation, a shared-memory tree reduction, then a second pass.
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

constexpr int kThreads = 256;

// One block per row: strided float sum of squares, shared-memory tree reduction, scale pass.
__global__ void rmsnorm_block_per_row(const __nv_bfloat16* x, const __nv_bfloat16* w, float eps,
                                      __nv_bfloat16* y, int64_t hidden) {
  __shared__ float partial[kThreads];
  const __nv_bfloat16* row = x + blockIdx.x * hidden;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < hidden; c += kThreads) {
    const float v = __bfloat162float(row[c]);
    sum += v * v;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const float inv_rms = 1.0f / sqrtf(partial[0] / static_cast<float>(hidden) + eps);
  __nv_bfloat16* out = y + blockIdx.x * hidden;
  for (int64_t c = threadIdx.x; c < hidden; c += kThreads)
    out[c] = __float2bfloat16(__bfloat162float(row[c]) * inv_rms * __bfloat162float(w[c]));
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
  rmsnorm_block_per_row<<<static_cast<unsigned>(batch), kThreads, 0, s>>>(x, w, eps, y, hidden);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
