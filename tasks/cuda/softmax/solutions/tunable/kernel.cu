// Tunable softmax for cuda_softmax_f32 (kda tune, tunables.toml). One online pass keeps a running
// (max, sum of exp) per thread, merged across the row's threads; a second pass writes. Every
// configuration is correct on every shape: the float4 path runs only where the row allows it.
//   THREADS: threads per block.
//   ROWS:    rows per block; each row gets THREADS / ROWS threads (a multiple of a warp).
//   VEC:     floats per load and store (1 or 4).
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <math.h>
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
static_assert(VEC == 1 || VEC == 4, "VEC is 1 or 4");

bool is_f32_cuda(const DLTensor& t) {
  return t.device.device_type == kDLCUDA && t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
}

template <class T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

int check_softmax(const DLTensor* in, int64_t n_in, const DLTensor* out, int64_t n_out) {
  if (n_in != 1 || n_out != 1) return 1;
  if (!is_f32_cuda(in[0]) || !is_f32_cuda(out[0])) return 2;
  if (in[0].ndim != 2 || out[0].ndim != 2) return 3;
  if (out[0].shape[0] != in[0].shape[0] || out[0].shape[1] != in[0].shape[1]) return 3;
  return 0;
}

constexpr int kThreadsPerRow = THREADS / ROWS;
constexpr int kWarpsPerRow = kThreadsPerRow / 32;

// Merges (m2, s2) into (m, s): sums of exp relative to their own maxima. -inf max means empty.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
    return;
  }
  const float mx = fmaxf(m, m2);
  s = s * expf(m - mx) + s2 * expf(m2 - mx);
  m = mx;
}

__device__ __forceinline__ void push(float& m, float& s, float v) {
  if (v > m) {
    s = (m == -INFINITY ? 0.0f : s * expf(m - v)) + 1.0f;
    m = v;
  } else {
    s += expf(v - m);
  }
}

template <bool kVector>
__global__ void __launch_bounds__(THREADS) softmax_rows(const float* __restrict__ x, float* __restrict__ y,
                                                        int64_t rows, int64_t cols) {
  __shared__ float part_m[THREADS / 32], part_s[THREADS / 32];
  __shared__ float row_m[ROWS], row_inv[ROWS];
  const int group = threadIdx.x / kThreadsPerRow;
  const int t = threadIdx.x % kThreadsPerRow;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * ROWS + group;
  const float* xr = x + row * cols;
  float m = -INFINITY, s = 0.0f;
  if (row < rows) {
    if (kVector) {
      for (int64_t c = static_cast<int64_t>(t) * 4; c < cols; c += static_cast<int64_t>(kThreadsPerRow) * 4) {
        const float4 v = *reinterpret_cast<const float4*>(xr + c);
        push(m, s, v.x);
        push(m, s, v.y);
        push(m, s, v.z);
        push(m, s, v.w);
      }
    } else {
      for (int64_t c = t; c < cols; c += kThreadsPerRow) push(m, s, xr[c]);
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge(m, s, m2, s2);
  }
  if ((threadIdx.x & 31) == 0) {
    part_m[threadIdx.x / 32] = m;
    part_s[threadIdx.x / 32] = s;
  }
  __syncthreads();
  if (t == 0) {
    float mm = -INFINITY, ss = 0.0f;
    for (int i = 0; i < kWarpsPerRow; ++i) merge(mm, ss, part_m[group * kWarpsPerRow + i], part_s[group * kWarpsPerRow + i]);
    row_m[group] = mm;
    row_inv[group] = 1.0f / ss;
  }
  __syncthreads();
  if (row >= rows) return;
  const float mx = row_m[group], inv = row_inv[group];
  float* yr = y + row * cols;
  if (kVector) {
    for (int64_t c = static_cast<int64_t>(t) * 4; c < cols; c += static_cast<int64_t>(kThreadsPerRow) * 4) {
      const float4 v = *reinterpret_cast<const float4*>(xr + c);
      *reinterpret_cast<float4*>(yr + c) =
          make_float4(expf(v.x - mx) * inv, expf(v.y - mx) * inv, expf(v.z - mx) * inv, expf(v.w - mx) * inv);
    }
  } else {
    for (int64_t c = t; c < cols; c += kThreadsPerRow) yr[c] = expf(xr[c] - mx) * inv;
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int run(const DLTensor* inputs, int64_t num_inputs,
                                                          DLTensor* outputs, int64_t num_outputs, void* stream) {
  if (int rc = check_softmax(inputs, num_inputs, outputs, num_outputs)) return rc;
  const int64_t rows = inputs[0].shape[0], cols = inputs[0].shape[1];
  const float* x = data_of<const float>(inputs[0]);
  float* y = data_of<float>(outputs[0]);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (rows == 0 || cols == 0) return 0;
  const unsigned blocks = static_cast<unsigned>((rows + ROWS - 1) / ROWS);
  const bool vector = VEC == 4 && cols % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(y) % 16 == 0;
  if (vector)
    softmax_rows<true><<<blocks, THREADS, 0, s>>>(x, y, rows, cols);
  else
    softmax_rows<false><<<blocks, THREADS, 0, s>>>(x, y, rows, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
