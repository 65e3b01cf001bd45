// CPU reference of gdn_prefill_qk4_v8_d128_k_last (kda ABI, host tensors). Exact spec math (contest-kernels.md
// §3.4): the decode step applied token by token within each sequence [cu[n], cu[n+1]), per value row, with the
// state carried in double. Quirk kept: a sequence of length <= 0 gets new_state = 0. Shapes are read from the
// tensors, so tests can run it on reduced sizes.
#include <dlpack/dlpack.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_bf16(float f) {  // round to nearest even; NaN stays NaN
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

bool is(const DLTensor& t, uint8_t code, uint8_t bits, int ndim) {
  return t.dtype.code == code && t.dtype.bits == bits && t.dtype.lanes == 1 && t.ndim == ndim;
}

double scalar_value(const DLTensor& t) {
  const char* p = static_cast<const char*>(t.data) + t.byte_offset;
  if (t.dtype.code == kDLFloat && t.dtype.bits == 32) return *reinterpret_cast<const float*>(p);
  if (t.dtype.code == kDLFloat && t.dtype.bits == 64) return *reinterpret_cast<const double*>(p);
  return 0.0;
}

template <typename T>
T* ptr(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

}  // namespace

extern "C" int run(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs, void*) {
  if (num_inputs != 10 || num_outputs != 2) return 1;
  const DLTensor &q = inputs[0], &k = inputs[1], &v = inputs[2], &state = inputs[3], &A_log = inputs[4],
                 &a = inputs[5], &dt_bias = inputs[6], &b = inputs[7], &cu_seqlens = inputs[8];
  DLTensor &output = outputs[0], &new_state = outputs[1];
  if (!is(q, kDLBfloat, 16, 3) || !is(k, kDLBfloat, 16, 3) || !is(v, kDLBfloat, 16, 3) ||
      !is(state, kDLFloat, 32, 4) || !is(A_log, kDLFloat, 32, 1) || !is(a, kDLBfloat, 16, 2) ||
      !is(dt_bias, kDLFloat, 32, 1) || !is(b, kDLBfloat, 16, 2) || !is(cu_seqlens, kDLInt, 64, 1) ||
      !is(output, kDLBfloat, 16, 3) || !is(new_state, kDLFloat, 32, 4))
    return 2;
  const int64_t T = q.shape[0], HQ = q.shape[1], K = q.shape[2], HV = v.shape[1], V = v.shape[2];
  const int64_t N = cu_seqlens.shape[0] - 1;
  if (N < 0 || HQ <= 0 || HV % HQ != 0 || state.shape[0] != N || state.shape[2] != V || state.shape[3] != K)
    return 2;
  double scale = scalar_value(inputs[9]);
  if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(K));
  const int64_t rep = HV / HQ;

  const uint16_t *qp = ptr<uint16_t>(q), *kp = ptr<uint16_t>(k), *vp = ptr<uint16_t>(v), *ap = ptr<uint16_t>(a),
                 *bp = ptr<uint16_t>(b);
  const float *sp = ptr<float>(state), *alog = ptr<float>(A_log), *dtb = ptr<float>(dt_bias);
  const int64_t* cu = ptr<int64_t>(cu_seqlens);
  uint16_t* op = ptr<uint16_t>(output);
  float* nsp = ptr<float>(new_state);

  if (cu[0] != 0) return 2;
  for (int64_t n = 0; n < N; ++n)
    if (cu[n + 1] < cu[n] || cu[n + 1] > T) return 2;

  // Gates per (token, value head), and q/k widened once.
  std::vector<double> g(T * HV), beta(T * HV), qf(T * HQ * K), kf(T * HQ * K);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < HV; ++h) {
      const double x = static_cast<double>(bf16_to_float(ap[t * HV + h])) + dtb[h];
      g[t * HV + h] = std::exp(-std::exp(static_cast<double>(alog[h])) * softplus(x));
      beta[t * HV + h] = 1.0 / (1.0 + std::exp(-static_cast<double>(bf16_to_float(bp[t * HV + h]))));
    }
  for (int64_t i = 0; i < T * HQ * K; ++i) {
    qf[i] = bf16_to_float(qp[i]);
    kf[i] = bf16_to_float(kp[i]);
  }
  for (int64_t i = 0; i < T * HV * V; ++i) op[i] = 0;  // rows outside every sequence (never, when cu[N] = T)

  std::vector<double> x(K);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t begin = cu[n], end = cu[n + 1];
    for (int64_t h = 0; h < HV; ++h) {
      const int64_t i = h / rep;  // GVA: repeat-interleave
      for (int64_t r = 0; r < V; ++r) {
        float* out_row = nsp + ((n * HV + h) * V + r) * K;
        if (end <= begin) {  // quirk: empty sequence -> zero state
          for (int64_t c = 0; c < K; ++c) out_row[c] = 0.0f;
          continue;
        }
        const float* row = sp + ((n * HV + h) * V + r) * K;
        for (int64_t c = 0; c < K; ++c) x[c] = row[c];
        for (int64_t t = begin; t < end; ++t) {
          const double gt = g[t * HV + h], bt = beta[t * HV + h];
          const double* kt = &kf[(t * HQ + i) * K];
          const double* qt = &qf[(t * HQ + i) * K];
          double u = 0.0;
          for (int64_t c = 0; c < K; ++c) {
            x[c] *= gt;
            u += kt[c] * x[c];
          }
          const double delta = bt * (bf16_to_float(vp[(t * HV + h) * V + r]) - u);
          double o = 0.0;
          for (int64_t c = 0; c < K; ++c) {
            x[c] += delta * kt[c];
            o += qt[c] * x[c];
          }
          op[(t * HV + h) * V + r] = float_to_bf16(static_cast<float>(scale * o));
        }
        for (int64_t c = 0; c < K; ++c) out_row[c] = static_cast<float>(x[c]);
      }
    }
  }
  return 0;
}
