// CPU reference for dsa_topk_indexer_fp8_h64_d128_topk2048_ps64 (kda ABI, host tensors).
// Exact spec math (contest-kernels.md §3.1) in double precision: per row b with L = seq_lens[b], token j lives on
// page block_table[b, j/64], slot j%64; score(j) = sum_h weights[b,h] * relu(sum_d q[b,h,d] * K(page, slot, d)),
// K = e4m3(byte) * fp32 scale of the token (deep_gemm packing: 64x128 fp8 bytes token-major, then 64 fp32
// scales). The min(2048, L) best tokens are emitted as page*64+slot in descending score order (ties: lower j
// first), the rest of the row is -1. A row with L = 0 is all -1.
// Returns 0 on success, 1 on a malformed call (arity, dtype, shape), 2 on out-of-range seq_lens/block_table.
#include <dlpack/dlpack.h>
#include <stdint.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace {

constexpr int64_t kHeads = 64;
constexpr int64_t kDim = 128;
constexpr int64_t kPageSize = 64;
constexpr int64_t kTopk = 2048;
constexpr int64_t kPageBytes = kPageSize * 132;  // 8448
constexpr int64_t kScaleOffset = kPageSize * kDim;  // 8192

double e4m3_to_double(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0xF, man = b & 0x7;
  if (exp == 0xF && man == 0x7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = exp == 0 ? std::ldexp(man, -9) : std::ldexp(8 + man, exp - 10);
  return sign ? -mag : mag;
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
  if (num_inputs != 5 || num_outputs != 1) return 1;
  const DLTensor &q_t = inputs[0], &k_t = inputs[1], &w_t = inputs[2], &len_t = inputs[3], &table_t = inputs[4];
  DLTensor& out_t = outputs[0];
  if (!has_type(q_t, 10, 8) || !has_type(k_t, kDLInt, 8) || !has_type(w_t, kDLFloat, 32) ||
      !has_type(len_t, kDLInt, 32) || !has_type(table_t, kDLInt, 32) || !has_type(out_t, kDLInt, 32))
    return 1;
  if (q_t.ndim != 3 || k_t.ndim != 4 || table_t.ndim != 2) return 1;
  const int64_t batch = q_t.shape[0], num_pages = k_t.shape[0], max_pages = table_t.shape[1];
  if (!has_shape(q_t, {batch, kHeads, kDim}) || !has_shape(k_t, {num_pages, kPageSize, 1, 132}) ||
      !has_shape(w_t, {batch, kHeads}) || !has_shape(len_t, {batch}) || !has_shape(table_t, {batch, max_pages}) ||
      !has_shape(out_t, {batch, kTopk}))
    return 1;

  const uint8_t* q = data_of<uint8_t>(q_t);
  const uint8_t* cache = data_of<uint8_t>(k_t);
  const float* weights = data_of<float>(w_t);
  const int32_t* seq_lens = data_of<int32_t>(len_t);
  const int32_t* table = data_of<int32_t>(table_t);
  int32_t* out = reinterpret_cast<int32_t*>(static_cast<char*>(out_t.data) + out_t.byte_offset);

  std::vector<double> qd(kHeads * kDim), kd(kDim), scores;
  std::vector<int64_t> order;
  for (int64_t b = 0; b < batch; ++b) {
    int32_t* row_out = out + b * kTopk;
    std::fill(row_out, row_out + kTopk, -1);
    const int64_t len = seq_lens[b];
    if (len < 0 || len > max_pages * kPageSize) return 2;
    if (len == 0) continue;
    for (int64_t i = 0; i < kHeads * kDim; ++i) qd[i] = e4m3_to_double(q[b * kHeads * kDim + i]);
    scores.assign(len, 0.0);
    for (int64_t j = 0; j < len; ++j) {
      const int64_t page = table[b * max_pages + j / kPageSize], slot = j % kPageSize;
      if (page < 0 || page >= num_pages) return 2;
      const uint8_t* page_bytes = cache + page * kPageBytes;
      float scale;
      std::memcpy(&scale, page_bytes + kScaleOffset + 4 * slot, sizeof scale);  // little-endian fp32
      for (int64_t d = 0; d < kDim; ++d) kd[d] = e4m3_to_double(page_bytes[kDim * slot + d]) * scale;
      double score = 0.0;
      for (int64_t h = 0; h < kHeads; ++h) {
        double dot = 0.0;
        for (int64_t d = 0; d < kDim; ++d) dot += qd[h * kDim + d] * kd[d];
        score += static_cast<double>(weights[b * kHeads + h]) * std::max(dot, 0.0);
      }
      scores[j] = score;
    }
    const int64_t k = std::min(kTopk, len);
    order.resize(len);
    for (int64_t j = 0; j < len; ++j) order[j] = j;
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t x, int64_t y) {
      return scores[x] > scores[y] || (scores[x] == scores[y] && x < y);
    });
    for (int64_t i = 0; i < k; ++i) {
      const int64_t j = order[i];
      row_out[i] = static_cast<int32_t>(table[b * max_pages + j / kPageSize] * kPageSize + j % kPageSize);
    }
  }
  return 0;
}
