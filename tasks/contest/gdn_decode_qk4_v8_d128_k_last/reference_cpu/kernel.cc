// CPU reference of gdn_decode_qk4_v8_d128_k_last (kda ABI, host tensors). Exact spec math (contest-kernels.md
// §3.3) in the per-row form, accumulated in double: gates, decay, u = k.S', rank-1 delta update, o = scale q.S_new.
// Shapes are read from the tensors (heads and head size too), so tests can run it on reduced sizes.
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
  if (num_inputs != 9 || num_outputs != 2) return 1;
  const DLTensor &q = inputs[0], &k = inputs[1], &v = inputs[2], &state = inputs[3], &A_log = inputs[4],
                 &a = inputs[5], &dt_bias = inputs[6], &b = inputs[7];
  DLTensor &output = outputs[0], &new_state = outputs[1];
  if (!is(q, kDLBfloat, 16, 4) || !is(k, kDLBfloat, 16, 4) || !is(v, kDLBfloat, 16, 4) ||
      !is(state, kDLFloat, 32, 4) || !is(A_log, kDLFloat, 32, 1) || !is(a, kDLBfloat, 16, 3) ||
      !is(dt_bias, kDLFloat, 32, 1) || !is(b, kDLBfloat, 16, 3) || !is(output, kDLBfloat, 16, 4) ||
      !is(new_state, kDLFloat, 32, 4))
    return 2;
  const int64_t B = q.shape[0], HQ = q.shape[2], K = q.shape[3], HV = v.shape[2], V = v.shape[3];
  if (q.shape[1] != 1 || HQ <= 0 || HV % HQ != 0 || state.shape[2] != V || state.shape[3] != K) return 2;
  double scale = scalar_value(inputs[8]);
  if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(K));
  const int64_t rep = HV / HQ;

  const uint16_t *qp = ptr<uint16_t>(q), *kp = ptr<uint16_t>(k), *vp = ptr<uint16_t>(v), *ap = ptr<uint16_t>(a),
                 *bp = ptr<uint16_t>(b);
  const float *sp = ptr<float>(state), *alog = ptr<float>(A_log), *dtb = ptr<float>(dt_bias);
  uint16_t* op = ptr<uint16_t>(output);
  float* nsp = ptr<float>(new_state);

  std::vector<double> qv(K), kv(K), x(K);
  for (int64_t bi = 0; bi < B; ++bi) {
    for (int64_t h = 0; h < HV; ++h) {
      const int64_t i = h / rep;  // GVA: repeat-interleave
      const double ah = bf16_to_float(ap[bi * HV + h]);
      const double bh = bf16_to_float(bp[bi * HV + h]);
      const double g = std::exp(-std::exp(static_cast<double>(alog[h])) * softplus(ah + dtb[h]));
      const double beta = 1.0 / (1.0 + std::exp(-bh));
      for (int64_t c = 0; c < K; ++c) {
        qv[c] = bf16_to_float(qp[(bi * HQ + i) * K + c]);
        kv[c] = bf16_to_float(kp[(bi * HQ + i) * K + c]);
      }
      for (int64_t r = 0; r < V; ++r) {
        const float* row = sp + ((bi * HV + h) * V + r) * K;
        double u = 0.0;
        for (int64_t c = 0; c < K; ++c) {
          x[c] = g * row[c];
          u += kv[c] * x[c];
        }
        const double delta = beta * (bf16_to_float(vp[(bi * HV + h) * V + r]) - u);
        double o = 0.0;
        float* out_row = nsp + ((bi * HV + h) * V + r) * K;
        for (int64_t c = 0; c < K; ++c) {
          x[c] += delta * kv[c];
          out_row[c] = static_cast<float>(x[c]);
          o += qv[c] * x[c];
        }
        op[(bi * HV + h) * V + r] = float_to_bf16(static_cast<float>(scale * o));
      }
    }
  }
  return 0;
}
