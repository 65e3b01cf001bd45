// Where the two latency modes of a µs kernel come from (issue 18: the CUDA rmsnorm pack's 2.5 µs
// workloads read about 2.3 µs in some calls and 3.8-4.4 µs in others, in a share that changes from
// one process to the next). One small kernel shaped like rmsnorm at batch 1, hidden 4096 (one block
// reads 8 KiB of x and 8 KiB of weight, reduces, writes 8 KiB), timed as `kda eval` times a call:
// the runner's read flush of 2x the L2 before it (runner/device_inputs.h flush_l2_by_reading), a
// device-wide synchronise after, CUPTI's kernel record as its latency and %globaltimer inside it.
//
//   latency_modes_bench [--reps N] [--hold S] [--lib PATH]
//
// Variants, each N calls (default 300; 60 for the sleeping ones) after 5 untimed ones; one JSON line
// each with the CUPTI and globaltimer quantiles, the share of "slow" calls (CUPTI above 1.3x that
// variant's p10) and the SM clock the row ran at (clock64 cycles over %globaltimer ns inside it),
// over all calls and over the slow ones:
//   flush            as kda eval times it
//   noflush          the same without the flush (warm L2 and TLBs)
//   flush+touch      after the flush, one 16-byte read per 2 MiB page of the buffers (a separate
//                    one-thread kernel): warms the address translations, leaves their lines cold
//   flush+gap        as flush, with 200 us of host spin between calls (the GPU idles)
//   flush+sleep<ms>  as flush, with the host asleep 5 or 50 ms between calls (as between a kda eval
//                    trial's timed calls and the next trial's checks: does the clock drop meanwhile?)
//   flush@<k>        the buffers k x 64 KiB into their 2 MiB page (k = 0, 15, 31: x and weight on
//                    one page, or on two)
//   flush|sync       the host waits for the flush to end before it launches the row, as kda-runner
//                    does (the other variants queue the row right behind the flush)
//   chain8@b<k>      a chain of 8 dependent loads per thread (each 8 KiB past the last: what a
//                    row loop that is not unrolled does), on each of 8 buffers of their own 2 MiB
//                    allocation (k = 0..7): if the medians differ between buffers of one process,
//                    where the data lands in physical memory moves the latency
// `--lib PATH` times instead a CUDA rmsnorm solution's library (its `run` entry, kda's C ABI) at
// batch 1, hidden 4096, in the same harness: lib@b<k> on 4 buffers of their own allocation; on the
// first with what kda-runner does around a call (lib+reset: cudaCtxResetPersistingL2Cache; +upload:
// the output slot copied from pinned memory; +poison: a block copied and tiled over the output);
// lib|kda-waits: the flush waited for by polling, the call by a synchronisation (kda-runner until
// run 55); lib|polled: both polled, then the device-wide synchronisation (kda-runner since); and
// polled with the runner's work before the flush (its upload synchronous, or on the stream);
// lib@kda: x, weight and y at kda's arena offsets; +random: random bf16 data; lib@pad<k>: a fresh
// 2 MiB buffer after a pad of k x 389 MiB (pads kept: each lands further in physical memory).
// `--blocking` (cudaDeviceScheduleBlockingSync) and `--cupti-all` (memcpy and memset records too)
// set up the process as kda-runner does. Against kda eval of the same library this separates the
// kernel from what a kda eval process does around it.
// `--hold S` only creates a context and sleeps S seconds: run one beside the bench to see whether
// another process's idle context moves the numbers (kda eval keeps a reference runner alive).
// Several processes in a row show whether the share changes per process (run it a few times).
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>
#include <dlpack/dlpack.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
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

constexpr int kThreads = 512;
constexpr int kElems = 4096;  // bf16 elements per row: 8 KiB

// One row: y = x * rsqrt(mean(x^2)) * w on bf16 bit patterns read as halves of floats (the values
// do not matter, only the memory traffic and the reduction's shape).
__global__ void timed_row(const uint4* __restrict__ x, const uint4* __restrict__ w, uint4* __restrict__ y,
                          unsigned long long* span) {
  const uint64_t start = globaltimer();
  const long long cycles0 = clock64();
  __shared__ float partial[kThreads / 32];
  const int i = threadIdx.x;  // 512 threads x 16 bytes = 8 KiB
  const uint4 xv = x[i], wv = w[i];
  const float a = __uint_as_float(xv.x & 0x3f7fffff), b = __uint_as_float(xv.y & 0x3f7fffff);
  float s = a * a + b * b;
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (i % 32 == 0) partial[i / 32] = s;
  __syncthreads();
  float total = 0;
  for (int k = 0; k < kThreads / 32; ++k) total += partial[k];
  const float r = rsqrtf(total / kElems + 1e-6f);
  y[i] = make_uint4(__float_as_uint(a * r) ^ wv.x, __float_as_uint(b * r) ^ wv.y, xv.z ^ wv.z, xv.w ^ wv.w);
  __syncthreads();
  if (threadIdx.x == 0) {
    span[1] = globaltimer();
    span[2] = static_cast<unsigned long long>(clock64() - cycles0);
    span[0] = start;
  }
}

// Each thread: `steps` loads, each address depending on the value before (mask is 0 at run time, so
// the chain is real but the addresses are fixed), 8 KiB apart.
__global__ void timed_chain(const uint2* __restrict__ x, int steps, unsigned mask, uint2* __restrict__ out,
                            unsigned long long* span) {
  const uint64_t start = globaltimer();
  const long long cycles0 = clock64();
  unsigned off = threadIdx.x, acc = 0;
  for (int i = 0; i < steps; ++i) {
    const uint2 v = x[off];
    acc += v.x;
    off += 1024 + (v.x & mask);
  }
  out[threadIdx.x] = make_uint2(acc, off);
  __syncthreads();
  if (threadIdx.x == 0) {
    span[1] = globaltimer();
    span[2] = static_cast<unsigned long long>(clock64() - cycles0);
    span[0] = start;
  }
}

__global__ void touch_pages(const unsigned char* base, uint64_t bytes, unsigned int* sink) {
  unsigned int acc = 0;
  // the last word of each page: far from the row's lines, which stay cold
  for (uint64_t off = (uint64_t{2} << 20) - 16; off < bytes; off += uint64_t{2} << 20)
    acc += *reinterpret_cast<const unsigned int*>(base + off);
  if (acc == 0x12345678u) *sink = acc;
}

std::string stats(const std::vector<double>& v) {
  const double p10 = quantile(v, 0.1);
  size_t slow = 0;
  for (double x : v) slow += x > 1.3 * p10;
  char buf[200];
  std::snprintf(buf, sizeof buf, "{\"median\": %.3f, \"p10\": %.3f, \"p90\": %.3f, \"slow_share\": %.3f, \"n\": %zu}",
                quantile(v, 0.5), p10, quantile(v, 0.9), v.empty() ? 0.0 : static_cast<double>(slow) / v.size(),
                v.size());
  return buf;
}

// The variants, in the order they run (see the top).
struct Variant {
  const char* name;
  bool flush, touch;
  int gap_us;
  int offset_64k;  // x at this many 64 KiB into the region; weight and y follow at 8 KiB steps
  int sleep_ms = 0;
  bool sync_after_flush = false;
  int chain_buffer = -1;  // >= 0: the chain kernel on that buffer
};
const Variant kVariants[] = {{"flush", true, false, 0, 0},
                             {"noflush", false, false, 0, 0},
                             {"flush+touch", true, true, 0, 0},
                             {"flush+gap", true, false, 200, 0},
                             {"flush@0", true, false, 0, 0},
                             {"flush@15", true, false, 0, 15},
                             {"flush@31", true, false, 0, 31},
                             {"flush+sleep5", true, false, 0, 0, 5},
                             {"flush+sleep50", true, false, 0, 0, 50},
                             {"flush|sync", true, false, 0, 0, 0, true},
                             {"chain8@b0", true, false, 0, 0, 0, false, 0},
                             {"chain8@b1", true, false, 0, 0, 0, false, 1},
                             {"chain8@b2", true, false, 0, 0, 0, false, 2},
                             {"chain8@b3", true, false, 0, 0, 0, false, 3},
                             {"chain8@b4", true, false, 0, 0, 0, false, 4},
                             {"chain8@b5", true, false, 0, 0, 0, false, 5},
                             {"chain8@b6", true, false, 0, 0, 0, false, 6},
                             {"chain8@b7", true, false, 0, 0, 0, false, 7},
                             {"flush", true, false, 0, 0}};

using Entry = int (*)(const DLTensor*, int64_t, DLTensor*, int64_t, void*);

// --lib variants: where the row lives and what is done before each call's flush.
struct LibVariant {
  std::string name;
  int buffer = 0;           // chains[buffer]; -1: a fresh 2 MiB allocation after a pad (pad_mib)
  bool kda_layout = false;  // x, weight and y at kda's arena offsets (4096, 20480, 45120), not 0, 8 and 16 KiB
  bool random = false;      // x and weight random bf16 values instead of 0x3C3C everywhere
  bool reset = false, upload = false, poison = false;
  bool async_upload = false;  // the upload on the stream (cudaMemcpyAsync), not a synchronous cudaMemcpy
  int pad_mib = 0;
  // How the host waits for the flush and for the call: both with the runtime's synchronisations
  // (which sleep under --blocking), as kda-runner did until run 55 (the flush polled, the call
  // synchronised), or both polled (cudaEventQuery) before the device-wide synchronisation.
  enum class Wait { kSync, kKda, kPolled } wait = Wait::kSync;
};

std::vector<LibVariant> lib_variants() {
  std::vector<LibVariant> v;
  for (int k = 0; k < 4; ++k) v.push_back({.name = "lib@b" + std::to_string(k), .buffer = k});
  v.push_back({.name = "lib+reset", .reset = true});
  v.push_back({.name = "lib+upload", .upload = true});
  v.push_back({.name = "lib+poison", .poison = true});
  v.push_back({.name = "lib+reset+upload+poison", .reset = true, .upload = true, .poison = true});
  v.push_back({.name = "lib|kda-waits", .wait = LibVariant::Wait::kKda});
  v.push_back({.name = "lib|polled", .wait = LibVariant::Wait::kPolled});
  v.push_back({.name = "lib+upload|polled", .upload = true, .wait = LibVariant::Wait::kPolled});
  v.push_back({.name = "lib+reset+upload+poison|polled",
               .reset = true,
               .upload = true,
               .poison = true,
               .wait = LibVariant::Wait::kPolled});
  v.push_back(
      {.name = "lib+async-upload|polled", .upload = true, .async_upload = true, .wait = LibVariant::Wait::kPolled});
  v.push_back({.name = "lib@kda", .kda_layout = true});
  v.push_back({.name = "lib@kda+random", .kda_layout = true, .random = true});
  v.push_back({.name = "lib@kda+random+all",
               .kda_layout = true,
               .random = true,
               .reset = true,
               .upload = true,
               .poison = true});
  for (int k = 1; k <= 6; ++k)
    v.push_back({.name = "lib@pad" + std::to_string(k), .buffer = -1, .pad_mib = 1 + 389 * k});
  return v;
}

// Random bf16 values, about N(0, 1) (sum of uniforms), from a fixed seed.
std::vector<uint16_t> random_bf16(size_t n, uint32_t seed) {
  std::vector<uint16_t> out(n);
  for (auto& o : out) {
    float f = -2.0f;
    for (int i = 0; i < 4; ++i) {
      seed = seed * 1664525u + 1013904223u;
      f += static_cast<float>(seed >> 8) / 16777216.0f;
    }
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    o = static_cast<uint16_t>(bits >> 16);
  }
  return out;
}

// --lib: the library's `run` at batch 1 x hidden 4096 in each of lib_variants() (see the top).
int time_library(Entry entry, void* const* chains, void* flush, size_t flush_bytes, unsigned int* sink, cudaStream_t s,
                 int reps) {
  int64_t xs[2] = {1, kElems}, ws[1] = {kElems};
  float eps = 1e-6f;
  const DLDataType bf16{kDLBfloat, 16, 1}, f32{kDLFloat, 32, 1};
  // `upload` copies the output slot (8 KiB and its guards) from pinned host memory, as a timed
  // call's upload does; `poison` copies a 64 KiB block to the device and tiles it over the output,
  // as poison_on_device does; `reset` calls cudaCtxResetPersistingL2Cache.
  std::vector<unsigned char> host(64 << 10, 0x5A);
  cudaHostRegister(host.data(), host.size(), cudaHostRegisterDefault);
  void* block = nullptr;
  if (cudaMalloc(&block, 64 << 10) != cudaSuccess) return 4;
  cudaEvent_t ev;
  cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  auto poll = [&] {
    cudaEventRecord(ev, s);
    while (cudaEventQuery(ev) == cudaErrorNotReady) {}
  };
  std::vector<void*> held;  // pads and fresh buffers, freed at the end (pads stay: each pushes the next further)
  for (const LibVariant& v : lib_variants()) {
    auto* b = static_cast<unsigned char*>(v.buffer >= 0 ? chains[v.buffer] : nullptr);
    if (v.buffer < 0) {
      void *pad = nullptr, *fresh = nullptr;
      if (cudaMalloc(&pad, size_t{1} * v.pad_mib << 20) != cudaSuccess || cudaMalloc(&fresh, 2 << 20) != cudaSuccess)
        return 4;
      cudaMemset(fresh, 0x3C, 2 << 20);
      held.push_back(pad);
      held.push_back(fresh);
      b = static_cast<unsigned char*>(fresh);
    }
    const size_t x_at = v.kda_layout ? 4096 : 0, w_at = v.kda_layout ? 20480 : 8 << 10,
                 y_at = v.kda_layout ? 45120 : 16 << 10;
    if (v.random) {
      const auto xv = random_bf16(kElems, 1), wv = random_bf16(kElems, 2);
      cudaMemcpy(b + x_at, xv.data(), kElems * 2, cudaMemcpyHostToDevice);
      cudaMemcpy(b + w_at, wv.data(), kElems * 2, cudaMemcpyHostToDevice);
    } else {
      cudaMemset(b + x_at, 0x3C, kElems * 2);
      cudaMemset(b + w_at, 0x3C, kElems * 2);
    }
    DLTensor in[3] = {{b + x_at, {kDLCUDA, 0}, 2, bf16, xs, nullptr, 0},
                      {b + w_at, {kDLCUDA, 0}, 1, bf16, ws, nullptr, 0},
                      {&eps, {kDLCPU, 0}, 0, f32, nullptr, nullptr, 0}};
    DLTensor out[1] = {{b + y_at, {kDLCUDA, 0}, 2, bf16, xs, nullptr, 0}};
    kda::bench::clear_kernel_records();
    for (int i = 0; i < reps + 5; ++i) {
      if (v.upload && v.async_upload)
        cudaMemcpyAsync(b + y_at - 4096, host.data(), (8 << 10) + 8192, cudaMemcpyHostToDevice, s);
      else if (v.upload)
        cudaMemcpy(b + y_at - 4096, host.data(), (8 << 10) + 8192, cudaMemcpyHostToDevice);
      if (v.poison) {
        cudaMemcpyAsync(block, host.data(), 64 << 10, cudaMemcpyHostToDevice, s);
        kda::runner::tile_on_device(b + y_at, 8 << 10, block, 64 << 10, s);
      }
      if (v.reset) cudaCtxResetPersistingL2Cache();
      if (kda::runner::flush_l2_by_reading(flush, flush_bytes, sink, s) != cudaSuccess) return 4;
      // as kda-runner: the flush has ended before the call
      if (v.wait == LibVariant::Wait::kSync)
        cudaStreamSynchronize(s);
      else
        poll();
      if (int rc = entry(in, 3, out, 1, s); rc != 0) {
        std::fprintf(stderr, "run returned %d\n", rc);
        return 5;
      }
      if (v.wait == LibVariant::Wait::kPolled) poll();
      if (cudaDeviceSynchronize() != cudaSuccess) return 5;
    }
    const std::vector<double> cu = kda::bench::last_kernel_us(static_cast<size_t>(reps));
    std::printf("{\"variant\": \"%s\", \"buffer\": \"0x%llx\", \"reps\": %d, \"cupti_us\": %s}\n", v.name.c_str(),
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(b)), reps, stats(cu).c_str());
    std::fflush(stdout);
  }
  for (void* p : held) cudaFree(p);
  cudaEventDestroy(ev);
  cudaFree(block);
  return 0;
}

struct Flags {
  bool blocking = false;   // --blocking: cudaDeviceScheduleBlockingSync, as kda-runner sets
  bool cupti_all = false;  // --cupti-all: memcpy and memset activity records too, as kda-runner enables
};

bool parse_args(int argc, char** argv, int& reps, int& hold_s, const char*& lib, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--blocking") == 0) {
      flags.blocking = true;
      continue;
    }
    if (std::strcmp(argv[i], "--cupti-all") == 0) {
      flags.cupti_all = true;
      continue;
    }
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--hold") == 0 && i + 1 < argc)
      hold_s = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--lib") == 0 && i + 1 < argc)
      lib = argv[++i];
    else
      return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 300, hold_s = 0;
  const char* lib = nullptr;
  Flags flags;
  if (!parse_args(argc, argv, reps, hold_s, lib, flags)) {
    std::fprintf(stderr, "usage: %s [--reps N] [--hold S] [--lib PATH [--blocking] [--cupti-all]]\n", argv[0]);
    return 2;
  }
  if (flags.blocking) cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
  if (cudaFree(nullptr) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA device\n");
    return 77;
  }
  if (hold_s > 0) {
    std::this_thread::sleep_for(std::chrono::seconds(hold_s));
    return 0;
  }
  if (!kda::bench::record_kernels({"timed_", "rmsnorm"})) {
    std::fprintf(stderr, "CUPTI activity API unavailable\n");
    return 3;
  }
  if (flags.cupti_all && (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
                          cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS))
    return 3;
  cudaStream_t s;
  cudaStreamCreate(&s);
  int l2 = 0;
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
  const size_t flush_bytes = 2 * static_cast<size_t>(l2);
  const uint64_t page = uint64_t{2} << 20, region = 2 * page;
  void *flush = nullptr, *buf = nullptr;
  unsigned int* sink = nullptr;
  unsigned long long* span = nullptr;
  if (cudaMalloc(&flush, flush_bytes) != cudaSuccess || cudaMalloc(&sink, sizeof(unsigned int)) != cudaSuccess ||
      cudaMalloc(&buf, region) != cudaSuccess || cudaMalloc(&span, 3 * sizeof(unsigned long long)) != cudaSuccess)
    return 3;
  cudaMemset(flush, 0x5A, flush_bytes);
  cudaMemset(buf, 0x3C, region);
  auto* base = static_cast<unsigned char*>(buf);
  void* chains[8] = {};
  for (void*& c : chains) {
    if (cudaMalloc(&c, page) != cudaSuccess) return 3;
    cudaMemset(c, 0x11, page);
  }
  std::printf("{\"buffers\": \"0x%llx\", \"flush\": \"0x%llx\", \"l2_bytes\": %d}\n",
              static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(buf)),
              static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(flush)), l2);

  Entry entry = nullptr;
  if (lib != nullptr) {
    void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    entry = h != nullptr ? reinterpret_cast<Entry>(dlsym(h, "run")) : nullptr;
    if (entry == nullptr) {
      std::fprintf(stderr, "%s: no entry point run: %s\n", lib, dlerror());
      return 2;
    }
  }
  if (entry != nullptr) return time_library(entry, chains, flush, flush_bytes, sink, s, reps);

  for (const Variant& v : kVariants) {
    unsigned char* x = base + static_cast<uint64_t>(v.offset_64k) * (64 << 10);
    // weight 1 MiB + 8 KiB after x: with x near the end of a page, the weight is on the next one
    unsigned char* w = x + (v.offset_64k == 31 ? (1 << 20) : (8 << 10));
    unsigned char* y = w + (8 << 10);
    kda::bench::clear_kernel_records();
    std::vector<double> gt, mhz;
    const int n = v.sleep_ms > 0 ? std::min(reps, 60) : reps;
    for (int i = 0; i < n + 5; ++i) {
      if (v.flush && kda::runner::flush_l2_by_reading(flush, flush_bytes, sink, s) != cudaSuccess) return 4;
      if (v.touch) touch_pages<<<1, 1, 0, s>>>(base, region, sink);
      if (v.sync_after_flush) cudaStreamSynchronize(s);
      if (v.chain_buffer >= 0)
        timed_chain<<<1, 256, 0, s>>>(static_cast<const uint2*>(chains[v.chain_buffer]), 8, 0u,
                                      reinterpret_cast<uint2*>(y), span);
      else
        timed_row<<<1, kThreads, 0, s>>>(reinterpret_cast<const uint4*>(x), reinterpret_cast<const uint4*>(w),
                                         reinterpret_cast<uint4*>(y), span);
      if (cudaDeviceSynchronize() != cudaSuccess) return 5;
      unsigned long long host_span[3] = {0, 0, 0};
      cudaMemcpy(host_span, span, sizeof host_span, cudaMemcpyDeviceToHost);
      if (i >= 5) {
        const double ns = static_cast<double>(host_span[1] - host_span[0]);
        gt.push_back(ns / 1e3);
        mhz.push_back(ns > 0 ? static_cast<double>(host_span[2]) / ns * 1e3 : 0);
      }
      if (v.sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(v.sleep_ms));
      if (v.gap_us > 0) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(v.gap_us);
        while (std::chrono::steady_clock::now() < until) {}
      }
    }
    const std::vector<double> cu = kda::bench::last_kernel_us(static_cast<size_t>(n));
    // the clock of the slow calls (CUPTI above 1.3x its p10), joined call by call
    std::vector<double> slow_mhz;
    const double p10 = quantile(cu, 0.1);
    for (size_t k = 0; k < cu.size() && k < mhz.size(); ++k)
      if (cu[k] > 1.3 * p10) slow_mhz.push_back(mhz[k]);
    std::printf(
        "{\"variant\": \"%s\", \"reps\": %d, \"cupti_us\": %s, \"globaltimer_us\": %s, \"sm_mhz\": %s, "
        "\"slow_sm_mhz\": %s}\n",
        v.name, n, stats(cu).c_str(), stats(gt).c_str(), stats(mhz).c_str(), stats(slow_mhz).c_str());
    std::fflush(stdout);
  }
  return 0;
}
