// Baseline ("naive") of gdn_prefill_qk4_v8_d128_k_last: what a competent engineer writes first.
// The exact token-by-token recurrence, parallel over (sequence, value head, value row): value rows are
// independent, so each warp owns one row of the state and keeps it in registers (4 key columns per lane) for
// the whole sequence. Per token: gates, u = k.S' and o = q.S_new as warp-shuffle reductions. Blocks of 4 warps,
// grid N * 8 * 32. No chunking, no tensor cores, no sharing of q/k loads across rows.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>

#include <cstdint>

namespace {

constexpr int kHeadSize = 128;  // K = V = 128 (const axes)
constexpr int kRowsPerBlock = 4;  // one warp per value row

bool is(const DLTensor& t, uint8_t code, uint8_t bits, int ndim) {
  return t.dtype.code == code && t.dtype.bits == bits && t.dtype.lanes == 1 && t.ndim == ndim;
}

template <typename T>
T* ptr(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

__device__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__device__ void load4(const __nv_bfloat16* p, float out[4]) {  // 4 consecutive bf16 (8-byte aligned)
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const __nv_bfloat162 lo = *reinterpret_cast<const __nv_bfloat162*>(&raw.x);
  const __nv_bfloat162 hi = *reinterpret_cast<const __nv_bfloat162*>(&raw.y);
  out[0] = __low2float(lo);
  out[1] = __high2float(lo);
  out[2] = __low2float(hi);
  out[3] = __high2float(hi);
}

__global__ void __launch_bounds__(kRowsPerBlock * 32)
    gdn_prefill_naive(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                      const __nv_bfloat16* __restrict__ v, const float* __restrict__ state,
                      const float* __restrict__ A_log, const __nv_bfloat16* __restrict__ a,
                      const float* __restrict__ dt_bias, const __nv_bfloat16* __restrict__ b,
                      const int64_t* __restrict__ cu_seqlens, float scale, __nv_bfloat16* __restrict__ output,
                      float* __restrict__ new_state, int HQ, int HV) {
  constexpr int kBlocksPerHead = kHeadSize / kRowsPerBlock;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r = (blockIdx.x % kBlocksPerHead) * kRowsPerBlock + warp;
  const int h = (blockIdx.x / kBlocksPerHead) % HV;
  const int64_t n = blockIdx.x / (kBlocksPerHead * HV);
  const int i = h / (HV / HQ);  // GVA: repeat-interleave
  const int64_t begin = cu_seqlens[n], end = cu_seqlens[n + 1];
  const int64_t row = ((n * HV + h) * kHeadSize + r) * kHeadSize;

  if (end <= begin) {  // quirk: empty sequence -> zero state
    reinterpret_cast<float4*>(new_state + row)[lane] = make_float4(0.f, 0.f, 0.f, 0.f);
    return;
  }
  const float4 s0 = reinterpret_cast<const float4*>(state + row)[lane];
  float x[4] = {s0.x, s0.y, s0.z, s0.w};
  const float A = expf(A_log[h]), bias = dt_bias[h];
  for (int64_t t = begin; t < end; ++t) {
    const float xa = __bfloat162float(a[t * HV + h]) + bias;
    const float sp = xa > 20.0f ? xa : log1pf(expf(xa));
    const float g = expf(-A * sp);
    const float beta = 1.0f / (1.0f + expf(-__bfloat162float(b[t * HV + h])));
    float kk[4], qq[4];
    load4(k + (t * HQ + i) * kHeadSize + lane * 4, kk);
    load4(q + (t * HQ + i) * kHeadSize + lane * 4, qq);
    const float vr = __bfloat162float(v[(t * HV + h) * kHeadSize + r]);
    for (int j = 0; j < 4; ++j) x[j] *= g;
    const float u = warp_sum(kk[0] * x[0] + kk[1] * x[1] + kk[2] * x[2] + kk[3] * x[3]);
    const float delta = beta * (vr - u);
    for (int j = 0; j < 4; ++j) x[j] += delta * kk[j];
    const float o = warp_sum(qq[0] * x[0] + qq[1] * x[1] + qq[2] * x[2] + qq[3] * x[3]);
    if (lane == 0) output[(t * HV + h) * kHeadSize + r] = __float2bfloat16_rn(scale * o);
  }
  reinterpret_cast<float4*>(new_state + row)[lane] = make_float4(x[0], x[1], x[2], x[3]);
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
  const int64_t N = cu.shape[0] - 1;
  const int HQ = static_cast<int>(q.shape[1]), HV = static_cast<int>(v.shape[1]);
  if (N < 0 || q.shape[2] != kHeadSize || v.shape[2] != kHeadSize || HV % HQ != 0) return 2;
  float scale = *ptr<float>(scale_t);  // host scalar
  if (scale == 0.0f) scale = 0.08838834764831843f;
  if (N == 0) return 0;
  const int64_t blocks = N * HV * (kHeadSize / kRowsPerBlock);
  gdn_prefill_naive<<<static_cast<unsigned>(blocks), kRowsPerBlock * 32, 0, static_cast<cudaStream_t>(stream)>>>(
      ptr<__nv_bfloat16>(q), ptr<__nv_bfloat16>(k), ptr<__nv_bfloat16>(v), ptr<float>(state), ptr<float>(A_log),
      ptr<__nv_bfloat16>(a), ptr<float>(dt_bias), ptr<__nv_bfloat16>(b), ptr<int64_t>(cu), scale,
      ptr<__nv_bfloat16>(output), ptr<float>(new_state), HQ, HV);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
