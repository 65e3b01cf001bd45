// Tunable GEMM for cuda_gemm_bf16_f32, C = A * B with bf16 inputs and float accumulation (kda tune,
// tunables.toml). Register-blocked: a block computes a BM x BN tile of C over K steps of BK staged in
// shared memory; each thread owns TM x TN outputs spread over the tile (strided, so a warp's shared
// reads fall in distinct banks). Every configuration is correct on every shape (edges are masked).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <stdint.h>

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 16
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif

namespace {

constexpr int kRowsOfThreads = BM / TM;
constexpr int kColsOfThreads = BN / TN;
constexpr int kThreads = kRowsOfThreads * kColsOfThreads;
static_assert(BM % TM == 0 && BN % TN == 0, "thread tiles divide the block tile");
static_assert(kThreads >= 32 && kThreads <= 1024, "32..1024 threads per block");
static_assert((BM + BN) * BK * 4 <= 48 * 1024, "static shared memory");

bool is_dtype_cuda(const DLTensor& t, uint8_t code, uint8_t bits) {
  return t.device.device_type == kDLCUDA && t.dtype.code == code && t.dtype.bits == bits && t.dtype.lanes == 1;
}

template <class T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

int check_gemm(const DLTensor* in, int64_t n_in, const DLTensor* out, int64_t n_out) {
  if (n_in != 2 || n_out != 1) return 1;
  if (!is_dtype_cuda(in[0], kDLBfloat, 16) || !is_dtype_cuda(in[1], kDLBfloat, 16) || !is_dtype_cuda(out[0], kDLFloat, 32))
    return 2;
  if (in[0].ndim != 2 || in[1].ndim != 2 || out[0].ndim != 2) return 3;
  if (in[1].shape[0] != in[0].shape[1] || out[0].shape[0] != in[0].shape[0] || out[0].shape[1] != in[1].shape[1])
    return 3;
  return 0;
}

__global__ void __launch_bounds__(kThreads) gemm_blocked(const __nv_bfloat16* __restrict__ A,
                                                         const __nv_bfloat16* __restrict__ B, float* __restrict__ C,
                                                         int64_t M, int64_t N, int64_t K) {
  __shared__ float As[BK][BM];  // A's tile transposed: a thread's TM values of one k are a row
  __shared__ float Bs[BK][BN];
  const int tid = threadIdx.x;
  const int ty = tid / kColsOfThreads, tx = tid % kColsOfThreads;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * BM, col0 = static_cast<int64_t>(blockIdx.x) * BN;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
  for (int64_t k0 = 0; k0 < K; k0 += BK) {
    for (int i = tid; i < BM * BK; i += kThreads) {
      const int r = i / BK, k = i % BK;
      const int64_t gr = row0 + r, gk = k0 + k;
      As[k][r] = gr < M && gk < K ? __bfloat162float(A[gr * K + gk]) : 0.0f;
    }
    for (int i = tid; i < BK * BN; i += kThreads) {
      const int k = i / BN, c = i % BN;
      const int64_t gk = k0 + k, gc = col0 + c;
      Bs[k][c] = gk < K && gc < N ? __bfloat162float(B[gk * N + gc]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[k][ty + i * kRowsOfThreads];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx + j * kColsOfThreads];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t r = row0 + ty + i * kRowsOfThreads;
    if (r >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int64_t c = col0 + tx + j * kColsOfThreads;
      if (c < N) C[r * N + c] = acc[i][j];
    }
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int run(const DLTensor* inputs, int64_t num_inputs,
                                                          DLTensor* outputs, int64_t num_outputs, void* stream) {
  if (int rc = check_gemm(inputs, num_inputs, outputs, num_outputs)) return rc;
  const int64_t M = inputs[0].shape[0], K = inputs[0].shape[1], N = inputs[1].shape[1];
  const __nv_bfloat16* A = data_of<const __nv_bfloat16>(inputs[0]);
  const __nv_bfloat16* B = data_of<const __nv_bfloat16>(inputs[1]);
  float* C = data_of<float>(outputs[0]);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (M == 0 || N == 0) return 0;
  const dim3 grid(static_cast<unsigned>((N + BN - 1) / BN), static_cast<unsigned>((M + BM - 1) / BM));
  gemm_blocked<<<grid, kThreads, 0, s>>>(A, B, C, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
