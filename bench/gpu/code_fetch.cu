// What a kernel's code size costs under kda eval's cold L2. kda eval reads 2x the L2 through before every
// timed call (runner/device_inputs.h flush_l2_by_reading), which also evicts the kernel's instructions from
// L2: a small launch whose code runs straight through (loops unrolled) fetches every instruction line from
// memory once, one after another. Session 12 met it in kda's own kernels (the MoE routing kernel, 67 KB of
// code, took 16-17 us for one warp's work at T = 1; GDN prefill's 42 KB wy_prepare about 13 us for any
// small input); this measures it apart from any algorithm.
//
//   code_fetch_bench [--reps N]
//
// Kernels: `straight<K>`, K x 64 dependent-in-eights FFMAs fully unrolled (about K KiB of code, 16 bytes an
// instruction), and `rolled<K>`, the same FFMAs in a loop that is not unrolled (a few hundred bytes of
// code). Each is timed N calls (default 200, after 5 untimed) in four ways: one block of one warp or 132
// blocks of 256 threads, each with and without the flush before the call; latency is CUPTI's kernel record
// (as kda eval reads it). One JSON line per (kernel, K, grid, flush) with the median, p10 and p90 in us.
// If code fetch is what costs, `straight` with the flush grows with K while `rolled` and the unflushed
// calls stay near their floor.
#include <cuda_runtime.h>
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cupti_kernels.h"
#include "runner/device_inputs.h"

namespace {

using kda::bench::quantile;

// Eight accumulators, each step x[j] = x[j] * x[j + 1] + c: nothing folds, eight chains run side by side.
template <int K>
__global__ void straight(float* out, float seed) {
  float x[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) x[j] = seed + j;
#pragma unroll
  for (int i = 0; i < K * 64; ++i) x[i % 8] = fmaf(x[i % 8], x[(i + 1) % 8], 1.0f + 1e-7f * static_cast<float>(i));
  float s = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += x[j];
  if (s == 12345.0f) out[threadIdx.x] = s;  // never true; keeps the chain
}

template <int K>
__global__ void rolled(float* out, float seed) {
  float x[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) x[j] = seed + j;
#pragma unroll 1
  for (int i = 0; i < K * 8; ++i) {
    const float c = 1.0f + 1e-7f * static_cast<float>(i);
#pragma unroll
    for (int j = 0; j < 8; ++j) x[j] = fmaf(x[j], x[(j + 1) % 8], c);
  }
  float s = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += x[j];
  if (s == 12345.0f) out[threadIdx.x] = s;
}

#define CHECK(x)                                                                \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      std::fprintf(stderr, "code_fetch: %s: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

struct Flush {
  void* buf = nullptr;
  uint64_t bytes = 0;
  unsigned int* sink = nullptr;
};

void time_one(const char* name, int k, void (*kernel)(float*, float), int blocks, int threads, bool flush,
              const Flush& f, float* out, int reps) {
  kda::bench::clear_kernel_records();
  for (int r = 0; r < reps + 5; ++r) {
    if (flush) CHECK(kda::runner::flush_l2_by_reading(f.buf, f.bytes, f.sink, nullptr));
    kernel<<<blocks, threads>>>(out, 1.0f + r);
    CHECK(cudaDeviceSynchronize());
  }
  std::vector<double> us = kda::bench::last_kernel_us(static_cast<size_t>(reps));
  std::printf(
      "{\"kernel\": \"%s\", \"k\": %d, \"blocks\": %d, \"threads\": %d, \"flush\": %s, \"median_us\": %.3f, "
      "\"p10_us\": %.3f, \"p90_us\": %.3f, \"n\": %zu}\n",
      name, k, blocks, threads, flush ? "true" : "false", quantile(us, 0.5), quantile(us, 0.1), quantile(us, 0.9),
      us.size());
  std::fflush(stdout);
}

template <int K>
void time_size(const Flush& f, float* out, int reps) {
  for (const auto& [blocks, threads] : {std::pair{1, 32}, std::pair{132, 256}})
    for (bool flush : {true, false}) {
      time_one("straight", K, straight<K>, blocks, threads, flush, f, out, reps);
      time_one("rolled", K, rolled<K>, blocks, threads, flush, f, out, reps);
    }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: code_fetch_bench [--reps N]\n");
      return 2;
    }
  }
  if (!kda::bench::record_kernels({"straight", "rolled"})) {
    std::fprintf(stderr, "code_fetch: CUPTI refused the kernel records\n");
    return 1;
  }
  int l2 = 0;
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  Flush f;
  f.bytes = 2 * static_cast<uint64_t>(l2);
  CHECK(cudaMalloc(&f.buf, f.bytes));
  CHECK(cudaMemset(f.buf, 1, f.bytes));
  CHECK(cudaMalloc(&f.sink, sizeof(unsigned int)));
  float* out = nullptr;
  CHECK(cudaMalloc(&out, 256 * sizeof(float)));
  time_size<1>(f, out, reps);
  time_size<8>(f, out, reps);
  time_size<16>(f, out, reps);
  time_size<32>(f, out, reps);
  time_size<64>(f, out, reps);
  return 0;
}
