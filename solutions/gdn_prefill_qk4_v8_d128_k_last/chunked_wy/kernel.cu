// kda's GDN prefill for the H200 (gdn_prefill_qk4_v8_d128_k_last): the gated delta rule over whole
// sequences, S_t = g_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = scale S_t^T q_t.
//
// Two paths, chosen by the total length (PATH, SHORT_T):
//
// * short: the exact recurrence, token by token. A warp owns 4 value rows of one (sequence, head), 8 lanes a
//   row (16 key columns each), so a dot product is 16 FMAs and 3 shuffles; a block stages 32 tokens' q, k,
//   v and gates in shared memory with one round trip.
//
// * chunked (WY / UT transform, chunks of C = 64 tokens, never across a sequence). With the cumulative log
//   decay c_t of the chunk (Gamma_t = exp c_t), A_ts = beta_t exp(c_t - c_s) k_t.k_s (s < t) and
//   T = (I + A)^-1, the chunk's pseudo-values are Delta = U - W S0 with W = T diag(beta Gamma) K and
//   U = T diag(beta) V, and
//       S_C = Gamma_C S0 + K^T diag(Gamma_C / Gamma) Delta
//       O   = scale (diag(Gamma) Q S0 + (M o Q K^T) Delta),   M_ts = exp(c_t - c_s) for s <= t.
//   Three kernels, all on bf16 tensor cores (mma.sync m16n8k16, fp32 accumulation):
//     wy_prepare   per (chunk, value head), in parallel: gates, K K^T, T by blocked substitution (fp32),
//                  W and U (bf16) and c_t into a workspace;
//     state_scan   per (sequence, value head, 16 value rows), the only sequential part: per chunk
//                  Delta^T = U^T - X W^T and X <- Gamma_C X + (Delta^T scaled) K, with X = S^T (the k-last
//                  state rows) in fp32 registers; it stores each chunk's starting state (bf16) for
//                  chunk_output, and the final state;
//     chunk_output per (chunk, value head), in parallel: Q K^T, Delta again from the stored state, O.
//   Value rows are independent, so the scan splits a head's 128 rows over 8 groups of 4 warps, each over its
//   16 rows' 128 key columns (one barrier-separated exchange per GEMM): a group a block for one sequence (64
//   blocks, the shortest chain a chunk), up to 4 a block for many sequences (they share each chunk's W and K).
//   PAIRS (a mask: 1 X, 2 W, 4 U, 8 Delta) makes those of the scan's operands bf16 pairs: the rounded value
//   and what its rounding left out, about 16 significant bits. A state that hardly decays keeps every
//   rounding of thousands of tokens, and bf16 alone put it 1-4 % off (the pack's decay_near_one stress).
//   Measured on an H100 (README): U and Delta are what the stresses need (W costs, X is free); the default 13
//   (X, U, Delta) passes them at +18 % time against PAIRS=0, which does not.
//
// The workspace (W, U, c per chunk and head, the chunk states) is allocated on the first call of a shape
// and kept; it depends on (total_seq_len, num_seqs) only.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>

#include <cstdint>

#ifndef PATH
#define PATH 0  // 0: by total length (SHORT_T), 1: always the recurrence, 2: always chunked
#endif
#ifndef SHORT_T
#define SHORT_T 64  // PATH 0: total_seq_len at or below this runs the recurrence
#endif
#ifndef STAGES
#define STAGES 3  // state_scan: chunks of W, K, U in flight (2 or 3)
#endif
#ifndef GROUPS
#define GROUPS 0  // state_scan: groups of 16 value rows a block (1, 2 or 4); 0: by the number of (sequence, head)s
#endif
#ifndef ORDER
#define ORDER 1  // block order: 1 a (sequence, head)'s scan slices together, a chunk's heads together; 2 as 1 with
                 // the scan's longest sequences first; 0 the first version's (sequences first in the scan, chunks
                 // first in the per-chunk kernels)
#endif
#ifndef ROLL
#define ROLL 0  // 1: keep the one-pass loops of wy_prepare and chunk_output rolled (less code to fetch after a cold L2)
#endif
#ifndef PAIRS
#define PAIRS 13  // which of the scan's bf16 operands are bf16 pairs (~16 significant bits): a mask of 1 X, 2 W, 4 U,
                 // 8 Delta (15: all four); 0: bf16 alone
#endif

namespace {

using bf16 = __nv_bfloat16;

// ROLL: the loops each block runs once (the GEMMs' k-steps, the substitution's block rows) kept rolled or short,
// against fully unrolled (0, the measured default). Every call starts after kda eval's L2 flush, so a short call
// fetches its code from memory: wy_prepare is 42.4 KiB unrolled and 34.2 KiB with ROLL=1, chunk_output 27.6 and
// about 24 (nvcc 13.0, no stack, no spills; knowledge/diagnosis/code-fetch.md). Not yet measured.
#if ROLL
#define ROLL_ONCE _Pragma("unroll 1")
#define ROLL_PARTLY _Pragma("unroll 4")
#define ROLL_OUTER _Pragma("unroll 1")
#else
#define ROLL_ONCE _Pragma("unroll")
#define ROLL_PARTLY _Pragma("unroll")
#define ROLL_OUTER
#endif
constexpr int D = 128;       // head size (K = V)
constexpr int C = 64;        // chunk length
constexpr int LDK = D + 8;   // shared row stride of 128-wide bf16 tiles (conflict-free ldmatrix)
constexpr int LDC = C + 8;   // shared row stride of 64-wide bf16 tiles
constexpr int LDA = C + 1;   // shared row stride of fp32 64 x 64 tiles
constexpr int LDU = 16;      // row stride of a U slice (16 values, unpadded: it is read a value at a time)
constexpr int kRowsPerScan = 16;  // value rows per state_scan block
static_assert(STAGES == 2 || STAGES == 3, "STAGES is 2 or 3");
static_assert(GROUPS == 0 || GROUPS == 1 || GROUPS == 2 || GROUPS == 4, "GROUPS is 0, 1, 2 or 4");
static_assert(ORDER >= 0 && ORDER <= 2, "ORDER is 0, 1 or 2");
constexpr bool kHeadsTogether = ORDER != 0;  // the per-chunk kernels' blocks: a chunk's value heads consecutive
static_assert(PAIRS >= 0 && PAIRS <= 15, "PAIRS is a mask of 1 (X), 2 (W), 4 (U) and 8 (Delta)");
constexpr bool kPairX = (PAIRS & 1) != 0, kPairW = (PAIRS & 2) != 0, kPairU = (PAIRS & 4) != 0,
               kPairD = (PAIRS & 8) != 0;

bool is(const DLTensor& t, uint8_t code, uint8_t bits, int ndim) {
  return t.dtype.code == code && t.dtype.bits == bits && t.dtype.lanes == 1 && t.ndim == ndim;
}

template <typename T>
T* ptr(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

struct Params {
  const bf16* q;
  const bf16* k;
  const bf16* v;
  const float* state;
  const float* A_log;
  const bf16* a;
  const float* dt_bias;
  const bf16* b;
  const int64_t* cu;
  float scale;
  bf16* output;
  float* new_state;
  int N, HQ, HV;
  // workspace, per (chunk, value head) ch = chunk * HV + h, in the padded layouts of state_scan's shared
  // stages, so that one bulk copy moves each
  bf16* W;    // [ch][C][LDK]
  bf16* U;    // [ch][D / 16][C][LDU]  16-row value slices
  float* G;   // [ch][C]   cumulative log decay in the chunk
  bf16* Kp;   // [chunk * HQ + i][C][LDK]  the chunk's K rows, zero past its end
  bf16* X;    // [ch][D][D] the state at the chunk's start, k-last (row = value channel)
  bf16* Wl;   // PAIRS: what W's rounding to bf16 left out, rounded in turn; W's layout
  bf16* Ul;   // PAIRS: the same for U; U's layout
};

// ---- primitives ------------------------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldsm4(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldsm4t(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two n-tiles (16 x 16 output) of one A operand: b[0], b[1] for the first, b[2], b[3] for the second.
__device__ __forceinline__ void mma2(float (&c)[2][4], const uint32_t (&a)[4], const uint32_t (&b)[4]) {
  mma(c[0], a, b[0], b[1]);
  mma(c[1], a, b[2], b[3]);
}

// A operand (16 x 16) at (row0, col0) of a row-major tile.
__device__ __forceinline__ void frag_a(uint32_t (&r)[4], const bf16* m, int ld, int row0, int col0, int lane) {
  ldsm4(r, m + (row0 + (lane & 15)) * ld + col0 + (lane >> 4) * 8);
}

// B operands of two n-tiles (n0 .. n0 + 15) for k0 .. k0 + 15 from an n-major tile (row = n, k contiguous):
// r[0], r[1] for the first tile, r[2], r[3] for the second.
__device__ __forceinline__ void frag_b_nmajor(uint32_t (&r)[4], const bf16* m, int ld, int n0, int k0, int lane) {
  ldsm4(r, m + (n0 + (lane & 7) + ((lane >> 4) << 3)) * ld + k0 + ((lane >> 3) & 1) * 8);
}

// The same from a k-major tile (row = k, n contiguous).
__device__ __forceinline__ void frag_b_kmajor(uint32_t (&r)[4], const bf16* m, int ld, int n0, int k0, int lane) {
  ldsm4t(r, m + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + n0 + (lane >> 4) * 8);
}

__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The second half of a bf16 pair: what `rounded` == pack2(lo, hi) left out of (lo, hi), rounded to bf16 in
// turn. The pair carries about 16 significant bits; a product of pairs is two or three bf16 mmas.
__device__ __forceinline__ uint32_t residual2(float lo, float hi, uint32_t rounded) {
  const float2 r = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&rounded));
  return pack2(lo - r.x, hi - r.y);
}

// 16 bytes global -> shared, zero-filled when !valid (rows past a chunk's end are never read).
__device__ __forceinline__ void cp16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Bulk copies (the TMA engine, no tensor map) completing on an mbarrier, for state_scan's stages.
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
}
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}
// Programmatic dependent launch: the next kernel may start its prologue now; wait for the previous one.
__device__ __forceinline__ void launch_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }
__device__ __forceinline__ void wait_for_previous() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

__device__ __forceinline__ void gates(const Params& p, int64_t t, int h, float& log_g, float& beta) {
  const float x = __bfloat162float(p.a[t * p.HV + h]) + p.dt_bias[h];
  const float sp = x > 20.0f ? x : log1pf(expf(x));  // softplus, threshold 20 as the reference
  log_g = -expf(p.A_log[h]) * sp;
  beta = 1.0f / (1.0f + expf(-__bfloat162float(p.b[t * p.HV + h])));
}

// The whole warp: chunk `chunk`'s sequence start and length (chunks of C tokens per sequence, numbered
// sequence after sequence); false past the last chunk. Empty sequences have no chunk.
__device__ bool locate_chunk(const int64_t* cu, int N, int64_t chunk, int64_t& t0, int& len) {
  const int lane = threadIdx.x & 31;
  int64_t base = 0;
  for (int n0 = 0; n0 < N; n0 += 32) {
    const int n = n0 + lane;
    int64_t start = 0, L = 0;
    if (n < N) {
      start = cu[n];
      L = cu[n + 1] - start;
      if (L < 0) L = 0;
    }
    const int64_t c = (L + C - 1) / C;
    int64_t incl = c;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int64_t y = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += y;
    }
    const int64_t first = base + incl - c;
    const unsigned hit = __ballot_sync(0xffffffffu, n < N && chunk >= first && chunk < first + c);
    if (hit != 0) {
      const int src = __ffs(hit) - 1;
      const int64_t f = __shfl_sync(0xffffffffu, first, src);
      const int64_t s = __shfl_sync(0xffffffffu, start, src);
      const int64_t l = __shfl_sync(0xffffffffu, L, src);
      t0 = s + (chunk - f) * C;
      len = static_cast<int>(l - (chunk - f) * C < C ? l - (chunk - f) * C : C);
      return true;
    }
    base += __shfl_sync(0xffffffffu, incl, 31);
  }
  return false;
}

// The whole warp: the number of chunks of sequences 0 .. n-1.
__device__ int64_t chunks_before(const int64_t* cu, int n) {
  const int lane = threadIdx.x & 31;
  int64_t sum = 0;
  for (int m = lane; m < n; m += 32) {
    int64_t L = cu[m + 1] - cu[m];
    if (L < 0) L = 0;
    sum += (L + C - 1) / C;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  return sum;
}

// ---- wy_prepare: per (chunk, value head) -----------------------------------------------------------

constexpr size_t kPrepSmem = 2 * C * LDK * sizeof(bf16) + 2 * C * LDA * sizeof(float) + 2 * C * sizeof(float) +
                             (kPairW || kPairU ? 4 : 2) * C * LDC * sizeof(bf16);

// T = (I + A)^-1 for strictly lower A (64 x 64 fp32 in `Am`), into `Tm`: the four 16 x 16 diagonal blocks by
// forward substitution (a thread per column), then block row by block row T_IJ = -T_II sum_K A_IK T_KJ.
// Writes the lower triangle and diagonal of Tm only. `Rm` is 3 x 256 floats of scratch.
__device__ void invert_unit_lower(const float* Am, float* Tm, float* Rm, int tid) {
  if (tid < 64) {
    const int base = (tid >> 4) * 16, j = tid & 15;
    float col[16];
#pragma unroll
    for (int t = 0; t < 16; ++t) {
      float acc = t == j ? 1.0f : 0.0f;
#pragma unroll
      for (int s = 0; s < t; ++s) acc -= Am[(base + t) * LDA + base + s] * col[s];
      col[t] = acc;
    }
#pragma unroll
    for (int t = 0; t < 16; ++t) Tm[(base + t) * LDA + base + j] = col[t];
  }
  __syncthreads();
  const int r = tid >> 4, c = tid & 15;
  ROLL_OUTER
  for (int I = 1; I < 4; ++I) {
    for (int J = 0; J < I; ++J) {
      float acc = 0.0f;
      for (int K = J; K < I; ++K)
ROLL_PARTLY
        for (int m = 0; m < 16; ++m) acc += Am[(16 * I + r) * LDA + 16 * K + m] * Tm[(16 * K + m) * LDA + 16 * J + c];
      Rm[J * 256 + r * 16 + c] = acc;
    }
    __syncthreads();
    for (int J = 0; J < I; ++J) {
      float acc = 0.0f;
ROLL_PARTLY
      for (int m = 0; m < 16; ++m) acc -= Tm[(16 * I + r) * LDA + 16 * I + m] * Rm[J * 256 + m * 16 + c];
      Tm[(16 * I + r) * LDA + 16 * J + c] = acc;
    }
    __syncthreads();
  }
}

__global__ void __launch_bounds__(256) wy_prepare(Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* Ks = reinterpret_cast<bf16*>(smem);    // [C][LDK]
  bf16* Vs = Ks + C * LDK;                     // [C][LDK]
  float* Am = reinterpret_cast<float*>(Vs + C * LDK);  // [C][LDA]
  float* Tm = Am + C * LDA;                    // [C][LDA]
  float* cg = Tm + C * LDA;                    // [C]
  float* bt = cg + C;                          // [C]
  bf16* Tw = reinterpret_cast<bf16*>(bt + C);  // [C][LDC]  T diag(beta Gamma)
  bf16* Tu = Tw + C * LDC;                     // [C][LDC]  T diag(beta)
  bf16* Twl = Tu + C * LDC;                    // [C][LDC]  PAIRS: Tw's second halves
  bf16* Tul = Twl + C * LDC;                   // [C][LDC]  PAIRS: Tu's second halves
  __shared__ int64_t s_t0;
  __shared__ int s_len;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int h = kHeadsTogether ? static_cast<int>(blockIdx.x % p.HV) : static_cast<int>(blockIdx.y);
  const int64_t chunk = kHeadsTogether ? blockIdx.x / p.HV : blockIdx.x;
  launch_dependents();  // state_scan's blocks may load their initial states meanwhile
  if (warp == 0) {
    int64_t t0 = -1;
    int len = 0;
    const bool found = locate_chunk(p.cu, p.N, chunk, t0, len);
    if (lane == 0) s_t0 = found ? t0 : -1, s_len = len;
  }
  __syncthreads();
  if (s_t0 < 0) return;
  const int64_t t0 = s_t0;
  const int len = s_len;
  const int i = h / (p.HV / p.HQ);
  const int64_t ch = chunk * p.HV + h;

  for (int x = tid; x < C * 16; x += 256) {
    const int t = x >> 4, c8 = (x & 15) * 8;
    const bool valid = t < len;
    const int64_t tt = valid ? t0 + t : 0;
    cp16(Ks + t * LDK + c8, p.k + (tt * p.HQ + i) * D + c8, valid);
    cp16(Vs + t * LDK + c8, p.v + (tt * p.HV + h) * D + c8, valid);
  }
  cp_commit();
  if (tid < C) {  // gates and the inclusive cumulative log decay, two warps
    float lg = 0.0f, beta = 0.0f;
    if (tid < len) gates(p, t0 + tid, h, lg, beta);
    float s = lg;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float y = __shfl_up_sync(0xffffffffu, s, o);
      if (lane >= o) s += y;
    }
    cg[tid] = s;
    bt[tid] = beta;
  }
  cp_wait<0>();
  __syncthreads();
  if (tid >= 32 && tid < 64) cg[tid] += cg[31];
  __syncthreads();

  // A = strictly lower beta_t exp(c_t - c_s) k_t . k_s: warp w rows 16 (w >> 1), columns 32 (w & 1) .. + 32.
  const int mt = warp >> 1, half = warp & 1, g = lane >> 2, tg = lane & 3;
  if (32 * half <= 16 * mt + 15) {
    float acc[4][4] = {};
ROLL_ONCE
    for (int ks = 0; ks < D / 16; ++ks) {
      uint32_t fa[4], fb[4];
      frag_a(fa, Ks, LDK, 16 * mt, 16 * ks, lane);
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        frag_b_nmajor(fb, Ks, LDK, 32 * half + 16 * jj, 16 * ks, lane);
        mma(acc[2 * jj], fa, fb[0], fb[1]);
        mma(acc[2 * jj + 1], fa, fb[2], fb[3]);
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = 16 * mt + g + (e >> 1) * 8, s = 32 * half + 8 * j + 2 * tg + (e & 1);
        Am[t * LDA + s] = s < t ? bt[t] * __expf(cg[t] - cg[s]) * acc[j][e] : 0.0f;
      }
  }
  __syncthreads();
  invert_unit_lower(Am, Tm, reinterpret_cast<float*>(Tw), tid);  // Tw is free until the inverse is done
  {  // Tw = T diag(beta Gamma), Tu = T diag(beta): this thread's column s is fixed
    const int s = tid & 63;
    const float fu = bt[s], fw = fu * __expf(cg[s]);
    for (int t = tid >> 6; t < C; t += 4) {
      const float tv = s <= t ? Tm[t * LDA + s] : 0.0f;
      const bf16 hw = __float2bfloat16_rn(tv * fw), hu = __float2bfloat16_rn(tv * fu);
      Tw[t * LDC + s] = hw;
      Tu[t * LDC + s] = hu;
      if constexpr (kPairW) Twl[t * LDC + s] = __float2bfloat16_rn(tv * fw - __bfloat162float(hw));
      if constexpr (kPairU) Tul[t * LDC + s] = __float2bfloat16_rn(tv * fu - __bfloat162float(hu));
    }
  }
  __syncthreads();

  // W = Tw K, U = Tu V (64 x 128): warp w rows 16 (w >> 1), columns 64 (w & 1) .. + 64. K and V are exact in
  // bf16, so with PAIRS a product is two mmas, Tw's halves in turn.
  float w[8][4] = {}, u[8][4] = {};
ROLL_ONCE
  for (int ks = 0; ks < C / 16; ++ks) {
    uint32_t fw[4], fu[4], fwl[4], ful[4], fb[4];
    frag_a(fw, Tw, LDC, 16 * mt, 16 * ks, lane);
    frag_a(fu, Tu, LDC, 16 * mt, 16 * ks, lane);
    if constexpr (kPairW) frag_a(fwl, Twl, LDC, 16 * mt, 16 * ks, lane);
    if constexpr (kPairU) frag_a(ful, Tul, LDC, 16 * mt, 16 * ks, lane);
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      frag_b_kmajor(fb, Ks, LDK, 64 * half + 16 * jj, 16 * ks, lane);
      mma(w[2 * jj], fw, fb[0], fb[1]);
      mma(w[2 * jj + 1], fw, fb[2], fb[3]);
      if constexpr (kPairW) {
        mma(w[2 * jj], fwl, fb[0], fb[1]);
        mma(w[2 * jj + 1], fwl, fb[2], fb[3]);
      }
      frag_b_kmajor(fb, Vs, LDK, 64 * half + 16 * jj, 16 * ks, lane);
      mma(u[2 * jj], fu, fb[0], fb[1]);
      mma(u[2 * jj + 1], fu, fb[2], fb[3]);
      if constexpr (kPairU) {
        mma(u[2 * jj], ful, fb[0], fb[1]);
        mma(u[2 * jj + 1], ful, fb[2], fb[3]);
      }
    }
  }
  bf16* Wg = p.W + ch * C * LDK;
  bf16* Ug = p.U + ch * C * D / 16 * LDU;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int col = 64 * half + 8 * j + 2 * tg, row = 16 * mt + g;
    const int64_t uo = (col / 16) * C * LDU + col % 16;
    const uint32_t w0 = pack2(w[j][0], w[j][1]), w1 = pack2(w[j][2], w[j][3]);
    const uint32_t u0 = pack2(u[j][0], u[j][1]), u1 = pack2(u[j][2], u[j][3]);
    *reinterpret_cast<uint32_t*>(Wg + row * LDK + col) = w0;
    *reinterpret_cast<uint32_t*>(Wg + (row + 8) * LDK + col) = w1;
    *reinterpret_cast<uint32_t*>(Ug + uo + row * LDU) = u0;
    *reinterpret_cast<uint32_t*>(Ug + uo + (row + 8) * LDU) = u1;
    if constexpr (kPairW) {
      bf16* Wl = p.Wl + ch * C * LDK;
      *reinterpret_cast<uint32_t*>(Wl + row * LDK + col) = residual2(w[j][0], w[j][1], w0);
      *reinterpret_cast<uint32_t*>(Wl + (row + 8) * LDK + col) = residual2(w[j][2], w[j][3], w1);
    }
    if constexpr (kPairU) {
      bf16* Ul = p.Ul + ch * C * D / 16 * LDU;
      *reinterpret_cast<uint32_t*>(Ul + uo + row * LDU) = residual2(u[j][0], u[j][1], u0);
      *reinterpret_cast<uint32_t*>(Ul + uo + (row + 8) * LDU) = residual2(u[j][2], u[j][3], u1);
    }
  }
  if (tid < C) p.G[ch * C + tid] = cg[tid];
  if (h % (p.HV / p.HQ) == 0) {  // one value head per q/k head keeps the padded K rows for state_scan
    uint4* dst = reinterpret_cast<uint4*>(p.Kp + (chunk * p.HQ + i) * C * LDK);
    for (int x = tid; x < C * LDK / 8; x += 256) dst[x] = reinterpret_cast<const uint4*>(Ks)[x];
  }
}


// ---- state_scan: per (sequence, value head, 16 kGroups value rows), chunk after chunk -------------------

// A block's chunk stage: W and K are the whole head's, shared by the block's kGroups groups of 16 value rows;
// U holds each group's 16-value slice (consecutive slices, consecutive in the workspace).
template <int kGroups>
struct ScanStage {
  bf16 w[C * LDK];  // W rows (token-major)
#if PAIRS & 2
  bf16 wl[C * LDK];  // their second halves
#endif
  bf16 k[C * LDK];            // K rows of the chunk (zero past its end)
  bf16 u[kGroups * C * LDU];  // U[t][r0 + 16 q .. r0 + 16 q + 15], group q after group q
#if PAIRS & 4
  bf16 ul[kGroups * C * LDU];  // their second halves
#endif
  float g[C];  // cumulative log decay
};
// Per group, X and the scaled Delta^T as A operands (each twice with PAIRS: the pair's halves).
constexpr size_t kScanGroupSmem = (kPairX || kPairD ? 2 : 1) * kRowsPerScan * (LDK + LDC) * sizeof(bf16);
template <int kGroups, int kStages>
constexpr size_t scan_smem() {
  return kStages * sizeof(ScanStage<kGroups>) + kGroups * kScanGroupSmem;
}

// One thread: a chunk's W rows, K rows, U slices and decays into a stage, four bulk copies (the workspace
// holds them in the stage's layout).
template <int kGroups>
__device__ __forceinline__ void scan_load(const Params& p, ScanStage<kGroups>& st, uint64_t* bar, int64_t chunk, int h,
                                          int i, int slice) {
  const int64_t ch = chunk * p.HV + h;
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the stage's earlier generic reads
  mbar_expect_tx(bar, sizeof(ScanStage<kGroups>));
  bulk_copy(st.w, p.W + ch * C * LDK, sizeof(st.w), bar);
  bulk_copy(st.k, p.Kp + (chunk * p.HQ + i) * C * LDK, sizeof(st.k), bar);
  bulk_copy(st.u, p.U + (ch * (D / 16) + slice) * C * LDU, sizeof(st.u), bar);
  bulk_copy(st.g, p.G + ch * C, sizeof(st.g), bar);
#if PAIRS & 2
  bulk_copy(st.wl, p.Wl + ch * C * LDK, sizeof(st.wl), bar);
#endif
#if PAIRS & 4
  bulk_copy(st.ul, p.Ul + (ch * (D / 16) + slice) * C * LDU, sizeof(st.ul), bar);
#endif
}

// The block's (sequence, value head, first 16-row slice) from its index. ORDER 1 numbers a (sequence, head)'s
// slices consecutively, so that the blocks reading the same chunks of W and K run together and share them in
// L2 (at T = 8192 the workspace is larger than L2, and every slice reads every chunk's W and K); ORDER 0 (the
// first version) numbers sequences first.
struct ScanBlock {
  int n, h, slice;
};
__device__ __forceinline__ ScanBlock scan_block(const Params& p, int slices) {
  const int b = blockIdx.x;
  if (ORDER == 0) return {b % p.N, (b / p.N) % p.HV, b / (p.N * p.HV)};
  return {b / (slices * p.HV), (b / slices) % p.HV, b % slices};
}

// ORDER 2, the whole block: the sequence of rank `slot` by length, longest first (ties by index), so that the
// longest chains start in the first wave and the short ones fill in behind them; `slot` itself past
// kRankedMax sequences.
constexpr int kRankedMax = 128;
__device__ int longest_first(const Params& p, int slot) {
  __shared__ int64_t len[kRankedMax];
  __shared__ int seq;
  if (p.N > kRankedMax) return slot;
  const int j = threadIdx.x;
  if (j < p.N) len[j] = p.cu[j + 1] - p.cu[j];
  __syncthreads();
  if (j < p.N) {
    int rank = 0;
    for (int k = 0; k < p.N; ++k) rank += len[k] > len[j] || (len[k] == len[j] && k < j);
    if (rank == slot) seq = j;
  }
  __syncthreads();
  return seq;
}

template <int kGroups, int kStages>
__global__ void __launch_bounds__(128 * kGroups) state_scan(Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  using Stage = ScanStage<kGroups>;
  Stage* stages = reinterpret_cast<Stage*>(smem);
  __shared__ int64_t s_first;
  __shared__ __align__(8) uint64_t bars[kStages];
  const int tid = threadIdx.x, lane = tid & 31, g = lane >> 2, tg = lane & 3;
  // Group q (warps 4 q .. 4 q + 3) owns value rows r0 .. r0 + 15; its warp w the key columns 32 w .. + 31.
  const int q = tid >> 7, warp = (tid >> 5) & 3;
  const ScanBlock blk = scan_block(p, D / kRowsPerScan / kGroups);
  const int n = ORDER == 2 ? longest_first(p, blk.n) : blk.n;
  const int h = blk.h, slice = blk.slice * kGroups, r0 = (slice + q) * kRowsPerScan;
  bf16* Xs = reinterpret_cast<bf16*>(stages + kStages) + q * (kScanGroupSmem / sizeof(bf16));  // [16][LDK] X (bf16)
  bf16* Ds = Xs + kRowsPerScan * LDK;  // [16][LDC]  scaled Delta^T, the A operand of D K
  bf16* Xl = Ds + kRowsPerScan * LDC;  // [16][LDK]  PAIRS: X's second halves
  bf16* Dl = Xl + kRowsPerScan * LDK;  // [16][LDC]  PAIRS: Delta^T's second halves
  launch_dependents();                 // chunk_output's blocks may stage their q and k meanwhile
  const int i = h / (p.HV / p.HQ);
  const int64_t start = p.cu[n];
  const int64_t L = p.cu[n + 1] - start;
  float* out_rows = p.new_state + ((static_cast<int64_t>(n) * p.HV + h) * D + r0) * D;
  if (L <= 0) {  // the reference's quirk: an empty sequence's new state is zero
    for (int x = tid & 127; x < kRowsPerScan * D / 4; x += 128)
      reinterpret_cast<float4*>(out_rows)[x] = make_float4(0.f, 0.f, 0.f, 0.f);
    return;
  }
  if (tid < 32) {
    const int64_t f = chunks_before(p.cu, n);
    if (lane == 0) {
      s_first = f;
      for (int b = 0; b < kStages; ++b) mbar_init(&bars[b], 1);
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
  }
  // X = S^T rows r0 .. r0 + 15 as mma accumulators: warp w holds key columns 32 w .. 32 w + 31.
  const float* in_rows = p.state + ((static_cast<int64_t>(n) * p.HV + h) * D + r0) * D;
  float x[4][4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int col = 32 * warp + 8 * j + 2 * tg;
    const float2 lo = *reinterpret_cast<const float2*>(in_rows + g * D + col);
    const float2 hi = *reinterpret_cast<const float2*>(in_rows + (g + 8) * D + col);
    x[j][0] = lo.x, x[j][1] = lo.y, x[j][2] = hi.x, x[j][3] = hi.y;
  }
  __syncthreads();
  const int64_t first = s_first;
  const int nch = static_cast<int>((L + C - 1) / C);
  wait_for_previous();  // wy_prepare's W, U and decays are complete and visible from here
  if (tid == 0)
#pragma unroll
    for (int c = 0; c < kStages - 1; ++c)
      if (c < nch) scan_load(p, stages[c], &bars[c], first + c, h, i, slice);
  for (int c = 0; c < nch; ++c) {
    const int64_t ch = (first + c) * p.HV + h;
    // The chunk's starting state: bf16 into shared (this group's A operand) and the workspace (chunk_output).
    bf16* Xg = p.X + ch * D * D + static_cast<int64_t>(r0) * D;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int col = 32 * warp + 8 * j + 2 * tg;
      const uint32_t lo = pack2(x[j][0], x[j][1]), hi = pack2(x[j][2], x[j][3]);
      *reinterpret_cast<uint32_t*>(Xs + g * LDK + col) = lo;
      *reinterpret_cast<uint32_t*>(Xs + (g + 8) * LDK + col) = hi;
      *reinterpret_cast<uint32_t*>(Xg + g * D + col) = lo;
      *reinterpret_cast<uint32_t*>(Xg + (g + 8) * D + col) = hi;
      if constexpr (kPairX) {
        *reinterpret_cast<uint32_t*>(Xl + g * LDK + col) = residual2(x[j][0], x[j][1], lo);
        *reinterpret_cast<uint32_t*>(Xl + (g + 8) * LDK + col) = residual2(x[j][2], x[j][3], hi);
      }
    }
    mbar_wait(&bars[c % kStages], (c / kStages) & 1);
    __syncthreads();
    if (tid == 0) {
      const int cn = c + kStages - 1;  // into the stage every warp finished with in chunk c - 1
      if (cn < nch) scan_load(p, stages[cn % kStages], &bars[cn % kStages], first + cn, h, i, slice);
    }
    const Stage& st = stages[c % kStages];
    const bf16* us = st.u + q * C * LDU;  // this group's U slice
#if PAIRS & 4
    const bf16* uls = st.ul + q * C * LDU;
#endif
    // Delta^T (16 x 64) = U^T - X W^T; warp w: tokens 16 w .. 16 w + 15. With PAIRS, X W^T is
    // Xh Wh^T + Xl Wh^T + Xh Wl^T (Xl Wl^T is below fp32's rounding of the sum).
    float d[2][4] = {}, d_odd[2][4] = {};    // even and odd k-steps: two chains of 4, not one of 8
    float dl[2][4] = {}, dl_odd[2][4] = {};  // PAIRS: the cross terms, two more chains
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      uint32_t fa[4], fb[4];
      frag_a(fa, Xs, LDK, 0, 16 * ks, lane);
      frag_b_nmajor(fb, st.w, LDK, 16 * warp, 16 * ks, lane);
      mma2(ks & 1 ? d_odd : d, fa, fb);
#if PAIRS & 1
      uint32_t fal[4];
      frag_a(fal, Xl, LDK, 0, 16 * ks, lane);
      mma2(ks & 1 ? dl_odd : dl, fal, fb);
#endif
#if PAIRS & 2
      uint32_t fbl[4];
      frag_b_nmajor(fbl, st.wl, LDK, 16 * warp, 16 * ks, lane);
      mma2(ks & 1 ? dl_odd : dl, fa, fbl);
#endif
    }
#pragma unroll
    for (int jj = 0; jj < 2; ++jj)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        d[jj][e] += kPairX || kPairW ? d_odd[jj][e] + (dl[jj][e] + dl_odd[jj][e]) : d_odd[jj][e];
    const float cC = st.g[C - 1];
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      const int tok = 16 * warp + 8 * jj + 2 * tg;
      float f[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) f[e] = __expf(cC - st.g[tok + e]);
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float u0 = __bfloat162float(us[(tok + e) * LDU + g]), u1 = __bfloat162float(us[(tok + e) * LDU + g + 8]);
#if PAIRS & 4
        u0 += __bfloat162float(uls[(tok + e) * LDU + g]);
        u1 += __bfloat162float(uls[(tok + e) * LDU + g + 8]);
#endif
        d[jj][e] = (u0 - d[jj][e]) * f[e];
        d[jj][2 + e] = (u1 - d[jj][2 + e]) * f[e];
      }
      const uint32_t dlo = pack2(d[jj][0], d[jj][1]), dhi = pack2(d[jj][2], d[jj][3]);
      *reinterpret_cast<uint32_t*>(Ds + g * LDC + tok) = dlo;
      *reinterpret_cast<uint32_t*>(Ds + (g + 8) * LDC + tok) = dhi;
      if constexpr (kPairD) {
        *reinterpret_cast<uint32_t*>(Dl + g * LDC + tok) = residual2(d[jj][0], d[jj][1], dlo);
        *reinterpret_cast<uint32_t*>(Dl + (g + 8) * LDC + tok) = residual2(d[jj][2], d[jj][3], dhi);
      }
    }
    __syncthreads();
    // X <- Gamma_C X + Delta^T K; warp w: key columns 32 w .. 32 w + 31.
    const float gC = __expf(cC);
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) x[j][e] *= gC;
    float hi[4][4] = {};  // k-steps 0-1 into x, 2-3 into hi: two chains of 2
    float xl[4][4] = {};  // PAIRS: Delta's second halves times K (K is exact in bf16), a third chain
#pragma unroll
    for (int ks = 0; ks < C / 16; ++ks) {
      uint32_t fa[4], fb[4];
      frag_a(fa, Ds, LDC, 0, 16 * ks, lane);
#if PAIRS & 8
      uint32_t fl[4];
      frag_a(fl, Dl, LDC, 0, 16 * ks, lane);
#endif
      float(&acc)[4][4] = ks < 2 ? x : hi;
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        frag_b_kmajor(fb, st.k, LDK, 32 * warp + 16 * jj, 16 * ks, lane);
        mma(acc[2 * jj], fa, fb[0], fb[1]);
        mma(acc[2 * jj + 1], fa, fb[2], fb[3]);
#if PAIRS & 8
        mma(xl[2 * jj], fl, fb[0], fb[1]);
        mma(xl[2 * jj + 1], fl, fb[2], fb[3]);
#endif
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) x[j][e] += kPairD ? hi[j][e] + xl[j][e] : hi[j][e];
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int col = 32 * warp + 8 * j + 2 * tg;
    *reinterpret_cast<float2*>(out_rows + g * D + col) = make_float2(x[j][0], x[j][1]);
    *reinterpret_cast<float2*>(out_rows + (g + 8) * D + col) = make_float2(x[j][2], x[j][3]);
  }
}

// The scan's variants: kGroups groups of 16 value rows a block share each chunk's W and K (fewer copies of
// them, more warps an SM where many sequences fill the GPU); four groups fit shared memory with two stages.
struct ScanVariant {
  void (*kernel)(Params);
  int groups;
  size_t smem;
};
constexpr ScanVariant kScanVariants[] = {
    {state_scan<1, STAGES>, 1, scan_smem<1, STAGES>()},
    {state_scan<2, STAGES>, 2, scan_smem<2, STAGES>()},
    {state_scan<4, 2>, 4, scan_smem<4, 2>()},
};

// ---- chunk_output: per (chunk, value head) -----------------------------------------------------------

constexpr size_t kOutSmem = 3 * C * LDK * sizeof(bf16) + D * LDK * sizeof(bf16) + C * LDC * sizeof(bf16) +
                            C * sizeof(float);

__global__ void __launch_bounds__(256) chunk_output(Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem);  // [C][LDK]
  bf16* Ks = Qs + C * LDK;                   // [C][LDK]; Delta (bf16, [token][value]) once Q K^T is done
  bf16* Ws = Ks + C * LDK;                   // [C][LDK]
  bf16* Xs = Ws + C * LDK;                   // [D][LDK]  the chunk's starting state, row = value channel
  bf16* Ms = Xs + D * LDK;                   // [C][LDC]  scale exp(c_t - c_s) q_t . k_s for s <= t
  float* Gs = reinterpret_cast<float*>(Ms + C * LDC);
  __shared__ int64_t s_t0;
  __shared__ int s_len;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tg = lane & 3;
  const int h = kHeadsTogether ? static_cast<int>(blockIdx.x % p.HV) : static_cast<int>(blockIdx.y);
  const int64_t chunk = kHeadsTogether ? blockIdx.x / p.HV : blockIdx.x;
  if (warp == 0) {
    int64_t t0 = -1;
    int len = 0;
    const bool found = locate_chunk(p.cu, p.N, chunk, t0, len);
    if (lane == 0) s_t0 = found ? t0 : -1, s_len = len;
  }
  __syncthreads();
  if (s_t0 < 0) return;
  const int64_t t0 = s_t0;
  const int len = s_len;
  const int i = h / (p.HV / p.HQ);
  const int64_t ch = chunk * p.HV + h;
  const bf16* Wg = p.W + ch * C * LDK;
  const bf16* Xg = p.X + ch * D * D;
  for (int x = tid; x < C * 16; x += 256) {
    const int t = x >> 4, c8 = (x & 15) * 8;
    const bool valid = t < len;
    const int64_t tt = valid ? t0 + t : 0;
    cp16(Qs + t * LDK + c8, p.q + (tt * p.HQ + i) * D + c8, valid);
    cp16(Ks + t * LDK + c8, p.k + (tt * p.HQ + i) * D + c8, valid);
  }
  cp_commit();
  wait_for_previous();  // state_scan's chunk states (and so wy_prepare's W, U, decays) are complete
  for (int x = tid; x < C * 16; x += 256) cp16(Ws + (x >> 4) * LDK + (x & 15) * 8, Wg + (x >> 4) * LDK + (x & 15) * 8, true);
  for (int x = tid; x < D * 16; x += 256) cp16(Xs + (x >> 4) * LDK + (x & 15) * 8, Xg + (x >> 4) * D + (x & 15) * 8, true);
  if (tid < C / 4) cp16(Gs + tid * 4, p.G + ch * C + tid * 4, true);
  cp_commit();
  cp_wait<0>();
  __syncthreads();

  const int mt = warp >> 1, half = warp & 1;
  const int row = 16 * mt + g;  // this thread's token rows: row, row + 8
  // Q K^T for columns 32 half .. + 32 (tokens s), masked and decayed.
  float qk[4][4] = {};
  const bool any = 32 * half <= 16 * mt + 15;
  if (any) {
ROLL_ONCE
    for (int ks = 0; ks < D / 16; ++ks) {
      uint32_t fa[4], fb[4];
      frag_a(fa, Qs, LDK, 16 * mt, 16 * ks, lane);
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        frag_b_nmajor(fb, Ks, LDK, 32 * half + 16 * jj, 16 * ks, lane);
        mma(qk[2 * jj], fa, fb[0], fb[1]);
        mma(qk[2 * jj + 1], fa, fb[2], fb[3]);
      }
    }
  }
  // Delta = U - W X^T and P = Q X^T, both [token][value], value columns 64 half .. + 64.
  float dl[8][4] = {}, o[8][4] = {};
ROLL_ONCE
  for (int ks = 0; ks < D / 16; ++ks) {
    uint32_t fw[4], fq[4], fb[4];
    frag_a(fw, Ws, LDK, 16 * mt, 16 * ks, lane);
    frag_a(fq, Qs, LDK, 16 * mt, 16 * ks, lane);
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      frag_b_nmajor(fb, Xs, LDK, 64 * half + 16 * jj, 16 * ks, lane);
      mma(dl[2 * jj], fw, fb[0], fb[1]);
      mma(dl[2 * jj + 1], fw, fb[2], fb[3]);
      mma(o[2 * jj], fq, fb[0], fb[1]);
      mma(o[2 * jj + 1], fq, fb[2], fb[3]);
    }
  }
  __syncthreads();  // every warp is done with Ks: Delta goes there
  const bf16* Ug = p.U + ch * C * D / 16 * LDU;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int col = 64 * half + 8 * j + 2 * tg;
    const bf16* us = Ug + (col / 16) * C * LDU + col % 16;
    const float2 u0 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(us + row * LDU));
    const float2 u1 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(us + (row + 8) * LDU));
    *reinterpret_cast<uint32_t*>(Ks + row * LDK + col) = pack2(u0.x - dl[j][0], u0.y - dl[j][1]);
    *reinterpret_cast<uint32_t*>(Ks + (row + 8) * LDK + col) = pack2(u1.x - dl[j][2], u1.y - dl[j][3]);
  }
  const float c_lo = Gs[row], c_hi = Gs[row + 8];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int s = 32 * half + 8 * j + 2 * tg;
    float m[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int t = row + (e >> 1) * 8, ss = s + (e & 1);
      m[e] = ss <= t ? p.scale * __expf((e >> 1 ? c_hi : c_lo) - Gs[ss]) * qk[j][e] : 0.0f;
    }
    *reinterpret_cast<uint32_t*>(Ms + row * LDC + s) = pack2(m[0], m[1]);
    *reinterpret_cast<uint32_t*>(Ms + (row + 8) * LDC + s) = pack2(m[2], m[3]);
  }
  __syncthreads();
  // O = scale exp(c_t) P + M Delta.
  const float f_lo = p.scale * __expf(c_lo), f_hi = p.scale * __expf(c_hi);
#pragma unroll
  for (int j = 0; j < 8; ++j) o[j][0] *= f_lo, o[j][1] *= f_lo, o[j][2] *= f_hi, o[j][3] *= f_hi;
ROLL_ONCE
  for (int ks = 0; ks < C / 16; ++ks) {
    uint32_t fa[4], fb[4];
    frag_a(fa, Ms, LDC, 16 * mt, 16 * ks, lane);
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      frag_b_kmajor(fb, Ks, LDK, 64 * half + 16 * jj, 16 * ks, lane);
      mma(o[2 * jj], fa, fb[0], fb[1]);
      mma(o[2 * jj + 1], fa, fb[2], fb[3]);
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int col = 64 * half + 8 * j + 2 * tg;
    if (row < len) *reinterpret_cast<uint32_t*>(p.output + ((t0 + row) * p.HV + h) * D + col) = pack2(o[j][0], o[j][1]);
    if (row + 8 < len)
      *reinterpret_cast<uint32_t*>(p.output + ((t0 + row + 8) * p.HV + h) * D + col) = pack2(o[j][2], o[j][3]);
  }
}

// ---- short_scan: the exact recurrence, for short inputs ------------------------------------------------

constexpr int kTile = 32;  // tokens staged per round trip

// A lane's 16 key columns: the float4s (lane & 7) + 8 m, m = 0..3, so that the 8 lanes of a row read 128
// contiguous bytes of q and k (no bank conflicts) and of the state rows.
__global__ void __launch_bounds__(128) short_scan(Params p) {
  __shared__ __align__(16) float qs[kTile][D];  // fp32: converted once when staged, not per row and token
  __shared__ __align__(16) float ks[kTile][D];
  __shared__ float vs[kTile][kRowsPerScan];
  __shared__ float gs[kTile], bs[kTile];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int n = blockIdx.x, h = blockIdx.y, r0 = blockIdx.z * kRowsPerScan;
  const int rr = warp * 4 + (lane >> 3), c0 = lane & 7;  // this lane: row r0 + rr, float4s c0 + 8 m
  const int i = h / (p.HV / p.HQ);
  const int64_t start = p.cu[n];
  const int64_t L = p.cu[n + 1] - start;
  float4* out_row = reinterpret_cast<float4*>(p.new_state + ((static_cast<int64_t>(n) * p.HV + h) * D + r0 + rr) * D);
  float x[16];
  if (L <= 0) {
#pragma unroll
    for (int m = 0; m < 4; ++m) out_row[c0 + 8 * m] = make_float4(0.f, 0.f, 0.f, 0.f);
    return;
  }
  const float4* in_row = reinterpret_cast<const float4*>(p.state + ((static_cast<int64_t>(n) * p.HV + h) * D + r0 + rr) * D);
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const float4 f = in_row[c0 + 8 * m];
    x[4 * m] = f.x, x[4 * m + 1] = f.y, x[4 * m + 2] = f.z, x[4 * m + 3] = f.w;
  }
  for (int64_t base = 0; base < L; base += kTile) {
    const int len = static_cast<int>(L - base < kTile ? L - base : kTile);
    __syncthreads();
    for (int e = tid; e < len * 16; e += 128) {
      const int t = e >> 4, c8 = (e & 15) * 8;
      const int64_t tt = start + base + t;
      const uint4 qr = *reinterpret_cast<const uint4*>(p.q + (tt * p.HQ + i) * D + c8);
      const uint4 kr = *reinterpret_cast<const uint4*>(p.k + (tt * p.HQ + i) * D + c8);
      const auto f2 = [](uint32_t w) { return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w)); };
      const float2 q0 = f2(qr.x), q1 = f2(qr.y), q2 = f2(qr.z), q3 = f2(qr.w);
      const float2 k0 = f2(kr.x), k1 = f2(kr.y), k2 = f2(kr.z), k3 = f2(kr.w);
      float4* qd = reinterpret_cast<float4*>(&qs[t][c8]);
      float4* kd = reinterpret_cast<float4*>(&ks[t][c8]);
      qd[0] = make_float4(q0.x, q0.y, q1.x, q1.y), qd[1] = make_float4(q2.x, q2.y, q3.x, q3.y);
      kd[0] = make_float4(k0.x, k0.y, k1.x, k1.y), kd[1] = make_float4(k2.x, k2.y, k3.x, k3.y);
    }
    for (int e = tid; e < len * kRowsPerScan; e += 128) {
      const int t = e / kRowsPerScan, r = e % kRowsPerScan;
      vs[t][r] = __bfloat162float(p.v[((start + base + t) * p.HV + h) * D + r0 + r]);
    }
    if (tid < len) {
      float lg, beta;
      gates(p, start + base + tid, h, lg, beta);
      gs[tid] = __expf(lg);
      bs[tid] = beta;
    }
    __syncthreads();
    // Unrolled by two: one token's output reduction overlaps the next token's update.
#pragma unroll 2
    for (int t = 0; t < len; ++t) {
      float kk[16], qq[16];
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const float4 kf = reinterpret_cast<const float4*>(ks[t])[c0 + 8 * m];
        const float4 qf = reinterpret_cast<const float4*>(qs[t])[c0 + 8 * m];
        kk[4 * m] = kf.x, kk[4 * m + 1] = kf.y, kk[4 * m + 2] = kf.z, kk[4 * m + 3] = kf.w;
        qq[4 * m] = qf.x, qq[4 * m + 1] = qf.y, qq[4 * m + 2] = qf.z, qq[4 * m + 3] = qf.w;
      }
      const float gt = gs[t], bt = bs[t], vt = vs[t][rr];
      float part[4] = {};
#pragma unroll
      for (int e = 0; e < 16; ++e) {
        x[e] *= gt;
        part[e & 3] += kk[e] * x[e];
      }
      float u = (part[0] + part[1]) + (part[2] + part[3]);
      u += __shfl_xor_sync(0xffffffffu, u, 1);
      u += __shfl_xor_sync(0xffffffffu, u, 2);
      u += __shfl_xor_sync(0xffffffffu, u, 4);
      const float delta = bt * (vt - u);
      float op[4] = {};
#pragma unroll
      for (int e = 0; e < 16; ++e) {
        x[e] += delta * kk[e];
        op[e & 3] += qq[e] * x[e];
      }
      float o = (op[0] + op[1]) + (op[2] + op[3]);
      o += __shfl_xor_sync(0xffffffffu, o, 1);
      o += __shfl_xor_sync(0xffffffffu, o, 2);
      o += __shfl_xor_sync(0xffffffffu, o, 4);
      if (c0 == 0) p.output[((start + base + t) * p.HV + h) * D + r0 + rr] = __float2bfloat16_rn(p.scale * o);
    }
  }
#pragma unroll
  for (int m = 0; m < 4; ++m)
    out_row[c0 + 8 * m] = make_float4(x[4 * m], x[4 * m + 1], x[4 * m + 2], x[4 * m + 3]);
}

// ---- the workspace and the entry point --------------------------------------------------------------------

struct Workspace {
  void* base = nullptr;
  size_t bytes = 0;
};
Workspace g_ws;

bool reserve(size_t bytes) {
  if (bytes <= g_ws.bytes) return true;
  if (g_ws.base != nullptr) cudaFree(g_ws.base);
  g_ws = {};
  if (cudaMalloc(&g_ws.base, bytes) != cudaSuccess) return false;
  g_ws.bytes = bytes;
  return true;
}

bool configured = false;
int num_sms = 0;

cudaError_t configure() {
  if (configured) return cudaSuccess;
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(wy_prepare, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kPrepSmem));
  for (const ScanVariant& v : kScanVariants)
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(v.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(v.smem));
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(chunk_output, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kOutSmem));
  configured = e == cudaSuccess;
  return e;
}

// GROUPS, or else the fewest groups a block whose blocks fit one wave (one block an SM: with three stages every
// variant needs over half an SM's shared memory), four where none does: one sequence's 64 row slices keep a block each
// (the shortest chain a chunk), many sequences share each chunk's W and K four ways.
const ScanVariant& scan_variant(int64_t slices) {
  for (const ScanVariant& v : kScanVariants)
    if (GROUPS == 0 ? slices / v.groups <= num_sms : v.groups == GROUPS) return v;
  return kScanVariants[2];
}

// A launch that may begin while the previous kernel on the stream runs (programmatic dependent launch):
// the kernel waits for it (griddepcontrol.wait) before reading what it wrote.
cudaError_t launch_after(void (*kernel)(Params), dim3 grid, int threads, size_t smem, cudaStream_t s, const Params& p) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, p);
}

bool use_short(int64_t T) {
  if (PATH == 1) return true;
  if (PATH == 2) return false;
  return T <= SHORT_T;
}

}  // namespace

extern "C" int run(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs,
                   void* stream) {
  if (num_inputs != 10 || num_outputs != 2) return 1;
  const DLTensor &q = inputs[0], &k = inputs[1], &v = inputs[2], &state = inputs[3], &A_log = inputs[4],
                 &a = inputs[5], &dt_bias = inputs[6], &b = inputs[7], &cu = inputs[8], &scale_t = inputs[9];
  DLTensor &output = outputs[0], &new_state = outputs[1];
  if (!is(q, kDLBfloat, 16, 3) || !is(k, kDLBfloat, 16, 3) || !is(v, kDLBfloat, 16, 3) ||
      !is(state, kDLFloat, 32, 4) || !is(A_log, kDLFloat, 32, 1) || !is(a, kDLBfloat, 16, 2) ||
      !is(dt_bias, kDLFloat, 32, 1) || !is(b, kDLBfloat, 16, 2) || !is(cu, kDLInt, 64, 1) ||
      !is(output, kDLBfloat, 16, 3) || !is(new_state, kDLFloat, 32, 4) || !is(scale_t, kDLFloat, 32, 0))
    return 2;
  const int64_t T = q.shape[0], N = cu.shape[0] - 1;
  const int HQ = static_cast<int>(q.shape[1]), HV = static_cast<int>(v.shape[1]);
  if (N < 0 || N > (1 << 30) || HQ <= 0 || HV % HQ != 0 || q.shape[2] != D || k.shape[2] != D || v.shape[2] != D ||
      state.shape[0] != N || state.shape[2] != D || state.shape[3] != D)
    return 3;
  Params p{ptr<bf16>(q), ptr<bf16>(k), ptr<bf16>(v), ptr<float>(state), ptr<float>(A_log), ptr<bf16>(a),
           ptr<float>(dt_bias), ptr<bf16>(b), ptr<int64_t>(cu), *ptr<float>(scale_t),  // a host scalar
           ptr<bf16>(output), ptr<float>(new_state), static_cast<int>(N), HQ, HV,
           nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  if (p.scale == 0.0f) p.scale = 0.08838834764831843f;  // 1 / sqrt(128)
  const auto misaligned = [](const void* x) { return reinterpret_cast<uintptr_t>(x) % 16 != 0; };
  if (misaligned(p.q) || misaligned(p.k) || misaligned(p.v) || misaligned(p.state) || misaligned(p.new_state) ||
      misaligned(p.output))
    return 4;
  if (N == 0) return 0;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const dim3 rows(static_cast<unsigned>(N), static_cast<unsigned>(HV), D / kRowsPerScan);
  if (use_short(T)) {
    short_scan<<<rows, 128, 0, s>>>(p);
    return cudaGetLastError() == cudaSuccess ? 0 : 5;
  }
  if (configure() != cudaSuccess) return 5;
  // At most T / C + N chunks: every sequence has ceil(len / C) <= len / C + 1.
  const int64_t chunks = T / C + N, slices = N * HV * (D / kRowsPerScan);  // the scan's 16-row slices
  // Every kernel's blocks in one grid dimension.
  if (chunks * HV > INT32_MAX || slices > INT32_MAX) return 3;
  const int64_t per = static_cast<int64_t>(HV) * chunks;
  const size_t w_elems = static_cast<size_t>(per) * C * LDK, u_elems = static_cast<size_t>(per) * D / 16 * C * LDU,
               k_elems = static_cast<size_t>(chunks) * HQ * C * LDK, x_elems = static_cast<size_t>(per) * D * D;
  const size_t wl_elems = kPairW ? w_elems : 0, ul_elems = kPairU ? u_elems : 0;  // the second halves
  const size_t bytes = (w_elems + u_elems + wl_elems + ul_elems + k_elems + x_elems) * sizeof(bf16) +
                       static_cast<size_t>(per) * C * sizeof(float);
  if (!reserve(bytes)) return 6;
  p.W = static_cast<bf16*>(g_ws.base);  // every part a multiple of 16 bytes
  p.U = p.W + w_elems;
  p.Wl = kPairW ? p.U + u_elems : nullptr;
  p.Ul = kPairU ? p.U + u_elems + wl_elems : nullptr;
  p.Kp = p.U + u_elems + wl_elems + ul_elems;
  p.X = p.Kp + k_elems;
  p.G = reinterpret_cast<float*>(p.X + x_elems);
  // ORDER 1 and 2: a chunk's value heads together (the two of a q/k head read the same K, and Q).
  const dim3 per_chunk = kHeadsTogether ? dim3(static_cast<unsigned>(chunks * HV))
                                        : dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(HV));
  wy_prepare<<<per_chunk, 256, kPrepSmem, s>>>(p);
  if (cudaGetLastError() != cudaSuccess) return 5;
  const ScanVariant& scan = scan_variant(slices);
  const dim3 scan_grid(static_cast<unsigned>(slices / scan.groups));
  if (launch_after(scan.kernel, scan_grid, 128 * scan.groups, scan.smem, s, p) != cudaSuccess) return 5;
  if (launch_after(chunk_output, per_chunk, 256, kOutSmem, s, p) != cudaSuccess) return 5;
  return 0;
}
