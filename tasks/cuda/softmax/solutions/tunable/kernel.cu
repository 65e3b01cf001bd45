// Tunable softmax for cuda_softmax_f32 (kda tune, tunables.toml). Two paths, both correct on every
// shape:
//   cached:    a row that fits in the row's registers (cols <= THREADS / ROWS * CACHE * VEC) is read
//              once, kept in registers for the max, the sum of exp and the write: one read and one
//              write of the row, the memory floor.
//   streaming: longer rows, or CACHE = 0: one online pass keeps a running (max, sum of exp) per
//              thread, rescaled once per VEC-wide load (not per element), merged across the row's
//              threads; a second pass writes (the row's second read mostly hits L2).
//   THREADS: threads per block.
//   ROWS:    rows per block; each row gets THREADS / ROWS threads (a multiple of a warp).
//   VEC:     floats per load and store (1 or 4; the float4 path needs cols % 4 == 0 and aligned rows).
//   CACHE:   VEC-wide loads per thread kept in registers by the cached path (0: streaming only).
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
#ifndef CACHE
#define CACHE 0
#endif

namespace {

static_assert(THREADS % (32 * ROWS) == 0, "each row needs whole warps");
static_assert(VEC == 1 || VEC == 4, "VEC is 1 or 4");
static_assert(CACHE >= 0 && CACHE <= 32, "CACHE is 0..32 loads per thread");

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

// exp(x) by the SFU: ex2.approx of x * log2(e), about 2 ulp plus the product's rounding, far
// inside the pack's 1e-4 tolerance; exp(-inf) is +0.
__device__ __forceinline__ float fast_exp(float x) { return exp2f(x * 1.4426950408889634f); }

// Merges (m2, s2) into (m, s): sums of exp relative to their own maxima. -inf max means empty.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
    return;
  }
  const float mx = fmaxf(m, m2);
  s = s * fast_exp(m - mx) + s2 * fast_exp(m2 - mx);
  m = mx;
}

// Adds n values (n = 1 or 4) to (m, s): one rescale when their maximum raises m.
template <int N>
__device__ __forceinline__ void push(float& m, float& s, const float* v) {
  float local = v[0];
#pragma unroll
  for (int i = 1; i < N; ++i) local = fmaxf(local, v[i]);
  if (local > m) {
    s = (m == -INFINITY) ? 0.0f : s * fast_exp(m - local);
    m = local;
  }
#pragma unroll
  for (int i = 0; i < N; ++i) s += fast_exp(v[i] - m);
}

// The row's reduction of one float (max or sum) across its kWarpsPerRow warps; every thread of
// the row gets the result. part holds THREADS / 32 floats; the trailing barrier makes it reusable.
template <bool kMax>
__device__ __forceinline__ float row_reduce(float v, float* part, int group) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, w) : v + w;
  }
  if (kWarpsPerRow == 1) return v;
  if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  float r = part[group * kWarpsPerRow];
#pragma unroll
  for (int i = 1; i < kWarpsPerRow; ++i) r = kMax ? fmaxf(r, part[group * kWarpsPerRow + i]) : r + part[group * kWarpsPerRow + i];
  __syncthreads();
  return r;
}

template <bool kVector>
__device__ __forceinline__ void load(const float* xr, int64_t c, int64_t cols, float* v) {
  if (kVector) {
    if (c < cols) {
      const float4 q = *reinterpret_cast<const float4*>(xr + c);
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
      v[0] = v[1] = v[2] = v[3] = -INFINITY;
    }
  } else {
    v[0] = c < cols ? xr[c] : -INFINITY;
  }
}

// The cached path: kCache loads of W floats per thread, the row held in registers.
template <bool kVector, int kCache>
__global__ void __launch_bounds__(THREADS) softmax_cached(const float* __restrict__ x, float* __restrict__ y,
                                                          int64_t rows, int64_t cols) {
  constexpr int W = kVector ? 4 : 1;
  __shared__ float part[THREADS / 32];
  const int group = threadIdx.x / kThreadsPerRow;
  const int t = threadIdx.x % kThreadsPerRow;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * ROWS + group;
  const bool live = row < rows;  // a dead row's threads still join the block's barriers
  const float* xr = x + (live ? row : 0) * cols;
  float v[kCache * W];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < kCache; ++i) {
    const int64_t c = (static_cast<int64_t>(i) * kThreadsPerRow + t) * W;
    load<kVector>(xr, live ? c : cols, cols, v + i * W);
#pragma unroll
    for (int j = 0; j < W; ++j) m = fmaxf(m, v[i * W + j]);
  }
  m = row_reduce<true>(m, part, group);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kCache * W; ++i) {
    v[i] = fast_exp(v[i] - m);  // padding is -inf: exp gives 0
    s += v[i];
  }
  s = row_reduce<false>(s, part, group);
  if (!live) return;
  const float inv = 1.0f / s;
  float* yr = y + row * cols;
#pragma unroll
  for (int i = 0; i < kCache; ++i) {
    const int64_t c = (static_cast<int64_t>(i) * kThreadsPerRow + t) * W;
    if (c >= cols) break;
    if (kVector)
      *reinterpret_cast<float4*>(yr + c) = make_float4(v[i * 4] * inv, v[i * 4 + 1] * inv, v[i * 4 + 2] * inv, v[i * 4 + 3] * inv);
    else
      yr[c] = v[i] * inv;
  }
}

// The streaming path: online (max, sum) pass, then a write pass.
template <bool kVector>
__global__ void __launch_bounds__(THREADS) softmax_streaming(const float* __restrict__ x, float* __restrict__ y,
                                                             int64_t rows, int64_t cols) {
  constexpr int W = kVector ? 4 : 1;
  __shared__ float part_m[THREADS / 32], part_s[THREADS / 32];
  const int group = threadIdx.x / kThreadsPerRow;
  const int t = threadIdx.x % kThreadsPerRow;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * ROWS + group;
  const float* xr = x + row * cols;
  float m = -INFINITY, s = 0.0f;
  if (row < rows) {
    for (int64_t c = static_cast<int64_t>(t) * W; c < cols; c += static_cast<int64_t>(kThreadsPerRow) * W) {
      float v[W];
      load<kVector>(xr, c, cols, v);
      push<W>(m, s, v);
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge(m, s, m2, s2);
  }
  if (kWarpsPerRow > 1) {
    if ((threadIdx.x & 31) == 0) {
      part_m[threadIdx.x / 32] = m;
      part_s[threadIdx.x / 32] = s;
    }
    __syncthreads();
    m = part_m[group * kWarpsPerRow];
    s = part_s[group * kWarpsPerRow];
    for (int i = 1; i < kWarpsPerRow; ++i) merge(m, s, part_m[group * kWarpsPerRow + i], part_s[group * kWarpsPerRow + i]);
  }
  if (row >= rows) return;
  const float inv = 1.0f / s;
  float* yr = y + row * cols;
  for (int64_t c = static_cast<int64_t>(t) * W; c < cols; c += static_cast<int64_t>(kThreadsPerRow) * W) {
    if (kVector) {
      const float4 q = *reinterpret_cast<const float4*>(xr + c);
      *reinterpret_cast<float4*>(yr + c) =
          make_float4(fast_exp(q.x - m) * inv, fast_exp(q.y - m) * inv, fast_exp(q.z - m) * inv, fast_exp(q.w - m) * inv);
    } else {
      yr[c] = fast_exp(xr[c] - m) * inv;
    }
  }
}

template <bool kVector>
void launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>((rows + ROWS - 1) / ROWS);
  constexpr int64_t kFits = static_cast<int64_t>(kThreadsPerRow) * CACHE * (kVector ? 4 : 1);
  if constexpr (CACHE > 0) {
    if (cols <= kFits) {
      softmax_cached<kVector, CACHE><<<blocks, THREADS, 0, s>>>(x, y, rows, cols);
      return;
    }
  }
  softmax_streaming<kVector><<<blocks, THREADS, 0, s>>>(x, y, rows, cols);
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
  const bool vector = VEC == 4 && cols % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(y) % 16 == 0;
  if (vector)
    launch<true>(x, y, rows, cols, s);
  else
    launch<false>(x, y, rows, cols, s);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
