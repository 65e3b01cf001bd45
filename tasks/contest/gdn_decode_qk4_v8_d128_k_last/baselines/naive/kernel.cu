// Baseline ("naive") of gdn_decode_qk4_v8_d128_k_last: what a competent engineer writes first.
// One block per (batch, value head), 8 warps; each warp walks 16 value rows. A lane holds 4 consecutive key
// columns, so a state row (128 fp32) is one coalesced 512-byte float4 load; the two dot products (u = k.S',
// o = q.S_new) are warp-shuffle reductions. No tensor cores, no pipelining, no cross-head sharing.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>

#include <cstdint>

namespace {

constexpr int kHeadSize = 128;  // K = V = 128 (const axes)
constexpr int kWarps = 8;

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

__global__ void __launch_bounds__(kWarps * 32)
    gdn_decode_naive(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                     const __nv_bfloat16* __restrict__ v, const float* __restrict__ state,
                     const float* __restrict__ A_log, const __nv_bfloat16* __restrict__ a,
                     const float* __restrict__ dt_bias, const __nv_bfloat16* __restrict__ b, float scale,
                     __nv_bfloat16* __restrict__ output, float* __restrict__ new_state, int HQ, int HV) {
  const int h = blockIdx.x % HV;
  const int64_t bi = blockIdx.x / HV;
  const int i = h / (HV / HQ);  // GVA: repeat-interleave
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  const float x = __bfloat162float(a[bi * HV + h]) + dt_bias[h];
  const float sp = x > 20.0f ? x : log1pf(expf(x));
  const float g = expf(-expf(A_log[h]) * sp);
  const float beta = 1.0f / (1.0f + expf(-__bfloat162float(b[bi * HV + h])));

  float kk[4], qq[4];
  for (int j = 0; j < 4; ++j) {
    kk[j] = __bfloat162float(k[(bi * HQ + i) * kHeadSize + lane * 4 + j]);
    qq[j] = __bfloat162float(q[(bi * HQ + i) * kHeadSize + lane * 4 + j]);
  }
  const int64_t head = (bi * HV + h) * kHeadSize;
  for (int r = warp; r < kHeadSize; r += kWarps) {
    const float4 s = reinterpret_cast<const float4*>(state + (head + r) * kHeadSize)[lane];
    float xs[4] = {g * s.x, g * s.y, g * s.z, g * s.w};
    const float u = warp_sum(kk[0] * xs[0] + kk[1] * xs[1] + kk[2] * xs[2] + kk[3] * xs[3]);
    const float delta = beta * (__bfloat162float(v[head + r]) - u);
    for (int j = 0; j < 4; ++j) xs[j] += delta * kk[j];
    reinterpret_cast<float4*>(new_state + (head + r) * kHeadSize)[lane] = make_float4(xs[0], xs[1], xs[2], xs[3]);
    const float o = warp_sum(qq[0] * xs[0] + qq[1] * xs[1] + qq[2] * xs[2] + qq[3] * xs[3]);
    if (lane == 0) output[head + r] = __float2bfloat16_rn(scale * o);
  }
}

}  // namespace

extern "C" int run(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs,
                   void* stream) {
  if (num_inputs != 9 || num_outputs != 2) return 1;
  const DLTensor &q = inputs[0], &k = inputs[1], &v = inputs[2], &state = inputs[3], &A_log = inputs[4],
                 &a = inputs[5], &dt_bias = inputs[6], &b = inputs[7], &scale_t = inputs[8];
  DLTensor &output = outputs[0], &new_state = outputs[1];
  if (!is(q, kDLBfloat, 16, 4) || !is(k, kDLBfloat, 16, 4) || !is(v, kDLBfloat, 16, 4) ||
      !is(state, kDLFloat, 32, 4) || !is(A_log, kDLFloat, 32, 1) || !is(a, kDLBfloat, 16, 3) ||
      !is(dt_bias, kDLFloat, 32, 1) || !is(b, kDLBfloat, 16, 3) || !is(output, kDLBfloat, 16, 4) ||
      !is(new_state, kDLFloat, 32, 4) || !is(scale_t, kDLFloat, 32, 0))
    return 2;
  const int64_t B = q.shape[0];
  const int HQ = static_cast<int>(q.shape[2]), HV = static_cast<int>(v.shape[2]);
  if (q.shape[3] != kHeadSize || v.shape[3] != kHeadSize || HV % HQ != 0) return 2;
  float scale = *ptr<float>(scale_t);  // host scalar
  if (scale == 0.0f) scale = 0.08838834764831843f;
  if (B == 0) return 0;
  gdn_decode_naive<<<static_cast<unsigned>(B * HV), kWarps * 32, 0, static_cast<cudaStream_t>(stream)>>>(
      ptr<__nv_bfloat16>(q), ptr<__nv_bfloat16>(k), ptr<__nv_bfloat16>(v), ptr<float>(state), ptr<float>(A_log),
      ptr<__nv_bfloat16>(a), ptr<float>(dt_bias), ptr<__nv_bfloat16>(b), scale, ptr<__nv_bfloat16>(output),
      ptr<float>(new_state), HQ, HV);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
