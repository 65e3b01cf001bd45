// Baseline ("naive") of moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048: what a competent engineer
// writes first. Everything stays on the device (no host sync):
//   1. route: one thread per token (sigmoid + bias, group top-2 sums, top-4 groups, top-8 experts), counting the
//      tokens of each local expert with atomics;
//   2. offsets: exclusive scan of the 32 counts (one warp);
//   3. scatter: (token, weight) pairs grouped by local expert (order within an expert is arbitrary);
//   4. GEMM1: grouped fp32 SIMT GEMM, 64x64 tiles, 4x4 outputs per thread, fp8 dequantised while loading shared
//      memory, split over K when T is small (so that a handful of experts still fills the GPU), partial sums
//      added atomically into a zeroed fp32 buffer;
//   5. SwiGLU: silu(second half) * first half;
//   6. GEMM2: grouped, same tiling and K split; the epilogue atomically adds w * O into an fp32 accumulator;
//   7. fp32 -> bf16.
// Grouped grids are sized by T rows per expert (the host does not know the counts); blocks past an expert's
// count exit at once. No tensor cores, no FP8 MMA, no pipelining. Scratch buffers persist across calls
// (policy persistent_state = "scratch") and are recomputed every call.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>

#include <cstdint>

namespace {

constexpr int kBlock = 128, kTopK = 8, kGroups = 8, kTopKGroups = 4;
constexpr int kTileM = 64, kTileN = 64, kTileK = 16;
constexpr uint8_t kFloat8E4M3Code = 10;  // DLPack 1.0 kDLFloat8_e4m3fn (Debian's dlpack.h 0.6 has no name)

bool is(const DLTensor& t, uint8_t code, uint8_t bits, int ndim) {
  return t.dtype.code == code && t.dtype.bits == bits && t.dtype.lanes == 1 && t.ndim == ndim;
}

template <typename T>
T* ptr(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

double host_scalar(const DLTensor& t) {
  const char* p = static_cast<const char*>(t.data) + t.byte_offset;
  if (t.dtype.code == kDLFloat && t.dtype.bits == 32) return *reinterpret_cast<const float*>(p);
  if (t.dtype.code == kDLFloat && t.dtype.bits == 64) return *reinterpret_cast<const double*>(p);
  if (t.dtype.code == kDLInt && t.dtype.bits == 32) return *reinterpret_cast<const int32_t*>(p);
  if (t.dtype.code == kDLInt && t.dtype.bits == 64) return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
  return 0.0;
}

__device__ __forceinline__ float e4m3(uint8_t x) {  // exact float8_e4m3fn decode by bit placement
  const uint32_t sign = static_cast<uint32_t>(x & 0x80) << 24;
  const int e = (x >> 3) & 0xf, m = x & 7;
  if (e == 0) return __uint_as_float(sign) + (sign ? -1.f : 1.f) * static_cast<float>(m) * 0.001953125f;  // m * 2^-9
  if (e == 15 && m == 7) return __int_as_float(0x7fc00000);
  return __uint_as_float(sign | static_cast<uint32_t>(e + 120) << 23 | static_cast<uint32_t>(m) << 20);
}

__global__ void route(const float* __restrict__ logits, const __nv_bfloat16* __restrict__ bias, int T, int E,
                      int offset, int EL, float scaling, int* __restrict__ ids, float* __restrict__ weights,
                      int* __restrict__ counts) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= T) return;
  const float* l = logits + static_cast<int64_t>(t) * E;
  const int gs = E / kGroups;
  float gscore[kGroups];
  for (int gi = 0; gi < kGroups; ++gi) {
    float b1 = -INFINITY, b2 = -INFINITY;
    for (int j = gi * gs; j < (gi + 1) * gs; ++j) {
      const float x = 1.0f / (1.0f + expf(-l[j])) + __bfloat162float(bias[j]);
      if (x > b1) { b2 = b1; b1 = x; }
      else if (x > b2) b2 = x;
    }
    gscore[gi] = b1 + b2;
  }
  unsigned keep = 0;
  for (int n = 0; n < kTopKGroups; ++n) {
    int best = -1;
    for (int gi = 0; gi < kGroups; ++gi)
      if (!(keep >> gi & 1u) && (best < 0 || gscore[gi] > gscore[best])) best = gi;
    keep |= 1u << best;
  }
  int chosen[kTopK];
  float sel[kTopK], sum = 0.0f;
  for (int n = 0; n < kTopK; ++n) {
    int best = -1;
    float vb = -INFINITY, sbest = 0.f;
    for (int e = 0; e < E; ++e) {
      if (!(keep >> (e / gs) & 1u)) continue;
      bool taken = false;
      for (int p = 0; p < n; ++p) taken |= chosen[p] == e;
      if (taken) continue;
      const float s = 1.0f / (1.0f + expf(-l[e]));
      const float x = s + __bfloat162float(bias[e]);
      if (best < 0 || x > vb) { best = e; vb = x; sbest = s; }
    }
    chosen[n] = best;
    sel[n] = sbest;
    sum += sbest;
  }
  for (int n = 0; n < kTopK; ++n) {
    ids[t * kTopK + n] = chosen[n];
    weights[t * kTopK + n] = sel[n] / (sum + 1e-20f) * scaling;
    const int le = chosen[n] - offset;
    if (le >= 0 && le < EL) atomicAdd(&counts[le], 1);
  }
}

__global__ void scan_counts(const int* __restrict__ counts, int EL, int* __restrict__ offsets) {
  if (threadIdx.x == 0) {
    int acc = 0;
    for (int le = 0; le < EL; ++le) {
      offsets[le] = acc;
      acc += counts[le];
    }
    offsets[EL] = acc;
  }
}

__global__ void scatter(const int* __restrict__ ids, const float* __restrict__ weights, int T, int offset, int EL,
                        const int* __restrict__ offsets, int* __restrict__ fill, int* __restrict__ pair_tok,
                        float* __restrict__ pair_w) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= T * kTopK) return;
  const int le = ids[idx] - offset;
  if (le < 0 || le >= EL) return;
  const int pos = offsets[le] + atomicAdd(&fill[le], 1);
  pair_tok[pos] = idx / kTopK;
  pair_w[pos] = weights[idx];
}

// G[p, n] += sum over this block's K slice of A[tok_p, k] W13[le, n, k], for the pairs p of expert le and both
// halves (n and I + n). blockIdx.z = le * splits + slice. Block: 16x16 threads, 64 rows x 64 columns of each half.
__global__ void __launch_bounds__(256)
    gemm1_splitk(const uint8_t* __restrict__ hs, const float* __restrict__ hs_scale, const uint8_t* __restrict__ w1,
                 const float* __restrict__ w1_scale, const int* __restrict__ offsets, const int* __restrict__ pair_tok,
                 int T, int H, int I, int splits, float* __restrict__ G) {
  const int le = blockIdx.z / splits, slice = blockIdx.z % splits;
  const int begin = offsets[le], rows = offsets[le + 1] - begin;
  const int m0 = blockIdx.y * kTileM;
  if (m0 >= rows) return;
  const int n0 = blockIdx.x * kTileN;
  const int G1 = 2 * I, HB = H / kBlock;
  const int k_len = H / splits, k_begin = slice * k_len;
  const uint8_t* w = w1 + static_cast<int64_t>(le) * G1 * H;
  const float* ws = w1_scale + static_cast<int64_t>(le) * (G1 / kBlock) * HB;

  __shared__ float As[kTileK][kTileM + 4], Us[kTileK][kTileN + 4], Gs[kTileK][kTileN + 4];
  __shared__ int tok[kTileM];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  if (tid < kTileM) tok[tid] = m0 + tid < rows ? pair_tok[begin + m0 + tid] : -1;
  __syncthreads();

  float up[4][4] = {}, gate[4][4] = {};
  for (int k0 = k_begin; k0 < k_begin + k_len; k0 += kTileK) {
    const int kb = k0 / kBlock;
    for (int l = 0; l < 4; ++l) {  // 64 x 16 elements of each tile, 4 per thread
      const int idx = tid + l * 256, r = idx / kTileK, kk = idx % kTileK;
      const int t = tok[r];
      As[kk][r] = t >= 0 ? e4m3(hs[static_cast<int64_t>(t) * H + k0 + kk]) * hs_scale[static_cast<int64_t>(kb) * T + t]
                         : 0.0f;
      const int nu = n0 + r, ng = I + n0 + r;
      Us[kk][r] = e4m3(w[static_cast<int64_t>(nu) * H + k0 + kk]) * ws[(nu / kBlock) * HB + kb];
      Gs[kk][r] = e4m3(w[static_cast<int64_t>(ng) * H + k0 + kk]) * ws[(ng / kBlock) * HB + kb];
    }
    __syncthreads();
    for (int kk = 0; kk < kTileK; ++kk) {
      float a[4], bu[4], bg[4];
      for (int i = 0; i < 4; ++i) a[i] = As[kk][ty * 4 + i];
      for (int j = 0; j < 4; ++j) {
        bu[j] = Us[kk][tx * 4 + j];
        bg[j] = Gs[kk][tx * 4 + j];
      }
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          up[i][j] += a[i] * bu[j];
          gate[i][j] += a[i] * bg[j];
        }
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    const int r = m0 + ty * 4 + i;
    if (r >= rows) continue;
    float* g = G + static_cast<int64_t>(begin + r) * G1;
    for (int j = 0; j < 4; ++j) {
      atomicAdd(&g[n0 + tx * 4 + j], up[i][j]);
      atomicAdd(&g[I + n0 + tx * 4 + j], gate[i][j]);
    }
  }
}

// inter[p, j] = silu(G[p, I + j]) * G[p, j] for the offsets[EL] pairs.
__global__ void swiglu(const float* __restrict__ G, const int* __restrict__ offsets, int EL, int I,
                       float* __restrict__ inter) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(offsets[EL]) * I) return;
  const int64_t p = idx / I, j = idx % I;
  const float up = G[p * 2 * I + j], x = G[p * 2 * I + I + j];
  inter[idx] = x / (1.0f + expf(-x)) * up;
}

// out[tok_p, n] += w_p * sum over this block's K slice of inter[p, j] W2[le, n, j], for the pairs p of expert le;
// blockIdx.z = le * splits + slice.
__global__ void __launch_bounds__(256)
    gemm2_accumulate(const float* __restrict__ inter, const uint8_t* __restrict__ w2, const float* __restrict__ w2_scale,
                     const int* __restrict__ offsets, const int* __restrict__ pair_tok, const float* __restrict__ pair_w,
                     int H, int I, int splits, float* __restrict__ out) {
  const int le = blockIdx.z / splits, slice = blockIdx.z % splits;
  const int k_len = I / splits, k_begin = slice * k_len;
  const int begin = offsets[le], rows = offsets[le + 1] - begin;
  const int m0 = blockIdx.y * kTileM;
  if (m0 >= rows) return;
  const int n0 = blockIdx.x * kTileN;
  const int IB = I / kBlock;
  const uint8_t* w = w2 + static_cast<int64_t>(le) * H * I;
  const float* ws = w2_scale + static_cast<int64_t>(le) * (H / kBlock) * IB;

  __shared__ float As[kTileK][kTileM + 4], Bs[kTileK][kTileN + 4];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  float acc[4][4] = {};
  for (int k0 = k_begin; k0 < k_begin + k_len; k0 += kTileK) {
    const int kb = k0 / kBlock;
    for (int l = 0; l < 4; ++l) {
      const int idx = tid + l * 256, r = idx / kTileK, kk = idx % kTileK;
      As[kk][r] = m0 + r < rows ? inter[static_cast<int64_t>(begin + m0 + r) * I + k0 + kk] : 0.0f;
      const int n = n0 + r;
      Bs[kk][r] = e4m3(w[static_cast<int64_t>(n) * I + k0 + kk]) * ws[(n / kBlock) * IB + kb];
    }
    __syncthreads();
    for (int kk = 0; kk < kTileK; ++kk) {
      float a[4], b[4];
      for (int i = 0; i < 4; ++i) a[i] = As[kk][ty * 4 + i];
      for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx * 4 + j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    const int r = m0 + ty * 4 + i;
    if (r >= rows) continue;
    const int t = pair_tok[begin + r];
    const float wt = pair_w[begin + r];
    for (int j = 0; j < 4; ++j) atomicAdd(&out[static_cast<int64_t>(t) * H + n0 + tx * 4 + j], wt * acc[i][j]);
  }
}

__global__ void to_bf16(const float* __restrict__ x, int64_t n, __nv_bfloat16* __restrict__ y) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16_rn(x[i]);
}

// Scratch that persists across calls; grown (never shrunk) when a call needs more.
struct Scratch {
  void* ptr = nullptr;
  size_t bytes = 0;
  void* get(size_t need) {
    if (need > bytes) {
      cudaFree(ptr);  // implicit device sync: only when growing (first calls of a shape)
      ptr = nullptr;
      bytes = 0;
      if (cudaMalloc(&ptr, need) != cudaSuccess) return nullptr;
      bytes = need;
    }
    return ptr;
  }
};
Scratch g_scratch;

size_t align256(size_t x) { return (x + 255) / 256 * 256; }

}  // namespace

extern "C" int run(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs,
                   void* stream) {
  if (num_inputs != 10 || num_outputs != 1) return 1;
  const DLTensor &logits = inputs[0], &bias = inputs[1], &hs = inputs[2], &hs_scale = inputs[3], &w1 = inputs[4],
                 &w1_scale = inputs[5], &w2 = inputs[6], &w2_scale = inputs[7];
  DLTensor& output = outputs[0];
  if (!is(logits, kDLFloat, 32, 2) || !is(bias, kDLBfloat, 16, 1) || !is(hs, kFloat8E4M3Code, 8, 2) ||
      !is(hs_scale, kDLFloat, 32, 2) || !is(w1, kFloat8E4M3Code, 8, 3) || !is(w1_scale, kDLFloat, 32, 3) ||
      !is(w2, kFloat8E4M3Code, 8, 3) || !is(w2_scale, kDLFloat, 32, 3) || !is(output, kDLBfloat, 16, 2))
    return 2;
  const int T = static_cast<int>(logits.shape[0]), E = static_cast<int>(logits.shape[1]),
            H = static_cast<int>(hs.shape[1]), EL = static_cast<int>(w1.shape[0]), I = static_cast<int>(w2.shape[2]);
  if (E % kGroups != 0 || w1.shape[1] != 2 * I || H % kTileN != 0 || I % kTileN != 0 || H % (8 * kBlock) != 0 ||
      I % (4 * kBlock) != 0 || EL > 1024)
    return 2;
  const int offset = static_cast<int>(host_scalar(inputs[8]));
  const float scaling = static_cast<float>(host_scalar(inputs[9]));
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (T == 0) return 0;

  // Scratch layout: ids, weights [T*8]; counts, fill [EL]; offsets [EL+1]; pair_tok, pair_w [T*8];
  // G [T*8, 2I]; inter [T*8, I]; out_f32 [T, H]. Up to 8 pairs per token may be local.
  const size_t pairs = static_cast<size_t>(T) * kTopK;
  size_t off = 0;
  const size_t o_ids = off; off = align256(off + pairs * 4);
  const size_t o_w = off; off = align256(off + pairs * 4);
  const size_t o_counts = off; off = align256(off + 2 * static_cast<size_t>(EL) * 4);
  const size_t o_offsets = off; off = align256(off + (EL + 1) * 4);
  const size_t o_ptok = off; off = align256(off + pairs * 4);
  const size_t o_pw = off; off = align256(off + pairs * 4);
  const size_t o_G = off; off = align256(off + pairs * 2 * I * 4);
  const size_t o_inter = off; off = align256(off + pairs * I * 4);
  const size_t o_out = off; off = align256(off + static_cast<size_t>(T) * H * 4);
  char* base = static_cast<char*>(g_scratch.get(off));
  if (base == nullptr) return 3;
  int* ids = reinterpret_cast<int*>(base + o_ids);
  float* wts = reinterpret_cast<float*>(base + o_w);
  int* counts = reinterpret_cast<int*>(base + o_counts);
  int* fill = counts + EL;
  int* offsets = reinterpret_cast<int*>(base + o_offsets);
  int* ptok = reinterpret_cast<int*>(base + o_ptok);
  float* pw = reinterpret_cast<float*>(base + o_pw);
  float* G = reinterpret_cast<float*>(base + o_G);
  float* inter = reinterpret_cast<float*>(base + o_inter);
  float* out = reinterpret_cast<float*>(base + o_out);

  cudaMemsetAsync(counts, 0, 2 * static_cast<size_t>(EL) * 4, s);
  cudaMemsetAsync(out, 0, static_cast<size_t>(T) * H * 4, s);
  route<<<(T + 127) / 128, 128, 0, s>>>(ptr<float>(logits), ptr<__nv_bfloat16>(bias), T, E, offset, EL, scaling, ids,
                                        wts, counts);
  scan_counts<<<1, 32, 0, s>>>(counts, EL, offsets);
  scatter<<<static_cast<unsigned>((pairs + 255) / 256), 256, 0, s>>>(ids, wts, T, offset, EL, offsets, fill, ptok, pw);
  // Few tokens -> few (expert, row tile) pairs: split K so that the grid still fills the GPU.
  const int splits1 = T <= 64 ? 8 : T <= 512 ? 4 : 1, splits2 = T <= 64 ? 4 : T <= 512 ? 2 : 1;
  cudaMemsetAsync(G, 0, pairs * 2 * I * 4, s);
  const dim3 threads(16, 16);
  gemm1_splitk<<<dim3(I / kTileN, (T + kTileM - 1) / kTileM, EL * splits1), threads, 0, s>>>(
      ptr<uint8_t>(hs), ptr<float>(hs_scale), ptr<uint8_t>(w1), ptr<float>(w1_scale), offsets, ptok, T, H, I, splits1, G);
  swiglu<<<static_cast<unsigned>((pairs * I + 255) / 256), 256, 0, s>>>(G, offsets, EL, I, inter);
  gemm2_accumulate<<<dim3(H / kTileN, (T + kTileM - 1) / kTileM, EL * splits2), threads, 0, s>>>(
      inter, ptr<uint8_t>(w2), ptr<float>(w2_scale), offsets, ptok, pw, H, I, splits2, out);
  const int64_t n = static_cast<int64_t>(T) * H;
  to_bf16<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(out, n, ptr<__nv_bfloat16>(output));
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
