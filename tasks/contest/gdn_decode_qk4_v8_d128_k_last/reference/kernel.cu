// GPU reference of gdn_decode_qk4_v8_d128_k_last: the spec's per-row math in plain fp32, one thread per
// (batch, value head, value row). No tricks: it is the correctness oracle at full size.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>

#include <cmath>
#include <cstdint>

namespace {

bool is(const DLTensor& t, uint8_t code, uint8_t bits, int ndim) {
  return t.dtype.code == code && t.dtype.bits == bits && t.dtype.lanes == 1 && t.ndim == ndim;
}

template <typename T>
T* ptr(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

__global__ void gdn_decode_reference(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                     const float* state, const float* A_log, const __nv_bfloat16* a,
                                     const float* dt_bias, const __nv_bfloat16* b, float scale,
                                     __nv_bfloat16* output, float* new_state, int64_t B, int HQ, int HV, int K,
                                     int V) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= B * HV * V) return;
  const int r = static_cast<int>(idx % V);
  const int h = static_cast<int>((idx / V) % HV);
  const int64_t bi = idx / (static_cast<int64_t>(V) * HV);
  const int i = h / (HV / HQ);  // GVA: repeat-interleave

  const float x = __bfloat162float(a[bi * HV + h]) + dt_bias[h];
  const float sp = x > 20.0f ? x : log1pf(expf(x));
  const float g = expf(-expf(A_log[h]) * sp);
  const float beta = 1.0f / (1.0f + expf(-__bfloat162float(b[bi * HV + h])));

  const __nv_bfloat16* kr = k + (bi * HQ + i) * K;
  const __nv_bfloat16* qr = q + (bi * HQ + i) * K;
  const float* row = state + ((bi * HV + h) * V + r) * K;
  float* out_row = new_state + ((bi * HV + h) * V + r) * K;

  float u = 0.0f;
  for (int c = 0; c < K; ++c) u += __bfloat162float(kr[c]) * (g * row[c]);
  const float delta = beta * (__bfloat162float(v[(bi * HV + h) * V + r]) - u);
  float o = 0.0f;
  for (int c = 0; c < K; ++c) {
    const float xn = g * row[c] + delta * __bfloat162float(kr[c]);
    out_row[c] = xn;
    o += __bfloat162float(qr[c]) * xn;
  }
  output[(bi * HV + h) * V + r] = __float2bfloat16_rn(scale * o);
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
  const int HQ = static_cast<int>(q.shape[2]), K = static_cast<int>(q.shape[3]), HV = static_cast<int>(v.shape[2]),
            V = static_cast<int>(v.shape[3]);
  if (HV % HQ != 0) return 2;
  float scale = *ptr<float>(scale_t);  // host scalar
  if (scale == 0.0f) scale = 1.0f / sqrtf(static_cast<float>(K));
  const int64_t total = B * HV * V;
  if (total == 0) return 0;
  const int threads = 128;
  const unsigned blocks = static_cast<unsigned>((total + threads - 1) / threads);
  gdn_decode_reference<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(
      ptr<__nv_bfloat16>(q), ptr<__nv_bfloat16>(k), ptr<__nv_bfloat16>(v), ptr<float>(state), ptr<float>(A_log),
      ptr<__nv_bfloat16>(a), ptr<float>(dt_bias), ptr<__nv_bfloat16>(b), scale, ptr<__nv_bfloat16>(output),
      ptr<float>(new_state), B, HQ, HV, K, V);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
