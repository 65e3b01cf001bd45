// GPU reference for dsa_topk_indexer_fp8_h64_d128_topk2048_ps64 (kda ABI, CUDA tensors, launches on `stream`).
// The simplest correct fp32 form of the spec math (contest-kernels.md §3.1), no tricks:
//   1. one thread per (row b, token j < L): score(j) = sum_h w[b,h] * relu(sum_d q[b,h,d] * K(j,d)), with
//      K = e4m3(byte) * fp32 scale of the token (deep_gemm page packing), into a stream-ordered scratch buffer;
//   2. one thread per (row b, position p): a token's output position is its rank (number of tokens with a higher
//      score, or an equal score and a lower j); ranks < min(2048, L) write page*64+slot there, and positions
//      [min(2048, L), 2048) get -1. Every output element is written exactly once.
// Returns 0 on success, 1 on a malformed call (arity, dtype, shape), 3 on a CUDA error.
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

__device__ float e4m3_to_float(uint8_t b) {
  const int exp = (b >> 3) & 0xF, man = b & 0x7;
  if (exp == 0xF && man == 0x7) return __int_as_float(0x7FC00000);
  const float mag = exp == 0 ? ldexpf(static_cast<float>(man), -9) : ldexpf(static_cast<float>(8 + man), exp - 10);
  return (b & 0x80) ? -mag : mag;
}

__global__ void score_kernel(const uint8_t* q, const uint8_t* cache, const float* weights, const int32_t* seq_lens,
                             const int32_t* table, int max_pages, int64_t num_pages, float* scores) {
  const int b = blockIdx.y;
  const int64_t row_len = static_cast<int64_t>(max_pages) * kPageSize;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int len = seq_lens[b];
  if (j >= len || j >= row_len) return;
  const int64_t page = table[static_cast<int64_t>(b) * max_pages + j / kPageSize];
  const int slot = static_cast<int>(j % kPageSize);
  float score;
  if (page < 0 || page >= num_pages) {
    score = __int_as_float(0x7FC00000);  // a bad block table makes the reference visibly wrong
  } else {
    const uint8_t* page_bytes = cache + page * kPageBytes;
    const float scale = reinterpret_cast<const float*>(page_bytes + kScaleOffset)[slot];
    score = 0.0f;
    for (int h = 0; h < kHeads; ++h) {
      float dot = 0.0f;
      for (int d = 0; d < kDim; ++d) {
        const float k = e4m3_to_float(page_bytes[kDim * slot + d]) * scale;
        dot += e4m3_to_float(q[(static_cast<int64_t>(b) * kHeads + h) * kDim + d]) * k;
      }
      score += weights[b * kHeads + h] * fmaxf(dot, 0.0f);
    }
  }
  scores[b * row_len + j] = score;
}

__global__ void rank_kernel(const float* scores, const int32_t* seq_lens, const int32_t* table, int max_pages,
                            int32_t* out) {
  const int b = blockIdx.y;
  const int64_t row_len = static_cast<int64_t>(max_pages) * kPageSize;
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t len = seq_lens[b];
  if (len < 0) len = 0;
  if (len > row_len) len = row_len;
  const int64_t k = len < kTopk ? len : kTopk;
  if (p >= k && p < kTopk) out[static_cast<int64_t>(b) * kTopk + p] = -1;
  if (p >= len) return;
  const float* row = scores + b * row_len;
  const float mine = row[p];
  int64_t rank = 0;
  for (int64_t i = 0; i < len; ++i) {
    const float other = row[i];
    rank += (other > mine || (other == mine && i < p)) ? 1 : 0;
  }
  if (rank < k) {
    const int64_t page = table[static_cast<int64_t>(b) * max_pages + p / kPageSize];
    out[static_cast<int64_t>(b) * kTopk + rank] = static_cast<int32_t>(page * kPageSize + p % kPageSize);
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
  if (batch > 65535 || max_pages < 1) return 1;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const int64_t row_len = max_pages * kPageSize;

  float* scores = nullptr;
  if (cudaMallocAsync(&scores, static_cast<size_t>(batch * row_len) * sizeof(float), stream) != cudaSuccess) return 3;
  const int threads = 128;
  score_kernel<<<dim3(static_cast<unsigned>((row_len + threads - 1) / threads), static_cast<unsigned>(batch)),
                 threads, 0, stream>>>(data_of<const uint8_t>(q_t), data_of<const uint8_t>(k_t),
                                       data_of<const float>(w_t), data_of<const int32_t>(len_t),
                                       data_of<const int32_t>(table_t), static_cast<int>(max_pages), num_pages,
                                       scores);
  const int64_t positions = row_len > kTopk ? row_len : kTopk;
  rank_kernel<<<dim3(static_cast<unsigned>((positions + threads - 1) / threads), static_cast<unsigned>(batch)),
                threads, 0, stream>>>(scores, data_of<const int32_t>(len_t), data_of<const int32_t>(table_t),
                                      static_cast<int>(max_pages), data_of<int32_t>(out_t));
  cudaFreeAsync(scores, stream);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
