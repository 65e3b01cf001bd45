// Tunable GEMM for host_gemm_f32, C = A * B (kda tune, tunables.toml). Every configuration is
// correct on every shape (tiles clip at the edges).
//   variant "tiled" (kernel.cc::run): cache tiles TILE_M x TILE_N over a K panel of TILE_K, i-k-j
//     order inside a tile so the innermost loop streams rows of B and C (vectorisable).
//   variant "dot" (kernel.cc::run_dot): i-j-k dot products over B transposed into a scratch row
//     block of TILE_N columns, DOT_UNROLL accumulators.
#include <dlpack/dlpack.h>
#include <stdint.h>

#ifndef TILE_M
#define TILE_M 32
#endif
#ifndef TILE_N
#define TILE_N 64
#endif
#ifndef TILE_K
#define TILE_K 64
#endif
#ifndef DOT_UNROLL
#define DOT_UNROLL 4
#endif

namespace {

bool is_f32(const DLTensor& t) {
  return t.device.device_type == kDLCPU && t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
}

template <class T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

int check_gemm(const DLTensor* in, int64_t n_in, const DLTensor* out, int64_t n_out) {
  if (n_in != 2 || n_out != 1) return 1;
  if (!is_f32(in[0]) || !is_f32(in[1]) || !is_f32(out[0])) return 2;
  if (in[0].ndim != 2 || in[1].ndim != 2 || out[0].ndim != 2) return 3;
  if (in[1].shape[0] != in[0].shape[1] || out[0].shape[0] != in[0].shape[0] || out[0].shape[1] != in[1].shape[1])
    return 3;
  return 0;
}

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

void gemm_tiled(const float* __restrict A, const float* __restrict B, float* __restrict C, int64_t M, int64_t N,
                int64_t K) {
  for (int64_t i = 0; i < M * N; ++i) C[i] = 0.0f;
  for (int64_t i0 = 0; i0 < M; i0 += TILE_M)
    for (int64_t k0 = 0; k0 < K; k0 += TILE_K)
      for (int64_t j0 = 0; j0 < N; j0 += TILE_N) {
        const int64_t i1 = min64(i0 + TILE_M, M), k1 = min64(k0 + TILE_K, K), j1 = min64(j0 + TILE_N, N);
        for (int64_t i = i0; i < i1; ++i)
          for (int64_t k = k0; k < k1; ++k) {
            const float a = A[i * K + k];
            const float* __restrict b = B + k * N;
            float* __restrict c = C + i * N;
            for (int64_t j = j0; j < j1; ++j) c[j] += a * b[j];
          }
      }
}

// B's columns j0..j0+TILE_N-1 transposed into bt (TILE_N x K), then dot products.
void gemm_dot(const float* __restrict A, const float* __restrict B, float* __restrict C, int64_t M, int64_t N,
              int64_t K) {
  static thread_local float* bt = nullptr;  // scratch, grown on demand (persistent_state = scratch)
  static thread_local int64_t bt_size = 0;
  if (bt_size < TILE_N * K) {
    delete[] bt;
    bt = new float[TILE_N * K];
    bt_size = TILE_N * K;
  }
  for (int64_t j0 = 0; j0 < N; j0 += TILE_N) {
    const int64_t j1 = min64(j0 + TILE_N, N);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = j0; j < j1; ++j) bt[(j - j0) * K + k] = B[k * N + j];
    for (int64_t i = 0; i < M; ++i) {
      const float* __restrict a = A + i * K;
      for (int64_t j = j0; j < j1; ++j) {
        const float* __restrict b = bt + (j - j0) * K;
        float acc[DOT_UNROLL];
        for (int u = 0; u < DOT_UNROLL; ++u) acc[u] = 0.0f;
        int64_t k = 0;
        for (; k + DOT_UNROLL <= K; k += DOT_UNROLL)
          for (int u = 0; u < DOT_UNROLL; ++u) acc[u] += a[k + u] * b[k + u];
        float s = 0.0f;
        for (int u = 0; u < DOT_UNROLL; ++u) s += acc[u];
        for (; k < K; ++k) s += a[k] * b[k];
        C[i * N + j] = s;
      }
    }
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int run(const DLTensor* inputs, int64_t num_inputs,
                                                          DLTensor* outputs, int64_t num_outputs, void* stream) {
  (void)stream;
  if (int rc = check_gemm(inputs, num_inputs, outputs, num_outputs)) return rc;
  gemm_tiled(data_of<const float>(inputs[0]), data_of<const float>(inputs[1]), data_of<float>(outputs[0]),
             inputs[0].shape[0], inputs[1].shape[1], inputs[0].shape[1]);
  return 0;
}

extern "C" __attribute__((visibility("default"))) int run_dot(const DLTensor* inputs, int64_t num_inputs,
                                                              DLTensor* outputs, int64_t num_outputs, void* stream) {
  (void)stream;
  if (int rc = check_gemm(inputs, num_inputs, outputs, num_outputs)) return rc;
  gemm_dot(data_of<const float>(inputs[0]), data_of<const float>(inputs[1]), data_of<float>(outputs[0]),
           inputs[0].shape[0], inputs[1].shape[1], inputs[0].shape[1]);
  return 0;
}
