// Trusted reference for cuda_gemm_bf16_f32: one thread per output element, a plain fp32 loop over
// K (products of bf16 values are exact in fp32). Slow on purpose; only its results matter.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <stdint.h>

namespace {

bool is_dtype_cuda(const DLTensor& t, uint8_t code, uint8_t bits) {
  return t.device.device_type == kDLCUDA && t.dtype.code == code && t.dtype.bits == bits &&
         t.dtype.lanes == 1;
}

template <class T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

// Checks arity, dtypes, devices and shapes of cuda_gemm_bf16_f32; 0 when the call is well formed.
int check_gemm(const DLTensor* in, int64_t n_in, const DLTensor* out, int64_t n_out) {
  if (n_in != 2 || n_out != 1) return 1;
  if (!is_dtype_cuda(in[0], kDLBfloat, 16) || !is_dtype_cuda(in[1], kDLBfloat, 16) ||
      !is_dtype_cuda(out[0], kDLFloat, 32))
    return 2;
  if (in[0].ndim != 2 || in[1].ndim != 2 || out[0].ndim != 2) return 3;
  if (in[1].shape[0] != in[0].shape[1] || out[0].shape[0] != in[0].shape[0] ||
      out[0].shape[1] != in[1].shape[1])
    return 3;
  return 0;
}

}  // namespace

namespace {

__global__ void gemm_reference(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int64_t M,
                               int64_t N, int64_t K) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= N) return;
  for (int64_t row = blockIdx.y; row < M; row += gridDim.y) {
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k)
      acc += __bfloat162float(A[row * K + k]) * __bfloat162float(B[k * N + col]);
    C[row * N + col] = acc;
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int run(const DLTensor* inputs, int64_t num_inputs,
                                                          DLTensor* outputs, int64_t num_outputs,
                                                          void* stream) {
  if (int rc = check_gemm(inputs, num_inputs, outputs, num_outputs)) return rc;
  const int64_t M = inputs[0].shape[0], K = inputs[0].shape[1], N = inputs[1].shape[1];
  const __nv_bfloat16* A = data_of<const __nv_bfloat16>(inputs[0]);
  const __nv_bfloat16* B = data_of<const __nv_bfloat16>(inputs[1]);
  float* C = data_of<float>(outputs[0]);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (M == 0 || N == 0) return 0;
  const int threads = 256;
  const int64_t rows_in_grid = M < 65535 ? M : 65535;
  const dim3 grid(static_cast<unsigned>((N + threads - 1) / threads), static_cast<unsigned>(rows_in_grid));
  gemm_reference<<<grid, threads, 0, s>>>(A, B, C, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
