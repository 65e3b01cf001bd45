// GPU reference for dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64 (kda ABI, CUDA tensors, on `stream`).
// The simplest correct fp32 form of the spec math (contest-kernels.md §3.2), no tricks: one block per
// (token, head); each thread computes whole 576-long logits for its share of the 2048 entries (entries == -1 are
// skipped wherever they occur, duplicates count), block reductions give the max and the sum, and each thread
// accumulates whole output dimensions over all valid entries. lse = (m + ln Z) / ln 2 (base 2); a row without
// valid entries gets output 0 and lse -inf. An index outside [-1, num_pages*64) makes the row NaN (visible).
// Returns 0 on success, 1 on a malformed call (arity, dtype, shape), 3 on a CUDA error.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <stdint.h>

namespace {

constexpr int kHeads = 16;
constexpr int kCkv = 512;
constexpr int kKpe = 64;
constexpr int kPageSize = 64;
constexpr int kTopk = 2048;
constexpr int kThreads = 256;

__device__ float block_reduce(float v, float* red, bool is_max) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = is_max ? fmaxf(red[threadIdx.x], red[threadIdx.x + s])
                                                   : red[threadIdx.x] + red[threadIdx.x + s];
    __syncthreads();
  }
  const float r = red[0];
  __syncthreads();
  return r;
}

__global__ void __launch_bounds__(kThreads) attention_kernel(const __nv_bfloat16* q_nope, const __nv_bfloat16* q_pe,
                                                             const __nv_bfloat16* ckv, const __nv_bfloat16* kpe,
                                                             const int32_t* indices, float sm_scale,
                                                             int64_t num_rows, __nv_bfloat16* out, float* lse) {
  __shared__ float q[kCkv + kKpe];
  __shared__ float s[kTopk];
  __shared__ int64_t rows[kTopk];
  __shared__ float red[kThreads];
  const int64_t t = blockIdx.x / kHeads;
  const int h = blockIdx.x % kHeads, tid = threadIdx.x;
  for (int d = tid; d < kCkv; d += kThreads) q[d] = __bfloat162float(q_nope[(t * kHeads + h) * kCkv + d]);
  for (int d = tid; d < kKpe; d += kThreads) q[kCkv + d] = __bfloat162float(q_pe[(t * kHeads + h) * kKpe + d]);
  float bad = 0.0f, count = 0.0f;
  for (int j = tid; j < kTopk; j += kThreads) {
    const int64_t r = indices[t * kTopk + j];
    rows[j] = (r >= 0 && r < num_rows) ? r : -1;
    if (r != -1 && rows[j] == -1) bad = 1.0f;
    if (rows[j] >= 0) count += 1.0f;
  }
  __syncthreads();
  float local_max = -INFINITY;
  for (int j = tid; j < kTopk; j += kThreads) {
    if (rows[j] < 0) continue;
    float dot = 0.0f;
    for (int d = 0; d < kCkv; ++d) dot += q[d] * __bfloat162float(ckv[rows[j] * kCkv + d]);
    for (int d = 0; d < kKpe; ++d) dot += q[kCkv + d] * __bfloat162float(kpe[rows[j] * kKpe + d]);
    s[j] = sm_scale * dot;
    local_max = fmaxf(local_max, s[j]);
  }
  const float m = block_reduce(local_max, red, true);
  const float total = block_reduce(count, red, false);
  const float any_bad = block_reduce(bad, red, true);
  __nv_bfloat16* o = out + (t * kHeads + h) * kCkv;
  if (any_bad > 0.0f || total == 0.0f) {
    const float fill = any_bad > 0.0f ? __int_as_float(0x7FC00000) : 0.0f;
    for (int d = tid; d < kCkv; d += kThreads) o[d] = __float2bfloat16_rn(fill);
    if (tid == 0) lse[t * kHeads + h] = any_bad > 0.0f ? fill : -INFINITY;
    return;
  }
  float local_sum = 0.0f;
  for (int j = tid; j < kTopk; j += kThreads) {
    if (rows[j] < 0) continue;
    s[j] = expf(s[j] - m);
    local_sum += s[j];
  }
  const float z = block_reduce(local_sum, red, false);  // also orders the writes to s[] before the reads below
  for (int d = tid; d < kCkv; d += kThreads) {
    float acc = 0.0f;
    for (int j = 0; j < kTopk; ++j)
      if (rows[j] >= 0) acc += s[j] * __bfloat162float(ckv[rows[j] * kCkv + d]);
    o[d] = __float2bfloat16_rn(acc / z);
  }
  if (tid == 0) lse[t * kHeads + h] = (m + logf(z)) / logf(2.0f);
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
  if (num_inputs != 6 || num_outputs != 2) return 1;
  const DLTensor &qn_t = inputs[0], &qp_t = inputs[1], &ckv_t = inputs[2], &kpe_t = inputs[3], &idx_t = inputs[4],
                 &scale_t = inputs[5];
  const DLTensor &out_t = outputs[0], &lse_t = outputs[1];
  if (!has_type(qn_t, kDLBfloat, 16) || !has_type(qp_t, kDLBfloat, 16) || !has_type(ckv_t, kDLBfloat, 16) ||
      !has_type(kpe_t, kDLBfloat, 16) || !has_type(idx_t, kDLInt, 32) || !has_type(out_t, kDLBfloat, 16) ||
      !has_type(lse_t, kDLFloat, 32))
    return 1;
  float sm_scale;
  if (has_type(scale_t, kDLFloat, 32)) {
    sm_scale = *data_of<const float>(scale_t);  // 0-d host tensor
  } else if (has_type(scale_t, kDLFloat, 64)) {
    sm_scale = static_cast<float>(*data_of<const double>(scale_t));
  } else {
    return 1;
  }
  if (qn_t.ndim != 3 || ckv_t.ndim != 3) return 1;
  const int64_t tokens = qn_t.shape[0], num_pages = ckv_t.shape[0];
  if (!has_shape(qn_t, {tokens, kHeads, kCkv}) || !has_shape(qp_t, {tokens, kHeads, kKpe}) ||
      !has_shape(ckv_t, {num_pages, kPageSize, kCkv}) || !has_shape(kpe_t, {num_pages, kPageSize, kKpe}) ||
      !has_shape(idx_t, {tokens, kTopk}) || !has_shape(out_t, {tokens, kHeads, kCkv}) ||
      !has_shape(lse_t, {tokens, kHeads}))
    return 1;
  if (tokens == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  attention_kernel<<<static_cast<unsigned>(tokens * kHeads), kThreads, 0, stream>>>(
      data_of<const __nv_bfloat16>(qn_t), data_of<const __nv_bfloat16>(qp_t), data_of<const __nv_bfloat16>(ckv_t),
      data_of<const __nv_bfloat16>(kpe_t), data_of<const int32_t>(idx_t), sm_scale, num_pages * kPageSize,
      data_of<__nv_bfloat16>(out_t), data_of<float>(lse_t));
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
