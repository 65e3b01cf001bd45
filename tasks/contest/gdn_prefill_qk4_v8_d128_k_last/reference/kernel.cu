// GPU reference of gdn_prefill_qk4_v8_d128_k_last: the spec's math in plain fp32, one thread per
// (sequence, value head, value row). The thread copies its state row into new_state and updates it there,
// token by token. Quirk kept: an empty sequence gets new_state = 0. No tricks: it is the correctness oracle.
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

__global__ void gdn_prefill_reference(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                      const float* state, const float* A_log, const __nv_bfloat16* a,
                                      const float* dt_bias, const __nv_bfloat16* b, const int64_t* cu_seqlens,
                                      float scale, __nv_bfloat16* output, float* new_state, int64_t N, int HQ,
                                      int HV, int K, int V) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= N * HV * V) return;
  const int r = static_cast<int>(idx % V);
  const int h = static_cast<int>((idx / V) % HV);
  const int64_t n = idx / (static_cast<int64_t>(V) * HV);
  const int i = h / (HV / HQ);  // GVA: repeat-interleave
  const int64_t begin = cu_seqlens[n], end = cu_seqlens[n + 1];

  const float* row = state + ((n * HV + h) * V + r) * K;
  float* x = new_state + ((n * HV + h) * V + r) * K;
  if (end <= begin) {  // quirk: empty sequence -> zero state
    for (int c = 0; c < K; ++c) x[c] = 0.0f;
    return;
  }
  for (int c = 0; c < K; ++c) x[c] = row[c];
  for (int64_t t = begin; t < end; ++t) {
    const float xa = __bfloat162float(a[t * HV + h]) + dt_bias[h];
    const float sp = xa > 20.0f ? xa : log1pf(expf(xa));
    const float g = expf(-expf(A_log[h]) * sp);
    const float beta = 1.0f / (1.0f + expf(-__bfloat162float(b[t * HV + h])));
    const __nv_bfloat16* kr = k + (t * HQ + i) * K;
    const __nv_bfloat16* qr = q + (t * HQ + i) * K;
    float u = 0.0f;
    for (int c = 0; c < K; ++c) {
      x[c] = g * x[c];
      u += __bfloat162float(kr[c]) * x[c];
    }
    const float delta = beta * (__bfloat162float(v[(t * HV + h) * V + r]) - u);
    float o = 0.0f;
    for (int c = 0; c < K; ++c) {
      x[c] = x[c] + delta * __bfloat162float(kr[c]);
      o += __bfloat162float(qr[c]) * x[c];
    }
    output[(t * HV + h) * V + r] = __float2bfloat16_rn(scale * o);
  }
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
  const int HQ = static_cast<int>(q.shape[1]), K = static_cast<int>(q.shape[2]), HV = static_cast<int>(v.shape[1]),
            V = static_cast<int>(v.shape[2]);
  if (N < 0 || HV % HQ != 0) return 2;
  float scale = *ptr<float>(scale_t);  // host scalar
  if (scale == 0.0f) scale = 1.0f / sqrtf(static_cast<float>(K));
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  // Tokens outside every sequence (none when cu[N] = T) read as 0, like the CPU reference.
  if (T > 0) cudaMemsetAsync(ptr<__nv_bfloat16>(output), 0, static_cast<size_t>(T) * HV * V * 2, s);
  const int64_t total = N * HV * V;
  if (total > 0) {
    const int threads = 128;
    gdn_prefill_reference<<<static_cast<unsigned>((total + threads - 1) / threads), threads, 0, s>>>(
        ptr<__nv_bfloat16>(q), ptr<__nv_bfloat16>(k), ptr<__nv_bfloat16>(v), ptr<float>(state), ptr<float>(A_log),
        ptr<__nv_bfloat16>(a), ptr<float>(dt_bias), ptr<__nv_bfloat16>(b), ptr<int64_t>(cu), scale,
        ptr<__nv_bfloat16>(output), ptr<float>(new_state), N, HQ, HV, K, V);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
