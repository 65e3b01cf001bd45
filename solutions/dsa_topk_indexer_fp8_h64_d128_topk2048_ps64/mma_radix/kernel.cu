// kda's DSA top-k indexer (dsa_topk_indexer_fp8_h64_d128_topk2048_ps64, kda ABI; spec contest-kernels.md 3.1).
// Two kernels on the caller's stream:
//   score_page: one block of four warps per (row, page). q[b] (64 heads x 128 e4m3) and the page's 64 keys are
//     staged in shared memory (rows padded to 144 bytes: the fragment loads hit 32 distinct banks); warp w
//     multiplies its 16 heads by the 64 tokens on the FP8 tensor cores (mma.sync m16n8k32 e4m3 x e4m3 -> f32,
//     4 k-steps x 8 token tiles). The epilogue applies each token's scale before the ReLU (the definition's
//     order, whatever the scale's sign), weights the heads, adds them across lanes and warps, and writes one
//     order-preserving 32-bit key per token. Rows with L <= 2048 are not scored: every token is selected.
//   select_row: one block per row. L <= 2048: the row's ids in token order, then -1. Otherwise an exact radix
//     select over the keys (four 8-bit digits, a 256-bin histogram per digit, the crossing bin found by one
//     warp's scan), then one pass writes the tokens above the threshold and as many tokens equal to it as the
//     top 2048 need (order is not checked; ties are broken by arrival). Keys are held in shared memory for rows
//     of up to kCachedKeys tokens, read from the scratch buffer (L2) beyond.
// Scratch: one key per (row, token) kept between calls (policy persistent_state = "scratch").
// Returns 0 on success, 1 on a malformed or unsupported call, 3 on a CUDA error.
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <stdint.h>

#include <initializer_list>

namespace {

constexpr int kHeads = 64;
constexpr int kDim = 128;
constexpr int kPageSize = 64;
constexpr int kTopk = 2048;
constexpr int64_t kPageBytes = kPageSize * 132;  // 8448
constexpr int kScaleOffset = kPageSize * kDim;   // 8192
constexpr int kStride = kDim + 16;               // shared row stride in bytes: 36 words, 4 banks apart per row
constexpr int kCachedKeys = 16384;               // keys a select block keeps in shared memory (64 KB)
constexpr int kSelectThreads = 1024;

#ifndef PDL
#define PDL 0  // 1: select_row launched as a programmatic dependent of score_page (not yet measured)
#endif

__device__ __forceinline__ uint32_t lds32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// D = A (16 x 32, row) * B (32 x 8, col) + D, e4m3 inputs, f32 accumulators (sm_89 and later).
__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// A float as an unsigned key with the same order (larger float, larger key); NaN is the smallest key.
__device__ __forceinline__ uint32_t order_key(float f) {
  if (f != f) return 0u;
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Copies 64 rows of 128 bytes from global memory (row-major, contiguous) into shared rows of kStride bytes.
__device__ __forceinline__ void stage_rows(uint8_t* dst, const uint8_t* src, bool vec16, int tid) {
  if (vec16) {
    for (int i = tid; i < kPageSize * kDim / 16; i += 128) {  // 512 16-byte pieces, 4 per thread
      const int row = i >> 3, col = (i & 7) * 16;
      *reinterpret_cast<uint4*>(dst + row * kStride + col) = reinterpret_cast<const uint4*>(src)[i];
    }
  } else {
    for (int i = tid; i < kPageSize * kDim / 4; i += 128) {  // 4-byte pieces: bases 4-byte aligned only
      const int row = i >> 5, col = (i & 31) * 4;
      *reinterpret_cast<uint32_t*>(dst + row * kStride + col) = reinterpret_cast<const uint32_t*>(src)[i];
    }
  }
}

struct ScoreArgs {
  const uint8_t* q;
  const uint8_t* cache;
  const float* weights;
  const int32_t* seq_lens;
  const int32_t* table;
  uint32_t* keys;  // [batch, max_pages * 64]
  int max_pages;
  int64_t num_pages;
  bool vec16;  // q and the cache are 16-byte aligned
};

// grid (max_pages, batch), 128 threads.
__global__ void __launch_bounds__(128) score_page(ScoreArgs a) {
  __shared__ __align__(16) uint8_t q_s[kHeads * kStride];
  __shared__ __align__(16) uint8_t k_s[kPageSize * kStride];
  __shared__ float w_s[kHeads];
  __shared__ float scale_s[kPageSize];
  __shared__ float part_s[4][kPageSize];

  const int b = blockIdx.y, p = blockIdx.x, tid = threadIdx.x;
  if (PDL) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");  // select_row may start its prologue
  const int len = a.seq_lens[b];
  if (len <= kTopk || p * kPageSize >= len) return;  // uniform per block
  const int64_t row_len = static_cast<int64_t>(a.max_pages) * kPageSize;
  uint32_t* key_row = a.keys + b * row_len + p * kPageSize;
  const int64_t page = a.table[static_cast<int64_t>(b) * a.max_pages + p];
  if (page < 0 || page >= a.num_pages) {  // not a page of the cache: its tokens sort last
    if (tid < kPageSize && p * kPageSize + tid < len) key_row[tid] = 0u;
    return;
  }
  const uint8_t* page_bytes = a.cache + page * kPageBytes;
  stage_rows(q_s, a.q + static_cast<int64_t>(b) * kHeads * kDim, a.vec16, tid);
  stage_rows(k_s, page_bytes, a.vec16, tid);
  if (tid < kHeads) w_s[tid] = a.weights[b * kHeads + tid];
  if (tid >= 64) scale_s[tid - 64] = reinterpret_cast<const float*>(page_bytes + kScaleOffset)[tid - 64];
  __syncthreads();

  const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int h0 = warp * 16;
  float acc[8][4];
#pragma unroll
  for (int n = 0; n < 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < kDim / 32; ++ks) {
    const int k0 = ks * 32 + t4 * 4;
    const uint8_t* qa = q_s + (h0 + g) * kStride + k0;
    const uint32_t a0 = lds32(qa), a1 = lds32(qa + 8 * kStride), a2 = lds32(qa + 16), a3 = lds32(qa + 8 * kStride + 16);
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      const uint8_t* kb = k_s + (n * 8 + g) * kStride + k0;
      mma_e4m3(acc[n], a0, a1, a2, a3, lds32(kb), lds32(kb + 16));
    }
  }
  // acc[n][0..1]: head h0+g, tokens n*8 + 2*t4 + {0,1}; acc[n][2..3]: head h0+g+8, the same tokens.
  const float w_lo = w_s[h0 + g], w_hi = w_s[h0 + g + 8];
#pragma unroll
  for (int n = 0; n < 8; ++n) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int t = n * 8 + 2 * t4 + e;
      const float s = scale_s[t];
      float v = w_lo * fmaxf(acc[n][e] * s, 0.0f) + w_hi * fmaxf(acc[n][2 + e] * s, 0.0f);
      v += __shfl_xor_sync(0xFFFFFFFFu, v, 4);
      v += __shfl_xor_sync(0xFFFFFFFFu, v, 8);
      v += __shfl_xor_sync(0xFFFFFFFFu, v, 16);
      if (g == 0) part_s[warp][t] = v;
    }
  }
  __syncthreads();
  if (tid < kPageSize && p * kPageSize + tid < len)
    key_row[tid] = order_key(part_s[0][tid] + part_s[1][tid] + part_s[2][tid] + part_s[3][tid]);
}

// The digit (0..255) whose bin holds the `need`-th largest key among the counted ones, counting from the top
// bin, and how many of that bin are still needed. Run by warp 0 over the 256-bin histogram.
__device__ __forceinline__ void crossing_bin(const uint32_t* hist, uint32_t need, int lane, uint32_t* digit_out,
                                             uint32_t* need_out) {
  // lane l holds bins 255 - 8l down to 248 - 8l.
  uint32_t sum = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) sum += hist[255 - 8 * lane - i];
  uint32_t incl = sum;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const uint32_t o = __shfl_up_sync(0xFFFFFFFFu, incl, off);
    if (lane >= off) incl += o;
  }
  const uint32_t excl = incl - sum;
  if (excl < need && need <= incl) {
    uint32_t above = excl;
    for (int i = 0; i < 8; ++i) {
      const int bin = 255 - 8 * lane - i;
      const uint32_t c = hist[bin];
      if (above + c >= need) {
        *digit_out = static_cast<uint32_t>(bin);
        *need_out = need - above;
        break;
      }
      above += c;
    }
  }
}

// grid (batch), kSelectThreads threads, dynamic shared memory min(row_len, kCachedKeys) * 4 bytes.
__global__ void __launch_bounds__(kSelectThreads) select_row(const uint32_t* __restrict__ keys,
                                                             const int32_t* __restrict__ seq_lens,
                                                             const int32_t* __restrict__ table, int max_pages,
                                                             int32_t* __restrict__ out) {
  extern __shared__ uint32_t cached[];
  __shared__ uint32_t hist[256];
  __shared__ uint32_t s_digit, s_need, s_above, s_equal;
  const int b = blockIdx.x, tid = threadIdx.x, lane = tid & 31;
  const int64_t row_len = static_cast<int64_t>(max_pages) * kPageSize;
  const int32_t* table_row = table + static_cast<int64_t>(b) * max_pages;
  int32_t* out_row = out + static_cast<int64_t>(b) * kTopk;
  int len = seq_lens[b];
  if (len < 0) len = 0;
  if (len > row_len) len = static_cast<int>(row_len);
  if (len <= kTopk) {  // every token is selected; no scoring needed
    for (int i = tid; i < kTopk; i += kSelectThreads)
      out_row[i] = i < len ? table_row[i / kPageSize] * kPageSize + i % kPageSize : -1;
    return;
  }
  // With PDL this block may run beside score_page: the keys are complete and visible after the wait.
  if (PDL) asm volatile("griddepcontrol.wait;\n" ::: "memory");
  const uint32_t* row = keys + b * row_len;
  const uint32_t* k = row;
  if (len <= kCachedKeys) {
    for (int i = tid; i < len; i += kSelectThreads) cached[i] = row[i];
    k = cached;  // generic addressing: the same loops read shared or global keys
  }
  uint32_t prefix = 0, mask = 0, need = kTopk;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = tid; i < 256; i += kSelectThreads) hist[i] = 0;
    __syncthreads();  // also orders the cached keys before their first read
    for (int i = tid; i < len; i += kSelectThreads) {
      const uint32_t key = k[i];
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 0xFFu], 1u);
    }
    __syncthreads();
    if (tid < 32) crossing_bin(hist, need, lane, &s_digit, &s_need);
    __syncthreads();
    prefix |= s_digit << shift;
    mask |= 0xFFu << shift;
    need = s_need;
  }
  // prefix is the 2048th largest key; `need` of the keys equal to it are selected, every larger key is.
  if (tid == 0) s_above = s_equal = 0;
  __syncthreads();
  const uint32_t first_equal = kTopk - need;
  const unsigned below = (1u << lane) - 1u;
  for (int base = 0; base < len; base += kSelectThreads) {  // warp-uniform trip count
    const int i = base + tid;
    const uint32_t key = i < len ? k[i] : 0u;
    const bool above = i < len && key > prefix, equal = i < len && key == prefix;
    const unsigned above_mask = __ballot_sync(0xFFFFFFFFu, above), equal_mask = __ballot_sync(0xFFFFFFFFu, equal);
    uint32_t above_at = 0, equal_at = 0;
    if (lane == 0) {
      if (above_mask) above_at = atomicAdd(&s_above, static_cast<uint32_t>(__popc(above_mask)));
      if (equal_mask) equal_at = atomicAdd(&s_equal, static_cast<uint32_t>(__popc(equal_mask)));
    }
    above_at = __shfl_sync(0xFFFFFFFFu, above_at, 0) + __popc(above_mask & below);
    equal_at = __shfl_sync(0xFFFFFFFFu, equal_at, 0) + __popc(equal_mask & below);
    const int32_t id = i < len ? table_row[i / kPageSize] * kPageSize + i % kPageSize : -1;
    if (above) out_row[above_at] = id;
    if (equal && equal_at < need) out_row[first_equal + equal_at] = id;
  }
}

bool has_type(const DLTensor& t, uint8_t code, uint8_t bits) {
  return t.dtype.code == code && t.dtype.bits == bits && t.dtype.lanes == 1;
}

bool has_shape(const DLTensor& t, std::initializer_list<int64_t> shape) {
  if (t.ndim != static_cast<int>(shape.size())) return false;
  int i = 0;
  for (int64_t s : shape)
    if (t.shape[i++] != s) return false;
  return true;
}

template <typename T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

// Keys scratch, grown on demand and kept between calls.
uint32_t* g_keys = nullptr;
size_t g_keys_bytes = 0;
bool g_configured = false;

}  // namespace

extern "C" int run(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs,
                   void* stream_ptr) {
  if (num_inputs != 5 || num_outputs != 1) return 1;
  const DLTensor &q_t = inputs[0], &k_t = inputs[1], &w_t = inputs[2], &len_t = inputs[3], &table_t = inputs[4];
  const DLTensor& out_t = outputs[0];
  if (!has_type(q_t, 10, 8) || !has_type(k_t, kDLInt, 8) || !has_type(w_t, kDLFloat, 32) ||
      !has_type(len_t, kDLInt, 32) || !has_type(table_t, kDLInt, 32) || !has_type(out_t, kDLInt, 32))
    return 1;
  if (q_t.ndim != 3 || k_t.ndim != 4 || table_t.ndim != 2) return 1;
  const int64_t batch = q_t.shape[0], num_pages = k_t.shape[0], max_pages = table_t.shape[1];
  if (!has_shape(q_t, {batch, kHeads, kDim}) || !has_shape(k_t, {num_pages, kPageSize, 1, 132}) ||
      !has_shape(w_t, {batch, kHeads}) || !has_shape(len_t, {batch}) || !has_shape(table_t, {batch, max_pages}) ||
      !has_shape(out_t, {batch, kTopk}))
    return 1;
  if (batch == 0) return 0;
  if (batch > 65535 || max_pages < 1 || max_pages > (1 << 24)) return 1;
  const int64_t row_len = max_pages * kPageSize;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);

  const size_t need = static_cast<size_t>(batch * row_len) * sizeof(uint32_t);
  if (need > g_keys_bytes) {
    if (g_keys != nullptr) cudaFree(g_keys);
    g_keys = nullptr;
    g_keys_bytes = 0;
    if (cudaMalloc(&g_keys, need) != cudaSuccess) return 3;
    g_keys_bytes = need;
  }
  if (!g_configured) {
    if (cudaFuncSetAttribute(select_row, cudaFuncAttributeMaxDynamicSharedMemorySize, kCachedKeys * 4) !=
        cudaSuccess)
      return 3;
    g_configured = true;
  }
  const uint8_t* q = data_of<const uint8_t>(q_t);
  const uint8_t* cache = data_of<const uint8_t>(k_t);
  const bool vec16 = reinterpret_cast<uintptr_t>(q) % 16 == 0 && reinterpret_cast<uintptr_t>(cache) % 16 == 0;
  if (reinterpret_cast<uintptr_t>(q) % 4 != 0 || reinterpret_cast<uintptr_t>(cache) % 4 != 0) return 1;
  const ScoreArgs args{q,          cache, data_of<const float>(w_t), data_of<const int32_t>(len_t),
                       data_of<const int32_t>(table_t), g_keys, static_cast<int>(max_pages), num_pages, vec16};
  // A table of at most 32 pages holds rows of at most 2048 tokens: nothing to score, and select_row only copies
  // ids (one launch, no keys in shared memory). The first device run, with both launches, measured 10.5 us a call
  // for such shapes against 2.9 us inside the two kernels (1.2 of it score_page's blocks returning at once).
  const bool scored = row_len > kTopk;
  if (scored)
    score_page<<<dim3(static_cast<unsigned>(max_pages), static_cast<unsigned>(batch)), 128, 0, stream>>>(args);
  const size_t smem =
      scored ? static_cast<size_t>(row_len < kCachedKeys ? row_len : kCachedKeys) * sizeof(uint32_t) : 0;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(batch));
  cfg.blockDim = dim3(kSelectThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = PDL && scored ? 1 : 0;
  const cudaError_t e = cudaLaunchKernelEx(&cfg, select_row, static_cast<const uint32_t*>(g_keys), args.seq_lens,
                                           args.table, static_cast<int>(max_pages), data_of<int32_t>(out_t));
  return e == cudaSuccess && cudaGetLastError() == cudaSuccess ? 0 : 3;
}
