// Baseline for cuda_gemm_bf16_f32: the classic 16x16 shared-memory tiled kernel, one output per
// thread, CUDA cores, fp32 accumulation.
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

constexpr int kTile = 16;

// 16x16 shared-memory tiles of A and B, one output per thread, fp32 accumulation. Out-of-range
// tile elements are loaded as zero, so any M, N, K works.
__global__ void gemm_tiled(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int64_t M,
                           int64_t N, int64_t K) {
  __shared__ float a_tile[kTile][kTile];
  __shared__ float b_tile[kTile][kTile];
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kTile + threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < K; k0 += kTile) {
    const int64_t ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    a_tile[threadIdx.y][threadIdx.x] = row < M && ka < K ? __bfloat162float(A[row * K + ka]) : 0.0f;
    b_tile[threadIdx.y][threadIdx.x] = kb < K && col < N ? __bfloat162float(B[kb * N + col]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTile; ++k) acc += a_tile[threadIdx.y][k] * b_tile[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
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
  const dim3 grid(static_cast<unsigned>((N + kTile - 1) / kTile), static_cast<unsigned>((M + kTile - 1) / kTile));
  gemm_tiled<<<grid, dim3(kTile, kTile), 0, s>>>(A, B, C, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
