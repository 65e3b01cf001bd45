// Tunable softmax for cuda_softmax_f32 (kda tune, tunables.toml). Two paths, both correct on every
// shape:
//   cached:    a row that fits in the row's registers (cols / VEC <= THREADS / ROWS * CACHE) is read
//              once, kept in registers for the max, the sum of exp and the write: one read and one
//              write of the row, the memory floor.
//   streaming: longer rows, or CACHE = 0: one online pass keeps a running (max, sum of exp) per
//              thread, rescaled once per VEC-wide load (not per element), merged across the row's
//              threads, UNROLL loads in flight per thread; a second pass writes (the row's second
//              read mostly hits L2).
//   THREADS: threads per block.
//   ROWS:    rows per block; each row gets THREADS / ROWS threads (a multiple of a warp).
//   VEC:     floats per load and store (1 or 4; the float4 path takes any cols: each row's unaligned
//            head and tail floats are loaded one by one).
//   CACHE:   VEC-wide loads per thread kept in registers by the cached path (0: streaming only).
//   UNROLL:  VEC-wide loads each thread of the streaming path issues before it uses them.
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
#ifndef UNROLL
#define UNROLL 1
#endif

namespace {

static_assert(THREADS % (32 * ROWS) == 0, "each row needs whole warps");
static_assert(VEC == 1 || VEC == 4, "VEC is 1 or 4");
static_assert(CACHE >= 0 && CACHE <= 32, "CACHE is 0..32 loads per thread");
static_assert(UNROLL >= 1 && UNROLL <= 8, "UNROLL is 1..8 loads in flight");

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

// A row as a scalar head up to its first 16-byte boundary, `body` units of W floats (float4s on the
// vector path) and a scalar tail; head and tail are at most 3 floats each and belong to the row's
// threads 0..2, so the vector path serves every cols and every row's alignment (x and y share
// their phase modulo 16 bytes, which run() checks). The scalar path is all body.
struct RowSpan {
  int head;
  int64_t body;
  int tail;
};

template <bool kVector>
__device__ __forceinline__ RowSpan split_row(const float* xr, int64_t cols) {
  if (!kVector) return {0, cols, 0};
  const int misaligned = static_cast<int>((reinterpret_cast<uintptr_t>(xr) / sizeof(float)) & 3);
  const int head = static_cast<int>(cols < ((4 - misaligned) & 3) ? cols : ((4 - misaligned) & 3));
  const int64_t body = (cols - head) / 4;
  return {head, body, static_cast<int>(cols - head - body * 4)};
}

// Unit b of the row's body into v[0..W), or -inf when b is past it.
template <bool kVector>
__device__ __forceinline__ void load_unit(const float* xr, const RowSpan& sp, int64_t b, float* v) {
  if (kVector) {
    if (b < sp.body) {
      const float4 q = *reinterpret_cast<const float4*>(xr + sp.head + b * 4);
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
      v[0] = v[1] = v[2] = v[3] = -INFINITY;
    }
  } else {
    v[0] = b < sp.body ? xr[b] : -INFINITY;
  }
}

template <bool kVector>
__device__ __forceinline__ void store_unit(float* yr, const RowSpan& sp, int64_t b, const float* v) {
  if (kVector)
    *reinterpret_cast<float4*>(yr + sp.head + b * 4) = make_float4(v[0], v[1], v[2], v[3]);
  else
    yr[b] = v[0];
}

// The head and tail floats thread t owns (e[0]: head, e[1]: tail), and where they are in the row.
__device__ __forceinline__ void load_edges(const float* xr, const RowSpan& sp, int t, float* e) {
  e[0] = t < sp.head ? xr[t] : -INFINITY;
  e[1] = t < sp.tail ? xr[sp.head + sp.body * 4 + t] : -INFINITY;
}

__device__ __forceinline__ void store_edges(float* yr, const RowSpan& sp, int t, const float* e) {
  if (t < sp.head) yr[t] = e[0];
  if (t < sp.tail) yr[sp.head + sp.body * 4 + t] = e[1];
}

// The cached path: kCache units of W floats per thread (plus its head and tail floats), the row
// held in registers.
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
  const RowSpan sp = live ? split_row<kVector>(xr, cols) : RowSpan{0, 0, 0};
  float v[kCache * W], e[2];
#pragma unroll
  for (int i = 0; i < kCache; ++i) load_unit<kVector>(xr, sp, static_cast<int64_t>(i) * kThreadsPerRow + t, v + i * W);
  load_edges(xr, sp, t, e);
  float m = fmaxf(e[0], e[1]);
#pragma unroll
  for (int i = 0; i < kCache * W; ++i) m = fmaxf(m, v[i]);
  m = row_reduce<true>(m, part, group);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kCache * W; ++i) {
    v[i] = fast_exp(v[i] - m);  // padding is -inf: exp gives 0
    s += v[i];
  }
  e[0] = fast_exp(e[0] - m), e[1] = fast_exp(e[1] - m);
  s = row_reduce<false>(s + e[0] + e[1], part, group);
  if (!live) return;
  const float inv = 1.0f / s;
  float* yr = y + row * cols;
#pragma unroll
  for (int i = 0; i < kCache * W; ++i) v[i] *= inv;
#pragma unroll
  for (int i = 0; i < kCache; ++i) {
    const int64_t b = static_cast<int64_t>(i) * kThreadsPerRow + t;
    if (b >= sp.body) break;
    store_unit<kVector>(yr, sp, b, v + i * W);
  }
  e[0] *= inv, e[1] *= inv;
  store_edges(yr, sp, t, e);
}

// Units each thread loads before it uses them in the streaming path (UNROLL): several loads in
// flight per thread on long rows, not one round trip to memory per unit; 1 on short rows, where the
// guards of the unused ones cost more than they hide. H200 run 61, 128 threads, float4: 1 x 32768
// 26.8 -> 20.9 us and 128 x 4096 5.5 -> 4.5 us with 4, but 32768 x 512 80.5 -> 83.1 us.
constexpr int kUnroll = UNROLL;

// The streaming path: online (max, sum) pass, then a write pass.
template <bool kVector>
__global__ void __launch_bounds__(THREADS) softmax_streaming(const float* __restrict__ x, float* __restrict__ y,
                                                             int64_t rows, int64_t cols) {
  constexpr int W = kVector ? 4 : 1;
  constexpr int64_t kStride = static_cast<int64_t>(kThreadsPerRow) * kUnroll;
  __shared__ float part_m[THREADS / 32], part_s[THREADS / 32];
  const int group = threadIdx.x / kThreadsPerRow;
  const int t = threadIdx.x % kThreadsPerRow;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * ROWS + group;
  const float* xr = x + row * cols;
  const RowSpan sp = row < rows ? split_row<kVector>(xr, cols) : RowSpan{0, 0, 0};
  float m = -INFINITY, s = 0.0f;
  for (int64_t b0 = t; b0 < sp.body; b0 += kStride) {
    float v[kUnroll][W];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) load_unit<kVector>(xr, sp, b0 + u * kThreadsPerRow, v[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (b0 + u * kThreadsPerRow < sp.body) push<W>(m, s, v[u]);
  }
  float e[2];
  load_edges(xr, sp, t, e);
  if (t < sp.head) push<1>(m, s, &e[0]);
  if (t < sp.tail) push<1>(m, s, &e[1]);
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
  for (int64_t b0 = t; b0 < sp.body; b0 += kStride) {
    float v[kUnroll][W];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) load_unit<kVector>(xr, sp, b0 + u * kThreadsPerRow, v[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (b0 + u * kThreadsPerRow >= sp.body) break;
#pragma unroll
      for (int j = 0; j < W; ++j) v[u][j] = fast_exp(v[u][j] - m) * inv;
      store_unit<kVector>(yr, sp, b0 + u * kThreadsPerRow, v[u]);
    }
  }
  e[0] = fast_exp(e[0] - m) * inv, e[1] = fast_exp(e[1] - m) * inv;
  store_edges(yr, sp, t, e);
}

template <bool kVector>
void launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>((rows + ROWS - 1) / ROWS);
  constexpr int64_t kFits = static_cast<int64_t>(kThreadsPerRow) * CACHE;  // units per row
  if constexpr (CACHE > 0) {
    if ((kVector ? cols / 4 : cols) <= kFits) {  // a row's body is at most cols / 4 float4s
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
  const uintptr_t xa = reinterpret_cast<uintptr_t>(x), ya = reinterpret_cast<uintptr_t>(y);
  const bool vector = VEC == 4 && xa % 16 == ya % 16 && xa % sizeof(float) == 0;  // rows split alike
  if (vector)
    launch<true>(x, y, rows, cols, s);
  else
    launch<false>(x, y, rows, cols, s);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
