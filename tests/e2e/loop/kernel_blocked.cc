// Scripted writer, round 4: i-k-j order with four rows of C per pass, so each loaded row of B feeds
// four vectorised multiply-adds. Each C element still sums its k terms in order.
#include <dlpack/dlpack.h>
#include <stdint.h>

namespace {
bool is_f32(const DLTensor& t) {
  return t.device.device_type == kDLCPU && t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
}
template <class T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int run(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs,
                                                          int64_t num_outputs, void* stream) {
  (void)stream;
  if (num_inputs != 2 || num_outputs != 1) return 1;
  if (!is_f32(inputs[0]) || !is_f32(inputs[1]) || !is_f32(outputs[0])) return 2;
  if (inputs[0].ndim != 2 || inputs[1].ndim != 2 || outputs[0].ndim != 2) return 3;
  const int64_t M = inputs[0].shape[0], K = inputs[0].shape[1], N = inputs[1].shape[1];
  if (inputs[1].shape[0] != K || outputs[0].shape[0] != M || outputs[0].shape[1] != N) return 3;
  const float* __restrict A = data_of<const float>(inputs[0]);
  const float* __restrict B = data_of<const float>(inputs[1]);
  float* __restrict C = data_of<float>(outputs[0]);
  for (int64_t j = 0; j < M * N; ++j) C[j] = 0.0f;
  int64_t i = 0;
  for (; i + 4 <= M; i += 4) {
    float* __restrict c0 = C + (i + 0) * N;
    float* __restrict c1 = C + (i + 1) * N;
    float* __restrict c2 = C + (i + 2) * N;
    float* __restrict c3 = C + (i + 3) * N;
    for (int64_t k = 0; k < K; ++k) {
      const float a0 = A[(i + 0) * K + k], a1 = A[(i + 1) * K + k];
      const float a2 = A[(i + 2) * K + k], a3 = A[(i + 3) * K + k];
      const float* __restrict b = B + k * N;
      for (int64_t j = 0; j < N; ++j) {
        const float bj = b[j];
        c0[j] += a0 * bj;
        c1[j] += a1 * bj;
        c2[j] += a2 * bj;
        c3[j] += a3 * bj;
      }
    }
  }
  for (; i < M; ++i) {
    float* __restrict c = C + i * N;
    for (int64_t k = 0; k < K; ++k) {
      const float a = A[i * K + k];
      const float* __restrict b = B + k * N;
      for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
    }
  }
  return 0;
}
