// kda's DSA top-k indexer in one launch (dsa_topk_indexer_fp8_h64_d128_topk2048_ps64, kda ABI; spec
// contest-kernels.md 3.1). mma_radix's two launches measured 10.5 us a call where its kernels ran 2.9 us: kda's
// latency is the CUPTI span from the first kernel's start to the last one's end, and the host's second launch
// left the GPU idle between them. Here one kernel, grid (row blocks, batch), PAGES x 128 threads:
//   * a row of at most 2048 tokens: its block 0 writes the row's ids in token order, then -1 (every token is
//     selected; nothing is scored).
//   * a longer row: each block scores ROUNDS x PAGES of its pages, PAGES at a time (the next PAGES copied while
//     these are multiplied), four warps a page: q[b] (64 heads x 128 e4m3) and the pages' 64 keys each are
//     copied to shared memory with cp.async (rows padded to 144 bytes, so a fragment load hits 32 distinct
//     banks), warp (page, 16 heads) multiplies on the FP8 tensor cores (mma.sync
//     m16n8k32 e4m3 x e4m3 -> f32), the epilogue applies each token's scale before the ReLU (the definition's
//     order, for a scale of either sign), weights the heads and adds them across lanes and warps, and one
//     order-preserving 32-bit key per token goes to the scratch buffer. The row's last block to finish (a
//     counter per row, threadfence-reduction pattern; the last block sets it back to 0) selects: an exact radix
//     select of the 2048th largest key (8-bit digits from the top, a 256-bin shared histogram whose atomics
//     are aggregated per warp with __match_any_sync, since the top digit is nearly the same for every key; it
//     stops as soon as the crossing bin holds exactly the keys still needed), then one pass writes every key
//     above the threshold and as many equal to it as the 2048 need (order is not checked).
// Scratch (persistent_state = "scratch"): a counter per row at a fixed place (zero between calls), then one key
// per (row, token); allocated when a call needs more than there is, and kept.
// Returns 0 on success, 1 on a malformed or unsupported call, 3 on a CUDA error.
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <stdint.h>

#include <initializer_list>

#ifndef PAGES
#define PAGES 4  // pages a block scores at once (four warps each): PAGES x 128 threads, also the select's threads
#endif
#ifndef ROUNDS
#define ROUNDS 1  // rounds of PAGES pages a block scores; above 1 the next round is copied while one is multiplied
#endif

namespace {

constexpr int kHeads = 64;
constexpr int kDim = 128;
constexpr int kPageSize = 64;
constexpr int kTopk = 2048;
constexpr int64_t kPageBytes = kPageSize * 132;  // 8448: 64 x 128 e4m3 bytes, then 64 fp32 scales
constexpr int kScaleOffset = kPageSize * kDim;   // 8192
constexpr int kStride = kDim + 16;               // shared row stride in bytes: 36 words, 4 banks apart per row
constexpr int kPages = PAGES;
constexpr int kThreads = kPages * 128;
constexpr int kRounds = ROUNDS;
constexpr int kBuffers = kRounds > 1 ? 2 : 1;             // page buffers in shared memory
constexpr int kRowTokens = kPages * kRounds * kPageSize;  // tokens a block scores
constexpr int kCachedKeys = 16384;                        // keys the selecting block keeps in shared memory (64 KB)
constexpr unsigned kFull = 0xFFFFFFFFu;

// Dynamic shared memory of a scoring block: q, the pages' rows, weights, scales, per-warp partial sums.
constexpr int kQBytes = kHeads * kStride;
constexpr int kPageRowsBytes = kPageSize * kStride;
constexpr int kScoreBytes = kQBytes + kBuffers * kPages * kPageRowsBytes + kHeads * 4 +
                            kBuffers * kPages * kPageSize * 4 + kPages * 4 * kPageSize * 4;

static_assert(kPages >= 1 && kPages <= 4, "PAGES: 1 to 4 (four warps a page, at most 512 threads)");
static_assert(kRounds >= 1 && kRounds <= 8, "ROUNDS: 1 to 8");

__device__ __forceinline__ uint32_t lds32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

__device__ __forceinline__ void cp_async(void* dst, const void* src, bool vec16) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  if (vec16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src));
}

// D = A (16 x 32, row) * B (32 x 8, col) + D, e4m3 inputs, f32 accumulators (sm_89 and later).
__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
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

struct Args {
  const uint8_t* q;
  const uint8_t* cache;
  const float* weights;
  const int32_t* seq_lens;
  const int32_t* table;
  uint32_t* keys;      // [batch, max_pages * 64]
  uint32_t* counters;  // [batch], zero between calls
  int32_t* out;        // [batch, 2048]
  int max_pages;
  int64_t num_pages;
  bool vec16;  // q and the cache are 16-byte aligned
};

// Copies 64 rows of 128 bytes (contiguous in global memory) into shared rows of kStride bytes: piece i of n.
__device__ __forceinline__ void copy_piece(uint8_t* dst, const uint8_t* src, int i, bool vec16) {
  if (vec16) {
    const int row = i >> 3, col = (i & 7) * 16;  // 512 pieces of 16 bytes
    cp_async(dst + row * kStride + col, src + i * 16, true);
  } else {
    const int row = i >> 5, col = (i & 31) * 4;  // 2048 pieces of 4 bytes
    cp_async(dst + row * kStride + col, src + i * 4, false);
  }
}

// The cache bytes of page p of row b (its table entry), or null: past the row (then !in_row) or outside the cache.
__device__ __forceinline__ const uint8_t* page_bytes(const Args& a, int b, int p, int len, bool* in_row) {
  *in_row = p < a.max_pages && p * kPageSize < len;
  if (!*in_row) return nullptr;
  const int64_t page = a.table[static_cast<int64_t>(b) * a.max_pages + p];
  return page >= 0 && page < a.num_pages ? a.cache + page * kPageBytes : nullptr;
}

// Scores the block's pages of row b (kRounds rounds of kPages, the first page `page0`) into its keys. Every thread
// of the block calls it. With kRounds > 1 the next round's pages are copied (cp.async, a second buffer) while this
// round's are multiplied.
__device__ __forceinline__ void score_pages(const Args& a, int b, int page0, int len, uint8_t* smem, int tid) {
  uint8_t* q_s = smem;
  uint8_t* k_s = q_s + kQBytes;  // [buffer][page] rows
  float* w_s = reinterpret_cast<float*>(k_s + kBuffers * kPages * kPageRowsBytes);
  float* scale_s = w_s + kHeads;                            // [buffer][page][token]
  float* part_s = scale_s + kBuffers * kPages * kPageSize;  // [page][head group][token]
  const int pieces = a.vec16 ? 512 : 2048;
  // Round r's pages and scales into buffer r % kBuffers, one commit group (empty past the row).
  auto issue = [&](int r) {
    const int first = page0 + r * kPages, buf = r % kBuffers;
    for (int i = tid; i < kPages * pieces; i += kThreads) {
      bool in_row;
      const int slot = i / pieces;
      const uint8_t* pg = page_bytes(a, b, first + slot, len, &in_row);
      if (pg != nullptr) copy_piece(k_s + (buf * kPages + slot) * kPageRowsBytes, pg, i % pieces, a.vec16);
    }
    for (int i = tid; i < kPages * kPageSize; i += kThreads) {
      bool in_row;
      const int slot = i / kPageSize, t = i % kPageSize;
      const uint8_t* pg = page_bytes(a, b, first + slot, len, &in_row);
      if (pg != nullptr) cp_async(scale_s + (buf * kPages + slot) * kPageSize + t, pg + kScaleOffset + t * 4, false);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  const uint8_t* q_row = a.q + static_cast<int64_t>(b) * kHeads * kDim;
  for (int i = tid; i < pieces; i += kThreads) copy_piece(q_s, q_row, i, a.vec16);
  for (int i = tid; i < kHeads; i += kThreads)
    cp_async(w_s + i, a.weights + static_cast<int64_t>(b) * kHeads + i, false);
  issue(0);  // the same group as q and the weights

  const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int slot = warp >> 2, group = warp & 3, h0 = group * 16;
  uint32_t* key_row = a.keys + static_cast<int64_t>(b) * a.max_pages * kPageSize;
  for (int r = 0; r < kRounds; ++r) {
    const int first = page0 + r * kPages;
    if (first >= a.max_pages || first * kPageSize >= len) break;  // block-uniform: the row ends before this round
    if (r + 1 < kRounds) {
      issue(r + 1);  // into the buffer round r - 1 used: every warp was done with it before the last barrier
      asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    } else {
      asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    }
    __syncthreads();  // round r's copies (every thread's) have landed
    const int buf = r % kBuffers;
    bool in_row;
    const uint8_t* pg = page_bytes(a, b, first + slot, len, &in_row);  // warp-uniform
    if (pg != nullptr) {
      const uint8_t* k_page = k_s + (buf * kPages + slot) * kPageRowsBytes;
      float acc[8][4];
#pragma unroll
      for (int n = 0; n < 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < kDim / 32; ++ks) {
        const int k0 = ks * 32 + t4 * 4;
        const uint8_t* qa = q_s + (h0 + g) * kStride + k0;
        const uint32_t a0 = lds32(qa), a1 = lds32(qa + 8 * kStride), a2 = lds32(qa + 16),
                       a3 = lds32(qa + 8 * kStride + 16);
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          const uint8_t* kb = k_page + (n * 8 + g) * kStride + k0;
          mma_e4m3(acc[n], a0, a1, a2, a3, lds32(kb), lds32(kb + 16));
        }
      }
      // acc[n][0..1]: head h0+g, tokens n*8 + 2*t4 + {0,1}; acc[n][2..3]: head h0+g+8, the same tokens.
      const float w_lo = w_s[h0 + g], w_hi = w_s[h0 + g + 8];
      const float* scale = scale_s + (buf * kPages + slot) * kPageSize;
      float* part = part_s + (slot * 4 + group) * kPageSize;
#pragma unroll
      for (int n = 0; n < 8; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int t = n * 8 + 2 * t4 + e;
          const float sc = scale[t];
          float v = w_lo * fmaxf(acc[n][e] * sc, 0.0f) + w_hi * fmaxf(acc[n][2 + e] * sc, 0.0f);
          v += __shfl_xor_sync(kFull, v, 4);
          v += __shfl_xor_sync(kFull, v, 8);
          v += __shfl_xor_sync(kFull, v, 16);
          if (g == 0) part[t] = v;
        }
      }
    }
    __syncthreads();  // part_s is complete; and every warp is done with buffer r % kBuffers
    for (int i = tid; i < kPages * kPageSize; i += kThreads) {
      const int sl = i / kPageSize, t = i % kPageSize, token = (first + sl) * kPageSize + t;
      bool valid;
      const uint8_t* kp = page_bytes(a, b, first + sl, len, &valid);
      if (!valid || token >= len) continue;
      const float* part = part_s + sl * 4 * kPageSize + t;
      // A table entry outside the cache: its tokens sort last.
      key_row[token] =
          kp == nullptr ? 0u : order_key(part[0] + part[kPageSize] + part[2 * kPageSize] + part[3 * kPageSize]);
    }
    // The next round's compute rewrites part_s only after its own barrier, which every thread reaches after
    // reading part_s here.
  }
  __threadfence();  // each writer's keys are visible device-wide before the row's counter moves
}

// The digit (0..255) whose bin holds the `need`-th largest key among the counted ones, counting from the top
// bin, how many of that bin are still needed, and the bin's count. Run by one warp over the histogram.
__device__ __forceinline__ void crossing_bin(const uint32_t* hist, uint32_t need, int lane, uint32_t* digit_out,
                                             uint32_t* need_out, uint32_t* count_out) {
  // lane l holds bins 255 - 8l down to 248 - 8l.
  uint32_t sum = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) sum += hist[255 - 8 * lane - i];
  uint32_t incl = sum;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const uint32_t o = __shfl_up_sync(kFull, incl, off);
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
        *count_out = c;
        break;
      }
      above += c;
    }
  }
}

// The top 2048 of a row's len > 2048 keys (in shared memory when they fit, else read from L2), ids to out_row.
__device__ __forceinline__ void select_top(const uint32_t* row_keys, int len, const int32_t* table_row,
                                           int32_t* out_row, uint32_t* cached, int tid) {
  __shared__ uint32_t hist[256];
  __shared__ uint32_t s_digit, s_need, s_count, s_above, s_equal;
  const int lane = tid & 31;
  const bool in_smem = len <= kCachedKeys;
  if (in_smem)
    for (int i = tid; i < len; i += kThreads) cached[i] = __ldcg(row_keys + i);
  // Keys other blocks wrote: read through L2 (__ldcg), never a possibly stale L1 line.
  auto key_at = [&](int i) { return in_smem ? cached[i] : __ldcg(row_keys + i); };
  const unsigned lanes_below = (1u << lane) - 1u;
  uint32_t prefix = 0, mask = 0, need = kTopk;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = tid; i < 256; i += kThreads) hist[i] = 0;
    __syncthreads();                                    // also orders the cached keys before their first read
    for (int base = 0; base < len; base += kThreads) {  // warp-uniform trip count
      const int i = base + tid;
      const uint32_t key = i < len ? key_at(i) : 0u;
      const bool counted = i < len && (key & mask) == prefix;
      const unsigned voters = __ballot_sync(kFull, counted);
      if (counted) {
        const uint32_t bin = (key >> shift) & 0xFFu;
        const unsigned peers = __match_any_sync(voters, bin);
        if ((peers & lanes_below) == 0) atomicAdd(&hist[bin], static_cast<uint32_t>(__popc(peers)));
      }
    }
    __syncthreads();
    if (tid < 32) crossing_bin(hist, need, lane, &s_digit, &s_need, &s_count);
    __syncthreads();
    prefix |= s_digit << shift;
    mask |= 0xFFu << shift;
    need = s_need;
    if (s_count == need) break;  // every key of the crossing bin is selected: no need to split it further
  }
  // Selected: every key whose digits so far are above prefix's, and `need` of those equal to it.
  if (tid == 0) s_above = s_equal = 0;
  __syncthreads();
  const uint32_t first_equal = kTopk - need;
  for (int base = 0; base < len; base += kThreads) {  // warp-uniform trip count
    const int i = base + tid;
    const uint32_t key = i < len ? key_at(i) & mask : 0u;
    const bool above = i < len && key > prefix, equal = i < len && key == prefix;
    const unsigned above_mask = __ballot_sync(kFull, above), equal_mask = __ballot_sync(kFull, equal);
    uint32_t above_at = 0, equal_at = 0;
    if (lane == 0) {
      if (above_mask) above_at = atomicAdd(&s_above, static_cast<uint32_t>(__popc(above_mask)));
      if (equal_mask) equal_at = atomicAdd(&s_equal, static_cast<uint32_t>(__popc(equal_mask)));
    }
    above_at = __shfl_sync(kFull, above_at, 0) + __popc(above_mask & lanes_below);
    equal_at = __shfl_sync(kFull, equal_at, 0) + __popc(equal_mask & lanes_below);
    if (above || (equal && equal_at < need)) {
      const int32_t id = table_row[i / kPageSize] * kPageSize + i % kPageSize;
      out_row[above ? above_at : first_equal + equal_at] = id;
    }
  }
}

// grid (row blocks, batch), kThreads threads, dynamic shared memory max(kScoreBytes, cached keys) when scoring.
__global__ void __launch_bounds__(kThreads) index_rows(Args a) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ bool last_s;
  const int b = blockIdx.y, tid = threadIdx.x;
  const int64_t row_len = static_cast<int64_t>(a.max_pages) * kPageSize;
  const int32_t* table_row = a.table + static_cast<int64_t>(b) * a.max_pages;
  int32_t* out_row = a.out + static_cast<int64_t>(b) * kTopk;
  int len = a.seq_lens[b];
  if (len < 0) len = 0;
  if (len > row_len) len = static_cast<int>(row_len);
  if (len <= kTopk) {  // every token is selected; nothing to score
    if (blockIdx.x == 0)
      for (int i = tid; i < kTopk; i += kThreads)
        out_row[i] = i < len ? table_row[i / kPageSize] * kPageSize + i % kPageSize : -1;
    return;
  }
  const unsigned blocks = static_cast<unsigned>((len + kRowTokens - 1) / kRowTokens);  // of this row
  if (blockIdx.x >= blocks) return;
  score_pages(a, b, static_cast<int>(blockIdx.x) * kPages * kRounds, len, smem, tid);
  __syncthreads();  // every key of the block is written
  if (tid == 0) {
    const unsigned done = atomicAdd(a.counters + b, 1u);
    last_s = done == blocks - 1;
    if (last_s) a.counters[b] = 0u;  // every block of the row has counted: ready for the next call
  }
  __syncthreads();
  if (!last_s) return;
  __threadfence();
  select_top(a.keys + b * row_len, len, table_row, out_row, reinterpret_cast<uint32_t*>(smem), tid);
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

// Scratch, grown on demand and kept between calls: a counter per possible row (zeroed when allocated, then set
// back to 0 by each row's last block), then the keys.
constexpr size_t kCounterBytes = 65536 * sizeof(uint32_t);  // batch <= 65535
void* g_scratch = nullptr;
size_t g_scratch_bytes = 0;
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
  const uint8_t* q = data_of<const uint8_t>(q_t);
  const uint8_t* cache = data_of<const uint8_t>(k_t);
  if (reinterpret_cast<uintptr_t>(q) % 4 != 0 || reinterpret_cast<uintptr_t>(cache) % 4 != 0 ||
      reinterpret_cast<uintptr_t>(data_of<const float>(w_t)) % 4 != 0)
    return 1;  // the copies to shared memory are 4 or 16 bytes
  const bool vec16 = reinterpret_cast<uintptr_t>(q) % 16 == 0 && reinterpret_cast<uintptr_t>(cache) % 16 == 0;

  // A table of at most 32 pages holds rows of at most 2048 tokens: no keys, no counters, one block a row.
  const bool scored = row_len > kTopk;
  uint32_t* keys = nullptr;
  uint32_t* counters = nullptr;
  if (scored) {
    // The counters first, at a place no shape moves (a call of another shape must find them at 0, not in an
    // earlier shape's keys), then the keys.
    const size_t need = kCounterBytes + static_cast<size_t>(batch * row_len) * sizeof(uint32_t);
    if (need > g_scratch_bytes) {
      if (g_scratch != nullptr) cudaFree(g_scratch);
      g_scratch = nullptr;
      g_scratch_bytes = 0;
      if (cudaMalloc(&g_scratch, need) != cudaSuccess) return 3;
      if (cudaMemsetAsync(g_scratch, 0, kCounterBytes, stream) != cudaSuccess) return 3;
      g_scratch_bytes = need;
    }
    counters = static_cast<uint32_t*>(g_scratch);
    keys = counters + kCounterBytes / sizeof(uint32_t);
    if (!g_configured) {
      const int most = kScoreBytes > kCachedKeys * 4 ? kScoreBytes : kCachedKeys * 4;
      if (cudaFuncSetAttribute(index_rows, cudaFuncAttributeMaxDynamicSharedMemorySize, most) != cudaSuccess) return 3;
      g_configured = true;
    }
  }
  const int64_t cached = row_len < kCachedKeys ? row_len : kCachedKeys;
  const size_t smem =
      scored ? static_cast<size_t>(kScoreBytes > cached * 4 ? kScoreBytes : cached * 4) : static_cast<size_t>(0);
  const Args args{
      q,    cache,    data_of<const float>(w_t), data_of<const int32_t>(len_t), data_of<const int32_t>(table_t),
      keys, counters, data_of<int32_t>(out_t),   static_cast<int>(max_pages),   num_pages,
      vec16};
  const unsigned row_blocks = scored ? static_cast<unsigned>((row_len + kRowTokens - 1) / kRowTokens) : 1u;
  index_rows<<<dim3(row_blocks, static_cast<unsigned>(batch)), kThreads, smem, stream>>>(args);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
