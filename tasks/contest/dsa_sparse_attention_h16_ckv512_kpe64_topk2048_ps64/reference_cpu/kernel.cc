// CPU reference for dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64 (kda ABI, host tensors).
// Exact spec math (contest-kernels.md §3.2) in double precision, per token t and head h over J = the entries of
// sparse_indices[t] that are != -1 (at any position, duplicates counted): s_j = sm_scale * (q_nope . ckv[r_j] +
// q_pe . kpe[r_j]); lse = (max s + ln sum exp(s - max s)) / ln 2 (base 2); output = sum softmax(s)_j ckv[r_j],
// rounded to bf16 (nearest even). An empty J gives output 0 and lse -inf.
// Returns 0 on success, 1 on a malformed call (arity, dtype, shape), 2 on an index outside [-1, num_pages*64).
#include <dlpack/dlpack.h>
#include <stdint.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace {

constexpr int64_t kHeads = 16;
constexpr int64_t kCkv = 512;
constexpr int64_t kKpe = 64;
constexpr int64_t kPageSize = 64;
constexpr int64_t kTopk = 2048;

double bf16_to_double(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;  // NaN
  bits += 0x7FFFu + ((bits >> 16) & 1u);                    // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
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
const T* data_of(const DLTensor& t) {
  return reinterpret_cast<const T*>(static_cast<const char*>(t.data) + t.byte_offset);
}

}  // namespace

extern "C" int run(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs,
                   void* stream) {
  (void)stream;
  if (num_inputs != 6 || num_outputs != 2) return 1;
  const DLTensor &qn_t = inputs[0], &qp_t = inputs[1], &ckv_t = inputs[2], &kpe_t = inputs[3], &idx_t = inputs[4],
                 &scale_t = inputs[5];
  DLTensor &out_t = outputs[0], &lse_t = outputs[1];
  if (!has_type(qn_t, kDLBfloat, 16) || !has_type(qp_t, kDLBfloat, 16) || !has_type(ckv_t, kDLBfloat, 16) ||
      !has_type(kpe_t, kDLBfloat, 16) || !has_type(idx_t, kDLInt, 32) || !has_type(out_t, kDLBfloat, 16) ||
      !has_type(lse_t, kDLFloat, 32))
    return 1;
  double sm_scale;
  if (has_type(scale_t, kDLFloat, 32)) {
    sm_scale = *data_of<float>(scale_t);
  } else if (has_type(scale_t, kDLFloat, 64)) {
    sm_scale = *data_of<double>(scale_t);
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

  const uint16_t* q_nope = data_of<uint16_t>(qn_t);
  const uint16_t* q_pe = data_of<uint16_t>(qp_t);
  const uint16_t* ckv = data_of<uint16_t>(ckv_t);
  const uint16_t* kpe = data_of<uint16_t>(kpe_t);
  const int32_t* indices = data_of<int32_t>(idx_t);
  uint16_t* out = reinterpret_cast<uint16_t*>(static_cast<char*>(out_t.data) + out_t.byte_offset);
  float* lse = reinterpret_cast<float*>(static_cast<char*>(lse_t.data) + lse_t.byte_offset);
  const int64_t num_rows = num_pages * kPageSize;

  std::vector<int64_t> rows;
  std::vector<double> q(kCkv + kKpe), s, acc(kCkv);
  for (int64_t t = 0; t < tokens; ++t) {
    rows.clear();
    for (int64_t i = 0; i < kTopk; ++i) {
      const int64_t r = indices[t * kTopk + i];
      if (r == -1) continue;
      if (r < 0 || r >= num_rows) return 2;
      rows.push_back(r);
    }
    for (int64_t h = 0; h < kHeads; ++h) {
      uint16_t* o = out + (t * kHeads + h) * kCkv;
      if (rows.empty()) {
        std::memset(o, 0, kCkv * sizeof(uint16_t));
        lse[t * kHeads + h] = -std::numeric_limits<float>::infinity();
        continue;
      }
      for (int64_t d = 0; d < kCkv; ++d) q[d] = bf16_to_double(q_nope[(t * kHeads + h) * kCkv + d]);
      for (int64_t d = 0; d < kKpe; ++d) q[kCkv + d] = bf16_to_double(q_pe[(t * kHeads + h) * kKpe + d]);
      s.assign(rows.size(), 0.0);
      double m = -std::numeric_limits<double>::infinity();
      for (size_t j = 0; j < rows.size(); ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < kCkv; ++d) dot += q[d] * bf16_to_double(ckv[rows[j] * kCkv + d]);
        for (int64_t d = 0; d < kKpe; ++d) dot += q[kCkv + d] * bf16_to_double(kpe[rows[j] * kKpe + d]);
        s[j] = sm_scale * dot;
        if (s[j] > m) m = s[j];
      }
      double z = 0.0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (size_t j = 0; j < rows.size(); ++j) {
        const double p = std::exp(s[j] - m);
        z += p;
        for (int64_t d = 0; d < kCkv; ++d) acc[d] += p * bf16_to_double(ckv[rows[j] * kCkv + d]);
      }
      for (int64_t d = 0; d < kCkv; ++d) o[d] = float_to_bf16(static_cast<float>(acc[d] / z));
      lse[t * kHeads + h] = static_cast<float>((m + std::log(z)) / std::log(2.0));
    }
  }
  return 0;
}
