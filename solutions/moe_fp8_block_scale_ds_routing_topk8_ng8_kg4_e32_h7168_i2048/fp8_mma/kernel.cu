// kda's DeepSeek-style FP8 block-scale MoE (moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048, kda
// ABI; spec contest-kernels.md 3.5). The pack's naive baseline with its two GEMMs on the FP8 tensor cores:
//   1-3. route (no-aux DeepSeek routing, one warp a token: the baseline's arithmetic, its serial maxima merged
//        across lanes; it also zeroes the token's output row), scatter (scans the counts itself, zeroes G's rows
//        for split-K): the (token, weight) pairs of each local expert, grouped, all on the device;
//   4. gemm_fp8<true>: G = A W13^T for each expert's pairs. A block takes 64 pairs (16 where T <= 64) x (64
//      columns of the first half and the same 64 of the second: what SwiGLU pairs), eight warps of 16 pairs; per
//      K block of 128 the A rows (gathered by token) and the 128 weight rows are staged by cp.async (3-4 stages),
//      and multiplied with mma.sync m16n8k32 e4m3 (fp32 accumulation); the K block's product is scaled by its
//      two block scales (the token's, the weight block's) and added. Split over K where T is small (partials
//      added atomically), stored directly where it is not;
//   5. swiglu_quant: C = silu(G[:, I:]) * G[:, :I], quantised to e4m3 per 128 values of a pair with a scale
//      (amax / 448), so that GEMM2 runs on the FP8 tensor cores too (the pack's tolerance is atol 1, rtol 0.3,
//      90 % of the elements);
//   6. gemm_fp8<false>: O = C W2^T, 64 (16) pairs x 128 columns a block, the same pipeline; the epilogue adds
//      w * O into an fp32 accumulator of the token (atomics: a token has up to 8 local experts);
//   7. fp32 -> bf16.
// Grids are sized by T pairs per expert (the host does not know the counts); blocks past an expert's count exit
// at once. Scratch buffers persist across calls (policy persistent_state = "scratch").
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>

#include <cstdint>

namespace {

constexpr int kBlock = 128, kTopK = 8, kGroups = 8, kTopKGroups = 4;
constexpr int kRowBytes = kBlock + 16;   // a staged row of one 128-wide K block, padded: 36 words, 4 banks apart
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

constexpr int kMaxLocalExperts = 1024;  // local experts the scratch's counters and scatter's scan hold
constexpr int kRouteWarps = 4;          // tokens a routing block takes, one warp each
constexpr int kMaxRouteExperts = 512;   // experts a routing warp keeps in shared memory (the definition has 256)

// The two largest of a multiset (b1 >= b2), updated with x as the pack's baseline does it serially.
__device__ __forceinline__ void top2_insert(float x, float& b1, float& b2) {
  if (x > b1) {
    b2 = b1;
    b1 = x;
  } else if (x > b2) {
    b2 = x;
  }
}

// The warp's best (value, index) over its lanes' candidates: the larger value, the lower index on a tie (as a
// serial scan in increasing index keeps the first maximum); index -1 where no lane has one. Every lane gets it.
__device__ __forceinline__ void warp_argmax(float& v, int& i) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const int oi = __shfl_xor_sync(0xFFFFFFFFu, i, off);
    const float ov = __shfl_xor_sync(0xFFFFFFFFu, v, off);
    if (oi >= 0 && (i < 0 || ov > v || (ov == v && oi < i))) v = ov, i = oi;
  }
}

// DeepSeek-V3 no-aux routing, one warp a token (the baseline's one thread a token took 347 us at T = 1 on an
// H100: 256 experts, eight selection rounds, all serial). The arithmetic is the baseline's, value for value:
// s = sigmoid(logit) and x = s + bias per expert (the same expressions), a group's score is the sum of its two
// largest x, the four best groups by score (ties: the lower group), then eight rounds of the largest x among their
// experts not yet chosen (ties: the lower expert), weights s / (sum of the eight s + 1e-20) * scaling summed in
// the chosen order. Lanes split the experts; the maxima are merged across lanes with shuffles.
// The loops stay rolled: at T = 1 one warp runs this once, right after the evaluator's L2 flush, so every
// instruction is fetched from memory once; the first version, unrolled, was 67 KB of code and took 16-17 us.
__global__ void __launch_bounds__(kRouteWarps * 32)
    route(const float* __restrict__ logits, const __nv_bfloat16* __restrict__ bias, int T, int E, int offset, int EL,
          float scaling, int* __restrict__ ids, float* __restrict__ weights, int* __restrict__ counts,
          float* __restrict__ out, int H) {
  __shared__ float xs_all[kRouteWarps][kMaxRouteExperts], ss_all[kRouteWarps][kMaxRouteExperts];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int t = blockIdx.x * kRouteWarps + warp;
  if (t >= T) return;  // warp-uniform
  // The token's fp32 output row, which GEMM2 adds into, starts at zero (instead of a memset launch).
  float4* out_row = reinterpret_cast<float4*>(out + static_cast<int64_t>(t) * H);
#pragma unroll 1
  for (int j = lane; j < H / 4; j += 32) out_row[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float* xs = xs_all[warp];
  float* ss = ss_all[warp];
  const float* l = logits + static_cast<int64_t>(t) * E;
#pragma unroll 1
  for (int e = lane; e < E; e += 32) {
    const float sg = 1.0f / (1.0f + expf(-l[e]));
    ss[e] = sg;
    xs[e] = sg + __bfloat162float(bias[e]);
  }
  __syncwarp();
  const int gs = E / kGroups;
  float my_score = -INFINITY;  // lane gi < kGroups: group gi's score
#pragma unroll 1
  for (int gi = 0; gi < kGroups; ++gi) {
    float b1 = -INFINITY, b2 = -INFINITY;
#pragma unroll 1
    for (int j = lane; j < gs; j += 32) top2_insert(xs[gi * gs + j], b1, b2);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {  // merge two lanes' top two: the top two of the four
      const float o1 = __shfl_xor_sync(0xFFFFFFFFu, b1, off), o2 = __shfl_xor_sync(0xFFFFFFFFu, b2, off);
      const float n2 = b1 >= o1 ? fmaxf(b2, o1) : fmaxf(b1, o2);
      b1 = fmaxf(b1, o1);
      b2 = n2;
    }
    if (lane == gi) my_score = b1 + b2;
  }
  unsigned keep = 0;
#pragma unroll 1
  for (int n = 0; n < kTopKGroups; ++n) {
    float v = my_score;
    int g = lane < kGroups && !(keep >> lane & 1u) ? lane : -1;
    warp_argmax(v, g);
    keep |= 1u << g;
  }
  // This lane's experts are e = lane + 32 j; bit j of cand: still a candidate (in a kept group, not yet chosen).
  unsigned cand = 0;
#pragma unroll 1
  for (int j = 0, e = lane; e < E; ++j, e += 32)
    if (keep >> (e / gs) & 1u) cand |= 1u << j;
  int my_id = -1;  // lane n < kTopK keeps round n's expert and its s
  float my_s = 0.0f, sum = 0.0f;
#pragma unroll 1
  for (int n = 0; n < kTopK; ++n) {
    int best = -1;
    float vb = -INFINITY;
#pragma unroll 1
    for (unsigned c = cand; c != 0; c &= c - 1) {  // this lane's candidates in increasing order, as the serial scan
      const int e = lane + 32 * (__ffs(c) - 1);
      if (best < 0 || xs[e] > vb) best = e, vb = xs[e];
    }
    warp_argmax(vb, best);
    if (best >= 0 && (best & 31) == lane) cand &= ~(1u << (best >> 5));
    const float s = best >= 0 ? ss[best] : 0.0f;
    sum += s;
    if (lane == n) my_id = best, my_s = s;
  }
  if (lane < kTopK) {
    ids[t * kTopK + lane] = my_id;
    weights[t * kTopK + lane] = my_s / (sum + 1e-20f) * scaling;
    const int le = my_id - offset;
    if (le >= 0 && le < EL) atomicAdd(&counts[le], 1);
  }
}

// The (token, weight) pairs grouped by local expert. Each block scans the experts' counts itself (warp 0, 32 at a
// time; what a separate one-thread scan_counts launch did) and block 0 publishes the offsets for the GEMMs. With
// zero_g (GEMM1 split over K adds its partials atomically) the blocks also zero G's rows of the pairs there are,
// instead of a memset of 8T rows.
__global__ void __launch_bounds__(256)
    scatter(const int* __restrict__ ids, const float* __restrict__ weights, int T, int offset, int EL,
            const int* __restrict__ counts, int* __restrict__ offsets, int* __restrict__ fill,
            int* __restrict__ pair_tok, float* __restrict__ pair_w, float* __restrict__ G, int two_i, bool zero_g) {
  __shared__ int off_s[kMaxLocalExperts + 1];
  const int tid = threadIdx.x, lane = tid & 31;
  if (tid < 32) {
    int carry = 0;
    for (int base = 0; base < EL; base += 32) {  // warp-uniform
      const int le = base + lane, c = le < EL ? counts[le] : 0;
      int incl = c;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int up = __shfl_up_sync(0xFFFFFFFFu, incl, o);
        if (lane >= o) incl += up;
      }
      if (le < EL) off_s[le] = carry + incl - c;
      carry += __shfl_sync(0xFFFFFFFFu, incl, 31);
    }
    if (lane == 0) off_s[EL] = carry;
  }
  __syncthreads();
  if (blockIdx.x == 0)
    for (int i = tid; i <= EL; i += blockDim.x) offsets[i] = off_s[i];
  const int idx = blockIdx.x * blockDim.x + tid;
  if (idx < T * kTopK) {
    const int le = ids[idx] - offset;
    if (le >= 0 && le < EL) {
      const int pos = off_s[le] + atomicAdd(&fill[le], 1);
      pair_tok[pos] = idx / kTopK;
      pair_w[pos] = weights[idx];
    }
  }
  if (zero_g) {
    const int64_t n4 = static_cast<int64_t>(off_s[EL]) * two_i / 4;
    float4* g4 = reinterpret_cast<float4*>(G);
    for (int64_t i = idx; i < n4; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
      g4[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

__device__ __forceinline__ uint32_t lds32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// 16 bytes from global to shared memory; `bytes` 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}

// D = A (16 x 32, row) * B (32 x 8, col) + D, e4m3 inputs, f32 accumulators.
__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

struct GemmArgs {
  const uint8_t* A;      // GEMM1: hidden_states [T, K]; GEMM2: the quantised C [pairs, K]
  const float* a_scale;  // GEMM1: hidden_states_scale [K / 128, T]; GEMM2: C's scales [pairs, K / 128]
  const uint8_t* B;      // weights [EL, N, K]
  const float* b_scale;  // [EL, N / 128, K / 128]
  const int* offsets;    // [EL + 1]: each expert's first pair
  const int* pair_tok;
  const float* pair_w;
  float* out;  // GEMM1: G [pairs, 2I]; GEMM2: the fp32 output [T, H]
  int T, K, N, I, splits;
  bool atomic;  // GEMM1 split over K: add the partials
};

// GEMM1 (kFirst): G[p, n] for kM pairs p of expert le and columns n0 .. n0 + 63 of both halves (n and I + n);
// GEMM2: out[tok_p, n] += w_p O[p, n] for columns n0 .. n0 + 127. blockIdx = (column tile, pair tile,
// le * splits + K slice); 256 threads (8 warps: kM / 16 along the pairs, the rest along the 128 columns),
// kStages * stage_bytes(kM) of dynamic shared memory: a cp.async pipeline of kStages K blocks (kStages - 1 in
// flight while one is multiplied). kM = 64 for many pairs; kM = 16 for a handful of tokens, where the weights'
// streaming is the work: a smaller A tile, fewer registers, two blocks an SM and four stages.
__host__ __device__ constexpr int stage_bytes(int m) {
  return (m + 128) * kRowBytes;
}  // A (m rows), B (128), one K block

template <bool kFirst, int kM, int kStages>
__global__ void __launch_bounds__(256, kM == 16 ? 2 : 1) gemm_fp8(GemmArgs a) {
  static_assert(kM == 16 || kM == 32 || kM == 64, "kM: 16, 32 or 64 pairs");
  static_assert(kStages >= 2, "kStages: at least two");
  constexpr int kWarpsM = kM / 16, kWarpsN = 8 / kWarpsM, kWarpCols = 128 / kWarpsN, kN8 = kWarpCols / 8;
  constexpr int kStage = stage_bytes(kM);
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int src_row[kM];  // GEMM1: the pair's token; GEMM2: the pair; -1 past the expert's count
  const int le = blockIdx.z / a.splits, slice = blockIdx.z % a.splits;
  const int begin = a.offsets[le], rows = a.offsets[le + 1] - begin;
  const int m0 = blockIdx.y * kM;
  if (m0 >= rows) return;  // uniform per block
  const int n0 = blockIdx.x * (kFirst ? 64 : 128);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  if (tid < kM) src_row[tid] = m0 + tid < rows ? (kFirst ? a.pair_tok[begin + m0 + tid] : begin + m0 + tid) : -1;
  __syncthreads();
  const int KB = a.K / kBlock, kb_begin = slice * KB / a.splits, kb_end = (slice + 1) * KB / a.splits;
  const uint8_t* B = a.B + static_cast<int64_t>(le) * a.N * a.K;
  auto column = [&](int c) { return kFirst ? (c < 64 ? n0 + c : a.I + n0 + c - 64) : n0 + c; };
  // Stage `stage` <- K block kb (nothing where kb is past the slice: an empty group keeps the count uniform).
  auto load = [&](int stage, int kb) {
    if (kb < kb_end) {
      uint8_t* As = smem + stage * kStage;
      uint8_t* Bs = As + kM * kRowBytes;
      for (int i = tid; i < kM * 8; i += 256) {
        const int r = i >> 3, ch = i & 7, s = src_row[r];
        const uint8_t* src = s < 0 ? a.A : a.A + static_cast<int64_t>(s) * a.K + kb * kBlock + ch * 16;
        cp_async16(As + r * kRowBytes + ch * 16, src, s < 0 ? 0 : 16);
      }
      for (int i = tid; i < 128 * 8; i += 256) {
        const int c = i >> 3, ch = i & 7;
        cp_async16(Bs + c * kRowBytes + ch * 16, B + static_cast<int64_t>(column(c)) * a.K + kb * kBlock + ch * 16, 16);
      }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };

  // rows 16 wr .. 16 wr + 15, columns kWarpCols wc .. kWarpCols (wc + 1) - 1 (one weight scale block: GEMM1's
  // warps split the 64 + 64 columns at the half, GEMM2's 128 columns are one block).
  const int wr = warp % kWarpsM, wc = warp / kWarpsM;
  const int r_lo = 16 * wr + g, r_hi = r_lo + 8;
  const bool busy = m0 + 16 * wr < rows;  // warp-uniform: the warp has a pair
  const int s_lo = src_row[r_lo], s_hi = src_row[r_hi];
  const float* b_scale = a.b_scale + (static_cast<int64_t>(le) * (a.N / kBlock) + column(kWarpCols * wc) / kBlock) * KB;
  float acc[kN8][4] = {};
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) load(s, kb_begin + s);
  for (int kb = kb_begin; kb < kb_end; ++kb) {
    const int i = kb - kb_begin, stage = i % kStages;
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2) : "memory");  // K block kb has landed
    __syncthreads();  // ... for every thread's copies; and every warp is done with the stage loaded next
    load((i + kStages - 1) % kStages, kb + kStages - 1);
    if (busy) {
      const uint8_t* As = smem + stage * kStage;
      const uint8_t* Bs = As + kM * kRowBytes;
      float part[kN8][4] = {};
#pragma unroll
      for (int ks = 0; ks < kBlock / 32; ++ks) {
        const int k0 = 32 * ks + 4 * t4;
        const uint32_t a0 = lds32(As + r_lo * kRowBytes + k0), a1 = lds32(As + r_hi * kRowBytes + k0),
                       a2 = lds32(As + r_lo * kRowBytes + k0 + 16), a3 = lds32(As + r_hi * kRowBytes + k0 + 16);
#pragma unroll
        for (int n = 0; n < kN8; ++n) {
          const uint8_t* bb = Bs + (kWarpCols * wc + 8 * n + g) * kRowBytes + k0;
          mma_e4m3(part[n], a0, a1, a2, a3, lds32(bb), lds32(bb + 16));
        }
      }
      // The K block's two scales: the row's (token or pair) and the weight block's.
      const float sb = b_scale[kb];
      float sa_lo = 0.0f, sa_hi = 0.0f;
      if (kFirst) {
        if (s_lo >= 0) sa_lo = a.a_scale[static_cast<int64_t>(kb) * a.T + s_lo];
        if (s_hi >= 0) sa_hi = a.a_scale[static_cast<int64_t>(kb) * a.T + s_hi];
      } else {
        if (s_lo >= 0) sa_lo = a.a_scale[static_cast<int64_t>(s_lo) * KB + kb];
        if (s_hi >= 0) sa_hi = a.a_scale[static_cast<int64_t>(s_hi) * KB + kb];
      }
      sa_lo *= sb, sa_hi *= sb;
#pragma unroll
      for (int n = 0; n < kN8; ++n) {
        acc[n][0] += part[n][0] * sa_lo, acc[n][1] += part[n][1] * sa_lo;
        acc[n][2] += part[n][2] * sa_hi, acc[n][3] += part[n][3] * sa_hi;
      }
    }
  }
  if (!busy) return;
#pragma unroll
  for (int n = 0; n < kN8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e < 2 ? r_lo : r_hi;
      if (m0 + r >= rows) continue;
      const int col = column(kWarpCols * wc + 8 * n + 2 * t4 + (e & 1));
      if (kFirst) {
        float* dst = a.out + static_cast<int64_t>(begin + m0 + r) * 2 * a.I + col;
        if (a.atomic)
          atomicAdd(dst, acc[n][e]);
        else
          *dst = acc[n][e];
      } else {
        const int p = begin + m0 + r;
        atomicAdd(a.out + static_cast<int64_t>(a.pair_tok[p]) * a.N + col, a.pair_w[p] * acc[n][e]);
      }
    }
}

// C[p, j] = silu(G[p, I + j]) * G[p, j], as e4m3 with one scale per 128 values (amax / 448). grid (at most
// 4096, I / 128), 128 threads; block x takes pairs x, x + gridDim.x, ... below the pair count (a grid sized
// for 8T pairs would launch 1.8 million blocks at T = 14107, nearly all of them empty).
__global__ void __launch_bounds__(128) swiglu_quant(const float* __restrict__ G, const int* __restrict__ offsets,
                                                    int EL, int I, uint8_t* __restrict__ cq, float* __restrict__ cs) {
  __shared__ float amax_s[4];
  const int64_t pairs = offsets[EL];
  const int j = blockIdx.y * kBlock + threadIdx.x;
  for (int64_t p = blockIdx.x; p < pairs; p += gridDim.x) {  // uniform per block
    const float up = G[p * 2 * I + j], x = G[p * 2 * I + I + j];
    const float v = x / (1.0f + expf(-x)) * up;
    float m = fabsf(v);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    if ((threadIdx.x & 31) == 0) amax_s[threadIdx.x >> 5] = m;
    __syncthreads();
    const float amax = fmaxf(fmaxf(amax_s[0], amax_s[1]), fmaxf(amax_s[2], amax_s[3]));
    __syncthreads();  // amax_s is rewritten by the next pair
    const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
    cq[p * I + j] = __nv_cvt_float_to_fp8(v / scale, __NV_SATFINITE, __NV_E4M3);
    if (threadIdx.x == 0) cs[p * (I / kBlock) + blockIdx.y] = scale;
  }
}

// The fp32 output as bf16; block 0 also sets the experts' counts and fill cursors back to zero for the next call
// (nothing after scatter reads them), in place of a memset launch.
__global__ void to_bf16(const float* __restrict__ x, int64_t n, __nv_bfloat16* __restrict__ y, int* __restrict__ reset,
                        int n_reset) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16_rn(x[i]);
  if (blockIdx.x == 0)
    for (int j = threadIdx.x; j < n_reset; j += blockDim.x) reset[j] = 0;
}

// Scratch that persists across calls; grown (never shrunk) when a call needs more.
struct Scratch {
  void* ptr = nullptr;
  size_t bytes = 0;
  // `zeroed` first bytes are set to zero (on `stream`) when the buffer is (re)allocated, and kept at zero by the
  // calls themselves after that.
  void* get(size_t need, size_t zeroed, cudaStream_t stream) {
    if (need > bytes) {
      cudaFree(ptr);  // implicit device sync: only when growing (first calls of a shape)
      ptr = nullptr;
      bytes = 0;
      if (cudaMalloc(&ptr, need) != cudaSuccess) return nullptr;
      if (cudaMemsetAsync(ptr, 0, zeroed, stream) != cudaSuccess) return nullptr;
      bytes = need;
    }
    return ptr;
  }
};
Scratch g_scratch;

size_t align256(size_t x) { return (x + 255) / 256 * 256; }

// The two GEMM configurations (gemm_fp8's kM, kStages) and the token count that picks the small one.
constexpr int kSmallT = 64, kSmallM = 16, kSmallStages = 4, kLargeM = 64, kLargeStages = 3;
constexpr int kSmallSmem = kSmallStages * stage_bytes(kSmallM), kLargeSmem = kLargeStages * stage_bytes(kLargeM);
bool g_configured = false;

}  // namespace

extern "C" int run(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs, void* stream) {
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
  if (E % kGroups != 0 || E > kMaxRouteExperts || w1.shape[1] != 2 * I || w1.shape[2] != H || w2.shape[1] != H ||
      H % kBlock != 0 || I % kBlock != 0 || EL > kMaxLocalExperts || hs_scale.shape[0] != H / kBlock ||
      hs_scale.shape[1] != T)
    return 2;
  const auto aligned = [](const DLTensor& t) { return reinterpret_cast<uintptr_t>(ptr<uint8_t>(t)) % 16 == 0; };
  if (!aligned(hs) || !aligned(w1) || !aligned(w2)) return 2;  // rows are staged with 16-byte copies
  const int offset = static_cast<int>(host_scalar(inputs[8]));
  const float scaling = static_cast<float>(host_scalar(inputs[9]));
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (T == 0) return 0;

  // Scratch layout: counts, fill [EL] first, at a place no shape moves (zero between calls: zeroed when allocated,
  // set back by to_bf16); ids, weights [T*8]; offsets [EL+1]; pair_tok, pair_w [T*8]; G [T*8, 2I] f32; C [T*8, I]
  // e4m3 and its scales [T*8, I/128]; out_f32 [T, H]. Up to 8 pairs a token may be local.
  const size_t pairs = static_cast<size_t>(T) * kTopK;
  size_t off = 0;
  const size_t o_counts = off;
  off = align256(off + 2 * static_cast<size_t>(kMaxLocalExperts) * 4);
  const size_t counts_bytes = off;
  const size_t o_ids = off;
  off = align256(off + pairs * 4);
  const size_t o_w = off;
  off = align256(off + pairs * 4);
  const size_t o_offsets = off;
  off = align256(off + (EL + 1) * 4);
  const size_t o_ptok = off;
  off = align256(off + pairs * 4);
  const size_t o_pw = off;
  off = align256(off + pairs * 4);
  const size_t o_G = off;
  off = align256(off + pairs * 2 * I * 4);
  const size_t o_cq = off;
  off = align256(off + pairs * I);
  const size_t o_cs = off;
  off = align256(off + pairs * (I / kBlock) * 4);
  const size_t o_out = off;
  off = align256(off + static_cast<size_t>(T) * H * 4);
  char* base = static_cast<char*>(g_scratch.get(off, counts_bytes, s));
  if (base == nullptr) return 3;
  if (!g_configured) {
    const auto allow = [](auto kernel, int bytes) {
      return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) == cudaSuccess;
    };
    if (!allow(gemm_fp8<true, kSmallM, kSmallStages>, kSmallSmem) ||
        !allow(gemm_fp8<false, kSmallM, kSmallStages>, kSmallSmem) ||
        !allow(gemm_fp8<true, kLargeM, kLargeStages>, kLargeSmem) ||
        !allow(gemm_fp8<false, kLargeM, kLargeStages>, kLargeSmem))
      return 3;
    g_configured = true;
  }
  int* ids = reinterpret_cast<int*>(base + o_ids);
  float* wts = reinterpret_cast<float*>(base + o_w);
  int* counts = reinterpret_cast<int*>(base + o_counts);
  int* fill = counts + EL;
  int* offsets = reinterpret_cast<int*>(base + o_offsets);
  int* ptok = reinterpret_cast<int*>(base + o_ptok);
  float* pw = reinterpret_cast<float*>(base + o_pw);
  float* G = reinterpret_cast<float*>(base + o_G);
  uint8_t* cq = reinterpret_cast<uint8_t*>(base + o_cq);
  float* cs = reinterpret_cast<float*>(base + o_cs);
  float* out = reinterpret_cast<float*>(base + o_out);

  // Six launches a call (route, scatter, GEMM1, swiglu_quant, GEMM2, to_bf16): the zeroing of the counts, the
  // output and G is done inside them (the first run's three memsets and scan_counts left the GPU idle 21-31 us a
  // call between launches on the H100).
  // Few tokens -> few (expert, pair tile) blocks: split K so that the grid still fills the GPU (the partials are
  // then added atomically into a zeroed G; without a split every element is stored once).
  const int splits1 = T <= 64 ? 8 : T <= 512 ? 4 : 1, splits2 = T <= 64 ? 4 : T <= 512 ? 2 : 1;
  route<<<(T + kRouteWarps - 1) / kRouteWarps, kRouteWarps * 32, 0, s>>>(
      ptr<float>(logits), ptr<__nv_bfloat16>(bias), T, E, offset, EL, scaling, ids, wts, counts, out, H);
  // Where scatter also zeroes G (up to 8T rows of 16 KB with skewed routing), at least 256 blocks share it.
  const unsigned pair_blocks = static_cast<unsigned>((pairs + 255) / 256);
  const unsigned scatter_blocks = splits1 > 1 && pair_blocks < 256 ? 256 : pair_blocks;
  scatter<<<scatter_blocks, 256, 0, s>>>(ids, wts, T, offset, EL, counts, offsets, fill, ptok, pw, G, 2 * I,
                                         splits1 > 1);
  // A handful of tokens (T <= kSmallT): 16-pair tiles, four stages, two blocks an SM (the weights' streaming);
  // more: 64-pair tiles, three stages.
  const bool small = T <= kSmallT;
  const int tile_m = small ? kSmallM : kLargeM;
  const unsigned tiles = static_cast<unsigned>((T + tile_m - 1) / tile_m);
  GemmArgs g1{ptr<uint8_t>(hs),
              ptr<float>(hs_scale),
              ptr<uint8_t>(w1),
              ptr<float>(w1_scale),
              offsets,
              ptok,
              pw,
              G,
              T,
              H,
              2 * I,
              I,
              splits1,
              splits1 > 1};
  const dim3 grid1(I / 64, tiles, EL * splits1);
  if (small)
    gemm_fp8<true, kSmallM, kSmallStages><<<grid1, 256, kSmallSmem, s>>>(g1);
  else
    gemm_fp8<true, kLargeM, kLargeStages><<<grid1, 256, kLargeSmem, s>>>(g1);
  swiglu_quant<<<dim3(static_cast<unsigned>(pairs < 4096 ? pairs : 4096), I / kBlock), 128, 0, s>>>(G, offsets, EL, I,
                                                                                                    cq, cs);
  GemmArgs g2{cq, cs, ptr<uint8_t>(w2), ptr<float>(w2_scale), offsets, ptok, pw, out, T, I, H, I, splits2, true};
  const dim3 grid2(H / 128, tiles, EL * splits2);
  if (small)
    gemm_fp8<false, kSmallM, kSmallStages><<<grid2, 256, kSmallSmem, s>>>(g2);
  else
    gemm_fp8<false, kLargeM, kLargeStages><<<grid2, 256, kLargeSmem, s>>>(g2);
  const int64_t n = static_cast<int64_t>(T) * H;
  to_bf16<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(out, n, ptr<__nv_bfloat16>(output), counts, 2 * EL);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
