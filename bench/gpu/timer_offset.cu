// How three timers read the same short kernels, to separate a timer's own offset from a kernel's
// time: CUPTI's kernel activity record (what `kda eval` reports as a call's latency), %globaltimer
// read inside the kernel (the first block's start to the last block's end: the kernel's execution,
// without its launch) and, when the program runs under Nsight Compute, ncu's gpu__time_duration of
// the same launches (bench/gpu/timer_offset.py joins the two).
//
//   timer_offset_bench [--reps N] [--no-cupti]
//
// Configurations, in this order, each launched N times (default 50) after 5 untimed launches, every
// launch after the runner's read flush of 2x the L2 (runner/device_inputs.h flush_l2_by_reading) and
// followed by a device-wide synchronise, as `kda eval` times a call:
//   empty        one block of 32 threads that only reads the clock
//   copy <bytes> a grid-stride 16-byte copy of 256 KiB, 4 MiB, 32 MiB and 256 MiB (in and out)
// Prints one JSON line per configuration: the CUPTI duration and the in-kernel %globaltimer span in
// microseconds (median, p10, p90). --no-cupti leaves CUPTI's activity API off (under ncu, whose own
// collection is what counts there); the globaltimer spans are still printed.
#include <cuda_runtime.h>
#include <cupti.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cupti_kernels.h"
#include "runner/device_inputs.h"

namespace {

using kda::bench::quantile;

__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// span[0]: the earliest block start, span[1]: the latest block end (ns, %globaltimer).
__device__ void record_span(unsigned long long* span, uint64_t start) {
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicMin(&span[0], static_cast<unsigned long long>(start));
    atomicMax(&span[1], static_cast<unsigned long long>(globaltimer()));
  }
}

__global__ void timed_empty(unsigned long long* span) { record_span(span, globaltimer()); }

__global__ void timed_copy(const uint4* __restrict__ in, uint4* __restrict__ out, uint64_t n,
                           unsigned long long* span) {
  const uint64_t start = globaltimer();
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    out[i] = in[i];
  record_span(span, start);
}

std::string stats(const std::vector<double>& v) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "{\"median\": %.3f, \"p10\": %.3f, \"p90\": %.3f, \"n\": %zu}", quantile(v, 0.5),
                quantile(v, 0.1), quantile(v, 0.9), v.size());
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 50;
  bool cupti = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--no-cupti") == 0)
      cupti = false;
    else {
      std::fprintf(stderr, "usage: %s [--reps N] [--no-cupti]\n", argv[0]);
      return 2;
    }
  }
  if (cudaFree(nullptr) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA device\n");
    return 77;
  }
  if (cupti && !kda::bench::record_kernels({"timed_"})) {
    std::fprintf(stderr, "CUPTI activity API unavailable\n");
    return 3;
  }
  cudaStream_t s;
  cudaStreamCreate(&s);
  int l2 = 0;
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
  const size_t flush_bytes = 2 * static_cast<size_t>(l2);
  const uint64_t max_copy = uint64_t{256} << 20;
  void *flush = nullptr, *in = nullptr, *out = nullptr;
  unsigned int* sink = nullptr;
  unsigned long long* span = nullptr;
  if (cudaMalloc(&flush, flush_bytes) != cudaSuccess || cudaMalloc(&sink, sizeof(unsigned int)) != cudaSuccess ||
      cudaMalloc(&in, max_copy) != cudaSuccess || cudaMalloc(&out, max_copy) != cudaSuccess ||
      cudaMalloc(&span, 2 * sizeof(unsigned long long)) != cudaSuccess)
    return 3;
  cudaMemset(flush, 0x5A, flush_bytes);
  cudaMemset(in, 0x3C, max_copy);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);

  struct Config {
    const char* kernel;
    uint64_t bytes;
  };
  const Config configs[] = {
      {"empty", 0}, {"copy", 256 << 10}, {"copy", 4 << 20}, {"copy", 32 << 20}, {"copy", max_copy}};
  for (const Config& c : configs) {
    std::vector<double> gt;
    if (cupti) kda::bench::clear_kernel_records();
    const uint64_t n = c.bytes / sizeof(uint4);
    const int blocks =
        static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(sms) * 4, std::max<uint64_t>(1, (n + 255) / 256)));
    for (int i = 0; i < reps + 5; ++i) {
      unsigned long long host_span[2] = {~0ULL, 0};
      cudaMemcpy(span, host_span, sizeof host_span, cudaMemcpyHostToDevice);
      if (kda::runner::flush_l2_by_reading(flush, flush_bytes, sink, s) != cudaSuccess) return 4;
      if (c.bytes == 0)
        timed_empty<<<1, 32, 0, s>>>(span);
      else
        timed_copy<<<blocks, 256, 0, s>>>(static_cast<const uint4*>(in), static_cast<uint4*>(out), n, span);
      if (cudaDeviceSynchronize() != cudaSuccess) return 5;
      cudaMemcpy(host_span, span, sizeof host_span, cudaMemcpyDeviceToHost);
      if (i >= 5) gt.push_back(static_cast<double>(host_span[1] - host_span[0]) / 1e3);
    }
    const std::vector<double> cu =
        cupti ? kda::bench::last_kernel_us(static_cast<size_t>(reps)) : std::vector<double>{};
    std::printf(
        "{\"kernel\": \"%s\", \"bytes\": %llu, \"reps\": %d, \"warmup\": 5, \"cupti_us\": %s, \"globaltimer_us\": "
        "%s}\n",
        c.kernel, static_cast<unsigned long long>(c.bytes), reps, cupti ? stats(cu).c_str() : "null",
        stats(gt).c_str());
    std::fflush(stdout);
  }
  return 0;
}
