// Naive baseline for dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64 (kda ABI): the straightforward CUDA
// version an engineer writes first. One block (8 warps) per (token, head), fp32 math on CUDA cores:
//   1. stage q (576 fp32) and the token's 2048 indices in shared memory;
//   2. logits: warp w takes entries w, w+8, ...; the 32 lanes read the 1152-byte row with 16-byte loads
//      (coalesced), then a shuffle reduction; entries == -1 are skipped wherever they occur;
//   3. block max / sum reductions (shuffles + shared memory), probabilities kept in shared memory;
//   4. output: thread i owns dims 2i, 2i+1 and walks the valid entries (each row read coalesced, 4 B a thread).
// No split over keys: T*16 blocks only, and the 16 heads of a token each re-read the same rows (through L2).
// lse is base 2; a row without valid entries gets output 0 and lse -inf.
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
constexpr int kWarps = kThreads / 32;
constexpr float kLog2e = 1.4426950408889634f;

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}

// Block-wide sum or max; every thread gets the result.
__device__ float block_reduce(float v, float* red, bool is_max) {
  v = is_max ? warp_max(v) : warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < kWarps; ++w) r = is_max ? fmaxf(r, red[w]) : r + red[w];
  __syncthreads();
  return r;
}

// 8 bf16 packed in a uint4 dotted with 8 fp32 from shared memory.
__device__ float dot8(const uint4& packed, const float* q) {
  const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&packed);
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(p[i]);
    acc += f.x * q[2 * i] + f.y * q[2 * i + 1];
  }
  return acc;
}

__global__ void __launch_bounds__(kThreads) attention_kernel(const __nv_bfloat16* __restrict__ q_nope,
                                                             const __nv_bfloat16* __restrict__ q_pe,
                                                             const __nv_bfloat16* __restrict__ ckv,
                                                             const __nv_bfloat16* __restrict__ kpe,
                                                             const int32_t* __restrict__ indices, float sm_scale,
                                                             int64_t num_rows, __nv_bfloat16* __restrict__ out,
                                                             float* __restrict__ lse) {
  __shared__ __align__(16) float q[kCkv + kKpe];
  __shared__ float p[kTopk];
  __shared__ int rows[kTopk];
  __shared__ float red[kWarps];
  const int64_t t = blockIdx.x / kHeads;
  const int h = blockIdx.x % kHeads, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  for (int d = tid; d < kCkv; d += kThreads) q[d] = __bfloat162float(q_nope[(t * kHeads + h) * kCkv + d]);
  for (int d = tid; d < kKpe; d += kThreads) q[kCkv + d] = __bfloat162float(q_pe[(t * kHeads + h) * kKpe + d]);
  float bad = 0.0f, count = 0.0f;
  for (int j = tid; j < kTopk; j += kThreads) {
    const int r = indices[t * kTopk + j];
    const bool valid = r >= 0 && r < num_rows;
    rows[j] = valid ? r : -1;
    bad = (r != -1 && !valid) ? 1.0f : bad;
    count += valid ? 1.0f : 0.0f;
  }
  __syncthreads();

  // Logits, scaled to base 2 so the softmax uses exp2f.
  float local_max = -INFINITY;
  for (int j = warp; j < kTopk; j += kWarps) {
    const int r = rows[j];
    if (r < 0) continue;  // warp-uniform
    const uint4* c = reinterpret_cast<const uint4*>(ckv + static_cast<int64_t>(r) * kCkv);
    float acc = dot8(c[lane], &q[lane * 8]) + dot8(c[32 + lane], &q[256 + lane * 8]);
    const __nv_bfloat162 kp = reinterpret_cast<const __nv_bfloat162*>(kpe + static_cast<int64_t>(r) * kKpe)[lane];
    const float2 kf = __bfloat1622float2(kp);
    acc += kf.x * q[kCkv + 2 * lane] + kf.y * q[kCkv + 2 * lane + 1];
    acc = warp_sum(acc) * (sm_scale * kLog2e);
    if (lane == 0) p[j] = acc;
    local_max = fmaxf(local_max, acc);
  }
  const float m = block_reduce(local_max, red, true);  // the barrier inside also publishes p[]
  const float total = block_reduce(count, red, false);
  const float any_bad = block_reduce(bad, red, true);
  __nv_bfloat16* o = out + (t * kHeads + h) * kCkv;
  if (any_bad > 0.0f || total == 0.0f) {  // block-uniform
    const float fill = any_bad > 0.0f ? __int_as_float(0x7FC00000) : 0.0f;
    for (int d = tid; d < kCkv; d += kThreads) o[d] = __float2bfloat16_rn(fill);
    if (tid == 0) lse[t * kHeads + h] = any_bad > 0.0f ? fill : -INFINITY;
    return;
  }
  float local_sum = 0.0f;
  for (int j = tid; j < kTopk; j += kThreads) {
    if (rows[j] < 0) continue;
    const float e = exp2f(p[j] - m);
    p[j] = e;
    local_sum += e;
  }
  const float z = block_reduce(local_sum, red, false);

  float2 acc = make_float2(0.0f, 0.0f);
  for (int j = 0; j < kTopk; ++j) {
    const int r = rows[j];
    if (r < 0) continue;  // block-uniform
    const float2 v = __bfloat1622float2(
        reinterpret_cast<const __nv_bfloat162*>(ckv + static_cast<int64_t>(r) * kCkv)[tid]);
    acc.x += p[j] * v.x;
    acc.y += p[j] * v.y;
  }
  const float inv = 1.0f / z;
  reinterpret_cast<__nv_bfloat162*>(o)[tid] = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
  if (tid == 0) lse[t * kHeads + h] = m + log2f(z);
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
  if (num_pages * kPageSize > INT32_MAX) return 1;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  attention_kernel<<<static_cast<unsigned>(tokens * kHeads), kThreads, 0, stream>>>(
      data_of<const __nv_bfloat16>(qn_t), data_of<const __nv_bfloat16>(qp_t), data_of<const __nv_bfloat16>(ckv_t),
      data_of<const __nv_bfloat16>(kpe_t), data_of<const int32_t>(idx_t), sm_scale, num_pages * kPageSize,
      data_of<__nv_bfloat16>(out_t), data_of<float>(lse_t));
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
