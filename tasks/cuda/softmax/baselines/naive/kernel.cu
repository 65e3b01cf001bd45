// Baseline for cuda_softmax_f32: what an engineer writes first. One block of 256 threads per row,
// three passes over the row (max, sum of exp, write) with shared-memory tree reductions.
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <math.h>
#include <stdint.h>

namespace {

bool is_f32_cuda(const DLTensor& t) {
  return t.device.device_type == kDLCUDA && t.dtype.code == kDLFloat && t.dtype.bits == 32 &&
         t.dtype.lanes == 1;
}

template <class T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

// Checks arity, dtypes, devices and shapes of cuda_softmax_f32; 0 when the call is well formed.
int check_softmax(const DLTensor* in, int64_t n_in, const DLTensor* out, int64_t n_out) {
  if (n_in != 1 || n_out != 1) return 1;
  if (!is_f32_cuda(in[0]) || !is_f32_cuda(out[0])) return 2;
  if (in[0].ndim != 2 || out[0].ndim != 2) return 3;
  if (out[0].shape[0] != in[0].shape[0] || out[0].shape[1] != in[0].shape[1]) return 3;
  return 0;
}

}  // namespace


namespace {

constexpr int kThreads = 256;

// One block per row, three passes: max, sum of exp, normalised write; shared-memory reductions.
__global__ void softmax_block_per_row(const float* x, float* y, int64_t cols) {
  __shared__ float partial[kThreads];
  const float* row = x + blockIdx.x * cols;
  float mx = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) mx = fmaxf(mx, row[c]);
  partial[threadIdx.x] = mx;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + stride]);
    __syncthreads();
  }
  mx = partial[0];
  __syncthreads();
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) sum += expf(row[c] - mx);
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  sum = partial[0];
  float* out = y + blockIdx.x * cols;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) out[c] = expf(row[c] - mx) / sum;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int run(const DLTensor* inputs, int64_t num_inputs,
                                                          DLTensor* outputs, int64_t num_outputs,
                                                          void* stream) {
  if (int rc = check_softmax(inputs, num_inputs, outputs, num_outputs)) return rc;
  const int64_t rows = inputs[0].shape[0], cols = inputs[0].shape[1];
  const float* x = data_of<const float>(inputs[0]);
  float* y = data_of<float>(outputs[0]);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (rows == 0 || cols == 0) return 0;
  softmax_block_per_row<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(x, y, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
