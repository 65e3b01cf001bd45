// Tunable RMSNorm for cuda_rmsnorm_bf16 (kda tune, tunables.toml). Every configuration is correct on
// every shape: the vector path runs only where the row length and the pointers allow it.
//   THREADS: threads per block.
//   ROWS:    rows per block; each row gets THREADS / ROWS threads (a multiple of a warp).
//   VEC:     bf16 elements per load and store (8 = 16 bytes).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <stdint.h>

#ifndef THREADS
#define THREADS 256
#endif
#ifndef ROWS
#define ROWS 1
#endif
#ifndef VEC
#define VEC 1
#endif

namespace {

static_assert(THREADS % (32 * ROWS) == 0, "each row needs whole warps");

bool is_bf16_cuda(const DLTensor& t) {
  return t.device.device_type == kDLCUDA && t.dtype.code == kDLBfloat && t.dtype.bits == 16 && t.dtype.lanes == 1;
}

bool is_f32_host_scalar(const DLTensor& t) {
  return t.device.device_type == kDLCPU && t.ndim == 0 && t.dtype.code == kDLFloat && t.dtype.bits == 32 &&
         t.dtype.lanes == 1;
}

template <class T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

int check_rmsnorm(const DLTensor* in, int64_t n_in, const DLTensor* out, int64_t n_out) {
  if (n_in != 3 || n_out != 1) return 1;
  if (!is_bf16_cuda(in[0]) || !is_bf16_cuda(in[1]) || !is_f32_host_scalar(in[2]) || !is_bf16_cuda(out[0])) return 2;
  if (in[0].ndim != 2 || in[1].ndim != 1 || out[0].ndim != 2) return 3;
  const int64_t batch = in[0].shape[0], hidden = in[0].shape[1];
  if (in[1].shape[0] != hidden || out[0].shape[0] != batch || out[0].shape[1] != hidden) return 3;
  return 0;
}

struct alignas(2 * VEC) Pack {
  __nv_bfloat16 v[VEC];
};

constexpr int kThreadsPerRow = THREADS / ROWS;
constexpr int kWarpsPerRow = kThreadsPerRow / 32;

template <bool kVector>
__global__ void __launch_bounds__(THREADS) rmsnorm_rows(const __nv_bfloat16* __restrict__ x,
                                                        const __nv_bfloat16* __restrict__ w, float eps,
                                                        __nv_bfloat16* __restrict__ y, int64_t batch, int64_t hidden) {
  __shared__ float partial[THREADS / 32];
  __shared__ float inv_rms[ROWS];
  const int group = threadIdx.x / kThreadsPerRow;
  const int t = threadIdx.x % kThreadsPerRow;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * ROWS + group;
  const __nv_bfloat16* xr = x + row * hidden;
  float sum = 0.0f;
  if (row < batch) {
    if (kVector) {
      for (int64_t c = static_cast<int64_t>(t) * VEC; c < hidden; c += static_cast<int64_t>(kThreadsPerRow) * VEC) {
        const Pack p = *reinterpret_cast<const Pack*>(xr + c);
#pragma unroll
        for (int u = 0; u < VEC; ++u) {
          const float v = __bfloat162float(p.v[u]);
          sum += v * v;
        }
      }
    } else {
      for (int64_t c = t; c < hidden; c += kThreadsPerRow) {
        const float v = __bfloat162float(xr[c]);
        sum += v * v;
      }
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  if (t == 0) {
    float s = 0.0f;
    for (int i = 0; i < kWarpsPerRow; ++i) s += partial[group * kWarpsPerRow + i];
    inv_rms[group] = 1.0f / sqrtf(s / static_cast<float>(hidden) + eps);
  }
  __syncthreads();
  if (row >= batch) return;
  const float inv = inv_rms[group];
  __nv_bfloat16* yr = y + row * hidden;
  if (kVector) {
    for (int64_t c = static_cast<int64_t>(t) * VEC; c < hidden; c += static_cast<int64_t>(kThreadsPerRow) * VEC) {
      const Pack p = *reinterpret_cast<const Pack*>(xr + c);
      const Pack q = *reinterpret_cast<const Pack*>(w + c);
      Pack o;
#pragma unroll
      for (int u = 0; u < VEC; ++u)
        o.v[u] = __float2bfloat16(__bfloat162float(p.v[u]) * inv * __bfloat162float(q.v[u]));
      *reinterpret_cast<Pack*>(yr + c) = o;
    }
  } else {
    for (int64_t c = t; c < hidden; c += kThreadsPerRow)
      yr[c] = __float2bfloat16(__bfloat162float(xr[c]) * inv * __bfloat162float(w[c]));
  }
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % (2 * VEC) == 0; }

}  // namespace

extern "C" __attribute__((visibility("default"))) int run(const DLTensor* inputs, int64_t num_inputs,
                                                          DLTensor* outputs, int64_t num_outputs, void* stream) {
  if (int rc = check_rmsnorm(inputs, num_inputs, outputs, num_outputs)) return rc;
  const int64_t batch = inputs[0].shape[0], hidden = inputs[0].shape[1];
  const __nv_bfloat16* x = data_of<const __nv_bfloat16>(inputs[0]);
  const __nv_bfloat16* w = data_of<const __nv_bfloat16>(inputs[1]);
  const float eps = *data_of<const float>(inputs[2]);
  __nv_bfloat16* y = data_of<__nv_bfloat16>(outputs[0]);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (batch == 0 || hidden == 0) return 0;
  const unsigned blocks = static_cast<unsigned>((batch + ROWS - 1) / ROWS);
  const bool vector = VEC > 1 && hidden % VEC == 0 && aligned(x) && aligned(w) && aligned(y);
  if (vector)
    rmsnorm_rows<true><<<blocks, THREADS, 0, s>>>(x, w, eps, y, batch, hidden);
  else
    rmsnorm_rows<false><<<blocks, THREADS, 0, s>>>(x, w, eps, y, batch, hidden);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
