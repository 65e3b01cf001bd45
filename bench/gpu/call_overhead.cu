// What one timed call of kda's CUDA runner costs besides the candidate's kernel: each primitive the
// runner uses per call (src/runner/cuda_backend.cc), timed on its own, N times, on an empty kernel.
// Prints one JSON line per (mode, step): median and p90 wall time and the calling thread's CPU
// time, in microseconds.
//
//   call_overhead_bench [--blocking] [--reps N]
//
// --blocking sets cudaDeviceScheduleBlockingSync (what the runner does); without it the CUDA
// default (spin, then yield) applies. Steps:
//   launch_device_sync      empty kernel, then cudaDeviceSynchronize (the runner's call body)
//   launch_stream_sync      empty kernel, then cudaStreamSynchronize
//   event_bracket           event, empty kernel, device sync, event, event sync (the runner's pattern),
//                           plus "event_us": what the events measure around it
//   l2_flush                cudaMemsetAsync over 2x the L2 size, then device sync
//   l2_flush_read           reading 2x the L2 size through it (runner/device_inputs.h flush_l2_by_reading,
//                           what the runner does), then device sync
//   reset_persisting_l2     cudaCtxResetPersistingL2Cache
//   l2_flush_read_polled    the read flush, then an event polled to completion (the runner's wait)
//   poison_tile_64mib_polled  runner/device_inputs.h tile_on_device over 64 MiB, polled
//   ... then the same launches with CUPTI activity (concurrent kernel, memcpy, memset) enabled:
//   cupti_launch_device_sync, cupti_event_bracket
//   cupti_flush_forced      cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) after one launch
//   cupti_flush_idle        the same with nothing new to flush
//   cupti_timestamp         cuptiGetTimestamp
#include <cuda_runtime.h>
#include <cupti.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "runner/device_inputs.h"

namespace {

__global__ void empty_kernel(int* p) {
  if (p != nullptr && threadIdx.x == 0 && blockIdx.x == 0) *p = 1;
}

double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

size_t g_records = 0;
void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, 1 << 20));
  *size = 1 << 20;
  *max_records = 0;
}
void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) ++g_records;
  std::free(buffer);
}

struct Bench {
  const char* mode;
  int reps;
  // Times body() reps times (after 5 untimed runs); extra() may add a per-rep value (e.g. event time).
  void step(const char* name, const std::function<void()>& body, const std::function<double()>& extra = nullptr) {
    std::vector<double> wall, cpu, ext;
    for (int i = 0; i < reps + 5; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = thread_cpu_us();
      body();
      const double c1 = thread_cpu_us();
      const auto t1 = std::chrono::steady_clock::now();
      if (i < 5) continue;
      wall.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      cpu.push_back(c1 - c0);
      if (extra) ext.push_back(extra());
    }
    std::printf(
        "{\"mode\": \"%s\", \"step\": \"%s\", \"reps\": %d, \"median_us\": %.2f, \"p90_us\": %.2f, "
        "\"cpu_median_us\": %.2f",
        mode, name, reps, quantile(wall, 0.5), quantile(wall, 0.9), quantile(cpu, 0.5));
    if (!ext.empty()) std::printf(", \"event_us\": %.2f", quantile(ext, 0.5));
    std::printf("}\n");
    std::fflush(stdout);
  }
};

}  // namespace

int main(int argc, char** argv) {
  bool blocking = false;
  int reps = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--blocking") == 0)
      blocking = true;
    else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--blocking] [--reps N]\n", argv[0]);
      return 2;
    }
  }
  if (blocking && cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) != cudaSuccess) return 3;
  if (cudaFree(nullptr) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA device\n");
    return 77;
  }
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  int l2 = 0;
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
  const size_t flush_bytes = 2 * static_cast<size_t>(l2);
  void* flush = nullptr;
  int* flag = nullptr;
  if (cudaMalloc(&flush, flush_bytes) != cudaSuccess || cudaMalloc(&flag, sizeof(int)) != cudaSuccess) return 3;

  Bench b{blocking ? "blocking" : "spin", reps};
  auto launch = [&] { empty_kernel<<<1, 32, 0, s>>>(flag); };
  auto event_bracket = [&] {
    cudaEventRecord(e0, s);
    launch();
    cudaDeviceSynchronize();
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
  };
  auto event_us = [&] {
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    return static_cast<double>(ms) * 1e3;
  };
  b.step("launch_device_sync", [&] {
    launch();
    cudaDeviceSynchronize();
  });
  b.step("launch_stream_sync", [&] {
    launch();
    cudaStreamSynchronize(s);
  });
  b.step("event_bracket", event_bracket, event_us);
  b.step("l2_flush", [&] {
    cudaMemsetAsync(flush, 1, flush_bytes, s);
    cudaDeviceSynchronize();
  });
  b.step("l2_flush_read", [&] {
    kda::runner::flush_l2_by_reading(flush, flush_bytes, reinterpret_cast<unsigned int*>(flag), s);
    cudaDeviceSynchronize();
  });
  b.step("reset_persisting_l2", [&] { cudaCtxResetPersistingL2Cache(); });
  // The runner since run 15: the flush, then an event on the harness stream polled to completion
  // instead of a (blocking) device synchronisation.
  cudaEvent_t done;
  cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  b.step("l2_flush_read_polled", [&] {
    kda::runner::flush_l2_by_reading(flush, flush_bytes, reinterpret_cast<unsigned int*>(flag), s);
    cudaEventRecord(done, s);
    while (cudaEventQuery(done) == cudaErrorNotReady) {}
  });
  // Poisoning a 64 MiB output: one tile kernel from a device-resident 4 KiB block, polled.
  constexpr size_t kPoisonBytes = size_t{64} << 20;
  void* poison_dst = nullptr;
  void* poison_block = nullptr;
  if (cudaMalloc(&poison_dst, kPoisonBytes) != cudaSuccess || cudaMalloc(&poison_block, 4096) != cudaSuccess) return 3;
  cudaMemset(poison_block, 0x7f, 4096);
  b.step("poison_tile_64mib_polled", [&] {
    kda::runner::tile_on_device(poison_dst, kPoisonBytes, poison_block, 4096, s);
    cudaEventRecord(done, s);
    while (cudaEventQuery(done) == cudaErrorNotReady) {}
  });

  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "CUPTI activity could not be enabled\n");
    return 3;
  }
  b.step("cupti_launch_device_sync", [&] {
    launch();
    cudaDeviceSynchronize();
  });
  b.step("cupti_event_bracket", event_bracket, event_us);
  // The flush alone: the launch and sync happen outside the timed body.
  std::vector<double> forced;
  for (int i = 0; i < reps; ++i) {
    launch();
    cudaDeviceSynchronize();
    const auto t0 = std::chrono::steady_clock::now();
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    forced.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf(
      "{\"mode\": \"%s\", \"step\": \"cupti_flush_forced\", \"reps\": %d, \"median_us\": %.2f, \"p90_us\": %.2f}\n",
      b.mode, reps, quantile(forced, 0.5), quantile(forced, 0.9));
  b.step("cupti_flush_idle", [&] { cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); });
  uint64_t ts = 0;
  b.step("cupti_timestamp", [&] { cuptiGetTimestamp(&ts); });
  std::fprintf(stderr, "%zu CUPTI records\n", g_records);
  return 0;
}
