// Trusted reference for cuda_softmax_f32: one thread per row; max, exponentials and their sum in
// double; one rounding to float per output element. Slow on purpose; only its results matter.
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

__global__ void softmax_reference(const float* x, float* y, int64_t rows, int64_t cols) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* row = x + r * cols;
  double mx = -INFINITY;
  for (int64_t c = 0; c < cols; ++c) mx = fmax(mx, static_cast<double>(row[c]));
  double sum = 0.0;
  for (int64_t c = 0; c < cols; ++c) sum += exp(static_cast<double>(row[c]) - mx);
  for (int64_t c = 0; c < cols; ++c)
    y[r * cols + c] = static_cast<float>(exp(static_cast<double>(row[c]) - mx) / sum);
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
  const int threads = 128;
  const unsigned blocks = static_cast<unsigned>((rows + threads - 1) / threads);
  softmax_reference<<<blocks, threads, 0, s>>>(x, y, rows, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
