// Scripted writer, round 1: four output columns per pass, scalar. Four independent accumulators
// instead of one dependency chain, and each step reads four adjacent floats of a B row instead of
// one. Each C element still sums its k terms in order (the same result as the naive kernel).
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

extern "C" __attribute__((visibility("default"), optimize("no-tree-vectorize"))) int run(
    const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs, void* stream) {
  (void)stream;
  if (num_inputs != 2 || num_outputs != 1) return 1;
  if (!is_f32(inputs[0]) || !is_f32(inputs[1]) || !is_f32(outputs[0])) return 2;
  if (inputs[0].ndim != 2 || inputs[1].ndim != 2 || outputs[0].ndim != 2) return 3;
  const int64_t M = inputs[0].shape[0], K = inputs[0].shape[1], N = inputs[1].shape[1];
  if (inputs[1].shape[0] != K || outputs[0].shape[0] != M || outputs[0].shape[1] != N) return 3;
  const float* __restrict A = data_of<const float>(inputs[0]);
  const float* __restrict B = data_of<const float>(inputs[1]);
  float* __restrict C = data_of<float>(outputs[0]);
  for (int64_t i = 0; i < M; ++i) {
    const float* __restrict a = A + i * K;
    int64_t j = 0;
    for (; j + 4 <= N; j += 4) {
      float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
      for (int64_t k = 0; k < K; ++k) {
        const float* __restrict b = B + k * N + j;
        c0 += a[k] * b[0];
        c1 += a[k] * b[1];
        c2 += a[k] * b[2];
        c3 += a[k] * b[3];
      }
      C[i * N + j] = c0;
      C[i * N + j + 1] = c1;
      C[i * N + j + 2] = c2;
      C[i * N + j + 3] = c3;
    }
    for (; j < N; ++j) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc += a[k] * B[k * N + j];
      C[i * N + j] = acc;
    }
  }
  return 0;
}
