// Naive baseline for dsa_topk_indexer_fp8_h64_d128_topk2048_ps64 (kda ABI): the straightforward two-kernel CUDA
// version an engineer writes first. fp32 math on CUDA cores, no tensor cores, no fusion of scoring and top-k.
//   score_kernel: one block per (row, page). The block stages q[b] (64x128 fp8), the page's 64 keys (fp8) and
//     scales, the weights and an e4m3 -> fp32 lookup table in shared memory; 4 threads per token each take 16
//     heads, and a 4-lane shuffle adds the weighted relu terms. Rows with L <= 2048 are skipped (all selected).
//   topk_kernel: one block per row. L <= 2048: the row's ids in token order, then -1. Otherwise a bitonic sort
//     of (score desc, token asc) over the next power of two >= max_num_pages*64 in dynamic shared memory
//     (limit 16384 tokens, i.e. max_num_pages <= 256), then the first 2048 ids.
// Scores go through a device scratch buffer kept between calls (policy persistent_state = "scratch").
// Returns 0 on success, 1 on a malformed or unsupported call, 3 on a CUDA error.
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <stdint.h>

namespace {

constexpr int kHeads = 64;
constexpr int kDim = 128;
constexpr int kPageSize = 64;
constexpr int kTopk = 2048;
constexpr int64_t kPageBytes = kPageSize * 132;  // 8448
constexpr int kScaleOffset = kPageSize * kDim;   // 8192
constexpr int kRowPad = kDim + 4;                // shared-memory row stride in bytes (avoids bank conflicts)
constexpr int kMaxSortLen = 16384;

__device__ float e4m3_to_float(uint8_t b) {
  const int exp = (b >> 3) & 0xF, man = b & 0x7;
  if (exp == 0xF && man == 0x7) return __int_as_float(0x7FC00000);
  const float mag = exp == 0 ? ldexpf(static_cast<float>(man), -9) : ldexpf(static_cast<float>(8 + man), exp - 10);
  return (b & 0x80) ? -mag : mag;
}

// grid (max_pages, batch), 256 threads.
__global__ void __launch_bounds__(256) score_kernel(const uint8_t* __restrict__ q, const uint8_t* __restrict__ cache,
                                                    const float* __restrict__ weights,
                                                    const int32_t* __restrict__ seq_lens,
                                                    const int32_t* __restrict__ table, int max_pages,
                                                    int64_t num_pages, float* __restrict__ scores) {
  __shared__ float lut[256];
  __shared__ float w_s[kHeads];
  __shared__ float scale_s[kPageSize];
  __shared__ __align__(16) uint8_t q_s[kHeads * kRowPad];
  __shared__ __align__(16) uint8_t k_s[kPageSize * kRowPad];

  const int b = blockIdx.y, p = blockIdx.x, tid = threadIdx.x;
  const int len = seq_lens[b];
  if (len <= kTopk || p * kPageSize >= len) return;  // uniform per block
  const int64_t page = table[static_cast<int64_t>(b) * max_pages + p];
  const int64_t row_len = static_cast<int64_t>(max_pages) * kPageSize;
  if (page < 0 || page >= num_pages) {
    if (tid < kPageSize) scores[b * row_len + p * kPageSize + tid] = __int_as_float(0x7FC00000);
    return;
  }
  const uint8_t* page_bytes = cache + page * kPageBytes;
  const uint8_t* q_row = q + static_cast<int64_t>(b) * kHeads * kDim;

  lut[tid] = e4m3_to_float(static_cast<uint8_t>(tid));
  if (tid < kHeads) w_s[tid] = weights[b * kHeads + tid];
  if (tid < kPageSize) scale_s[tid] = reinterpret_cast<const float*>(page_bytes + kScaleOffset)[tid];
  // 8192 bytes each for q and K: 2048 words, 8 per thread, 4-byte loads (both bases are 4-byte aligned).
  for (int i = tid; i < kHeads * kDim / 4; i += blockDim.x) {
    const int row = i / (kDim / 4), col = (i % (kDim / 4)) * 4;
    *reinterpret_cast<uint32_t*>(&q_s[row * kRowPad + col]) = reinterpret_cast<const uint32_t*>(q_row)[i];
    *reinterpret_cast<uint32_t*>(&k_s[row * kRowPad + col]) = reinterpret_cast<const uint32_t*>(page_bytes)[i];
  }
  __syncthreads();

  const int token = tid / 4, part = tid % 4;
  const uint8_t* k_tok = &k_s[token * kRowPad];
  const float scale = scale_s[token];
  float partial = 0.0f;
  for (int hh = 0; hh < kHeads / 4; ++hh) {
    const int h = part * (kHeads / 4) + hh;
    const uint8_t* q_head = &q_s[h * kRowPad];
    float dot = 0.0f;
    for (int d = 0; d < kDim; d += 4) {
      const uint32_t qw = *reinterpret_cast<const uint32_t*>(q_head + d);
      const uint32_t kw = *reinterpret_cast<const uint32_t*>(k_tok + d);
#pragma unroll
      for (int e = 0; e < 4; ++e) dot += lut[(qw >> (8 * e)) & 0xFF] * lut[(kw >> (8 * e)) & 0xFF];
    }
    partial += w_s[h] * fmaxf(dot * scale, 0.0f);
  }
  partial += __shfl_xor_sync(0xFFFFFFFFu, partial, 1);
  partial += __shfl_xor_sync(0xFFFFFFFFu, partial, 2);
  const int j = p * kPageSize + token;
  if (part == 0 && j < len) scores[b * row_len + j] = partial;
}

__device__ bool better(float sa, int ja, float sb, int jb) { return sa > sb || (sa == sb && ja < jb); }

// grid (batch), 1024 threads, dynamic shared memory sort_len * 8 bytes.
__global__ void __launch_bounds__(1024) topk_kernel(const float* __restrict__ scores,
                                                    const int32_t* __restrict__ seq_lens,
                                                    const int32_t* __restrict__ table, int max_pages, int sort_len,
                                                    int32_t* __restrict__ out) {
  extern __shared__ float smem[];
  float* key = smem;
  int* idx = reinterpret_cast<int*>(smem + sort_len);
  const int b = blockIdx.x, tid = threadIdx.x;
  const int64_t row_len = static_cast<int64_t>(max_pages) * kPageSize;
  const int32_t* table_row = table + static_cast<int64_t>(b) * max_pages;
  int32_t* out_row = out + static_cast<int64_t>(b) * kTopk;
  int len = seq_lens[b];
  if (len < 0) len = 0;
  if (len > row_len) len = static_cast<int>(row_len);

  if (len <= kTopk) {  // every token is selected; no scoring needed
    for (int i = tid; i < kTopk; i += blockDim.x)
      out_row[i] = i < len ? table_row[i / kPageSize] * kPageSize + i % kPageSize : -1;
    return;
  }
  const float* row = scores + b * row_len;
  for (int i = tid; i < sort_len; i += blockDim.x) {
    key[i] = i < len ? row[i] : -INFINITY;
    idx[i] = i < len ? i : 0x7FFFFFFF;
  }
  __syncthreads();
  for (int k = 2; k <= sort_len; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = tid; i < sort_len; i += blockDim.x) {
        const int other = i ^ j;
        if (other > i) {
          const bool first_half = (i & k) == 0;  // this segment is sorted best-first, the other worst-first
          const bool swap = first_half ? better(key[other], idx[other], key[i], idx[i])
                                       : better(key[i], idx[i], key[other], idx[other]);
          if (swap) {
            const float tk = key[i];
            key[i] = key[other];
            key[other] = tk;
            const int ti = idx[i];
            idx[i] = idx[other];
            idx[other] = ti;
          }
        }
      }
      __syncthreads();
    }
  }
  for (int i = tid; i < kTopk; i += blockDim.x) {
    const int j = idx[i];
    out_row[i] = table_row[j / kPageSize] * kPageSize + j % kPageSize;
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

// Scores scratch, grown on demand and kept between calls.
float* g_scores = nullptr;
size_t g_scores_bytes = 0;

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
  const int64_t row_len = max_pages * kPageSize;
  if (batch > 65535 || max_pages < 1 || row_len > kMaxSortLen) return 1;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);

  const size_t need = static_cast<size_t>(batch * row_len) * sizeof(float);
  if (need > g_scores_bytes) {
    if (g_scores != nullptr) cudaFree(g_scores);
    g_scores = nullptr;
    g_scores_bytes = 0;
    if (cudaMalloc(&g_scores, need) != cudaSuccess) return 3;
    g_scores_bytes = need;
  }
  int sort_len = kTopk;
  while (sort_len < row_len) sort_len <<= 1;
  const size_t smem = static_cast<size_t>(sort_len) * 8;
  if (cudaFuncSetAttribute(topk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)) !=
      cudaSuccess)
    return 3;

  const int32_t* seq_lens = data_of<const int32_t>(len_t);
  const int32_t* table = data_of<const int32_t>(table_t);
  score_kernel<<<dim3(static_cast<unsigned>(max_pages), static_cast<unsigned>(batch)), 256, 0, stream>>>(
      data_of<const uint8_t>(q_t), data_of<const uint8_t>(k_t), data_of<const float>(w_t), seq_lens, table,
      static_cast<int>(max_pages), num_pages, g_scores);
  topk_kernel<<<static_cast<unsigned>(batch), 1024, smem, stream>>>(g_scores, seq_lens, table,
                                                                    static_cast<int>(max_pages), sort_len,
                                                                    data_of<int32_t>(out_t));
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
