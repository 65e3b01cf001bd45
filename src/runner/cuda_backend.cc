// CUDA backend: a device mirror of the shared arena (same offsets, same guard bands), the
// harness stream, a 2x-L2 flush buffer, and CUPTI activity records of every kernel, memcpy and
// memset launched during a timed call (on any stream), so side-stream work is counted.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <cupti.h>

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <map>
#include <set>

#include <dlpack/dlpack.h>

#include "runner/backend.h"
#include "runner/device_idle.h"
#include "runner/device_inputs.h"
#include "runner/entry_point_guard.h"
#include "tensor/tensor.h"

namespace kda::runner {

namespace {

// ---- CUPTI activity buffers -------------------------------------------------------------------

struct Activity {
  uint64_t start = 0, end = 0;
  std::string kind;  // kernel | memcpy | memset | sync (a host thread waiting: its API call's span)
  std::string name;  // kernel name (mangled); a copy's direction and host memory; the sync's API
  uint32_t stream = 0;
  uint64_t bytes = 0;  // memcpy
};

// A copy named as the deployment contract reads it: direction, and the host memory's kind where one
// side is the host (a pageable copy is staged by the driver and waits for the host).
std::string copy_name(const CUpti_ActivityMemcpy6& m) {
  static constexpr const char* kDirection[] = {"copy", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                               "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
  const char* dir = m.copyKind < std::size(kDirection) ? kDirection[m.copyKind] : "copy";
  const bool pageable =
      m.srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE || m.dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  const bool pinned = m.srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED || m.dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  return std::string(dir) + (pageable ? " pageable" : pinned ? " pinned" : "");
}

// The host waits a synchronisation record names (a stream waiting on an event is not one: it is
// recorded on the device, and a graph keeps it as an edge).
const char* sync_name(CUpti_ActivitySynchronizationType type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "cudaEventSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "cudaStreamSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "cudaDeviceSynchronize";
    default: return nullptr;
  }
}

// Records of the harness's own work before a call (upload, poison, the L2 flush) end before the
// call's window opens. The flush kernel is the last of them, and on the H200 its CUPTI end time was
// once read after the window's start (a host timestamp taken after waiting for it): the kernel was
// then attributed to the candidate and rejected as foreign (softmax 8192 x 2048, run 30). A kernel of
// the runner's own namespace that started before the window is the harness's; a candidate's kernel
// cannot start before the call that launches it.
//
// A synchronisation is a host thread's: the candidate's are those its entry point made, between the
// window's start and the entry point's return (the runner's own wait for the call comes after).
struct Window {
  uint64_t seq = 0, begin = 0, entry_end = 0, end = UINT64_MAX;  // CUPTI timestamps around a timed call
};

bool harness_record(const Activity& a, const Window& w) {
  if (a.kind == "sync") return a.start < w.begin || a.start >= w.entry_end;
  if (a.end <= w.begin) return true;
  return a.start < w.begin && a.kind == "kernel" && a.name.starts_with("_ZN3kda6runner");
}

std::mutex g_activity_mu;
std::vector<Activity> g_activities;
// CUPTI asks for a buffer after every flush. A fresh multi-megabyte allocation each time cost ~1 ms
// of page faults per timed call on the H200 (inside the next call's harness work), so completed
// buffers go back to a pool and are handed out again, already faulted in.
constexpr size_t kCuptiBufferBytes = 1u << 20;
std::vector<uint8_t*> g_free_buffers;  // guarded by g_activity_mu

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  {
    std::lock_guard<std::mutex> lock(g_activity_mu);
    if (!g_free_buffers.empty()) {
      *buffer = g_free_buffers.back();
      g_free_buffers.pop_back();
    } else {
      *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kCuptiBufferBytes));
    }
  }
  *size = *buffer != nullptr ? kCuptiBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(g_activity_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    Activity a;
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
        a = {k->start, k->end, "kernel", k->name ? k->name : "", k->streamId};
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
        a = {m->start, m->end, "memcpy", copy_name(*m), m->streamId, m->bytes};
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(rec);
        a = {m->start, m->end, "memset", "", m->streamId};
        break;
      }
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        auto* y = reinterpret_cast<CUpti_ActivitySynchronization2*>(rec);
        const char* name = sync_name(y->type);
        if (name == nullptr) continue;
        a = {y->start, y->end, "sync", name, y->streamId};
        break;
      }
      default: continue;
    }
    g_activities.push_back(std::move(a));
  }
  g_free_buffers.push_back(buffer);
}

std::vector<Activity> drain_activities() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_activity_mu);
  std::vector<Activity> out;
  out.swap(g_activities);
  return out;
}

// A clock in ns. CLOCK_THREAD_CPUTIME_ID is the CPU time of the calling thread: the candidate's host
// work in the call. (The process's CPU time also counts CUPTI's and the driver's own threads:
// 0.6-1.4 ms per call on the H200 for a 7 us kernel, too noisy to judge a candidate by.)
int64_t clock_ns(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Polls a recorded event until it completes.
cudaError_t spin_wait(cudaEvent_t event) {
  cudaError_t e;
  while ((e = cudaEventQuery(event)) == cudaErrorNotReady) {}
  return e;
}

std::string cuda_error(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

class CudaBackend final : public Backend {
 public:
  ~CudaBackend() override {
    if (mirror_ != nullptr) cudaFree(mirror_);
    if (flush_buf_ != nullptr) cudaFree(flush_buf_);
    if (flush_sink_ != nullptr) cudaFree(flush_sink_);
    if (digest_scratch_ != nullptr) cudaFree(digest_scratch_);
    release_staging();
    release_layout();
    drop_graph();
  }

  // (Announced before init: where CUPTI then fails, timed calls carry no records either way, and the
  // evaluator's no_gpu_activity gate rejects them.)
  std::vector<std::string> capabilities() const override { return {"device_inputs", "deferred_records"}; }

  Status init() override {
    if (cudaError_t e = cudaSetDevice(0); e != cudaSuccess)
      return Status::io("cudaSetDevice: " + cuda_error(e) +
                        (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver
                             ? " (no usable NVIDIA GPU here: is one present and its driver loaded? nvidia-smi tells)"
                             : ""));
    // The host thread sleeps in synchronisations instead of spinning, so the CPU time a call uses is
    // the candidate's own host work (the host-CPU-time gate compares it with the GPU's kernel time).
    blocking_sync_ = cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) == cudaSuccess;
    if (cudaError_t e = cudaFree(nullptr); e != cudaSuccess) return Status::io("CUDA init: " + cuda_error(e));
    cudaStreamCreate(&stream_);
    cudaEventCreate(&start_);
    cudaEventCreate(&stop_);
    cudaEventCreateWithFlags(&harness_done_, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&call_done_, cudaEventDisableTiming);
    int l2 = 0;
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
    flush_bytes_ = 2 * static_cast<size_t>(std::max(l2, 1 << 20));
    if (cudaError_t e = cudaMalloc(&flush_buf_, flush_bytes_); e != cudaSuccess)
      return Status::io("cudaMalloc flush buffer: " + cuda_error(e));
    if (cudaError_t e = cudaMalloc(&flush_sink_, sizeof(unsigned int)); e != cudaSuccess)
      return Status::io("cudaMalloc flush sink: " + cuda_error(e));
    cudaMemset(flush_buf_, 0x5A, flush_bytes_);
    if (cudaError_t e = cudaMalloc(&digest_scratch_, 2 * sizeof(uint64_t)); e != cudaSuccess)
      return Status::io("cudaMalloc digest scratch: " + cuda_error(e));
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    device_name_ = prop.name;
    compute_capability_ = std::to_string(prop.major) + std::to_string(prop.minor);
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) != CUPTI_SUCCESS)
      cupti_ok_ = false;
    return {};
  }

  const char* python_device() const override { return "cuda"; }
  nlohmann::json environment() const override {
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
    nlohmann::json env{{"hardware", device_name_ + " (sm_" + compute_capability_ + ")"},
                       {"cuda_driver_api", version(driver)},
                       {"cuda_runtime", version(runtime)}};
    if (const std::string kernel = nvidia_kernel_driver_version(); !kernel.empty()) env["driver"] = kernel;
    return env;
  }

  std::vector<std::filesystem::path> sandbox_devices() const override {
    std::vector<std::filesystem::path> devs;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/dev", ec))
      if (e.path().filename().string().starts_with("nvidia")) devs.push_back(e.path());
    return devs;
  }

  void release_layout() override {
    if (pinned_ != nullptr) cudaHostUnregister(pinned_);
    pinned_ = nullptr;
    pinned_end_ = 0;
  }

  Status set_layout(const eval::ArenaLayout& layout, eval::SharedArena& arena) override {
    drop_graph();  // it holds the previous layout's pointers
    arena_ = &arena;
    layout_ = layout;
    prepared_ = false;
    outputs_begin_ = layout.outputs.empty() ? layout.size : layout.outputs.front().offset - eval::kGuardBytes;
    mirror_bytes_ = layout.size;
    // What a layout needs is kept for the next one that fits (a session cycles through its workloads
    // once per configuration): the device mirror, the staging buffers, the page-locked outputs.
    // The mirror is sized in whole 2 MiB pages, so it starts on a page of its own and a slot's place
    // among the device's pages is the same in every process.
    if (mirror_capacity_ < layout.size) {
      if (mirror_ != nullptr) cudaFree(mirror_);
      mirror_ = nullptr;
      mirror_capacity_ = 0;
      const uint64_t bytes = (std::max<uint64_t>(layout.size, 1) + kDevicePage - 1) / kDevicePage * kDevicePage;
      if (cudaError_t e = cudaMalloc(&mirror_, bytes); e != cudaSuccess)
        return Status::io("cudaMalloc arena mirror (" + std::to_string(bytes) + " B): " + cuda_error(e));
      mirror_capacity_ = bytes;
    }
    // Pinned staging and its device twin: one poison block per output (written on the host, uploaded
    // with one asynchronous copy per call and tiled by a kernel), and per input its two guard bands
    // and digest sums after a checked call. Nothing here needs a synchronisation of its own.
    Staging wanted(layout.inputs.size(), layout.outputs.size());
    if (staging_.host == nullptr || staging_.host_capacity < wanted.host_bytes() ||
        staging_.dev_capacity < wanted.dev_bytes()) {
      release_staging();
      wanted.host_capacity = wanted.host_bytes();
      wanted.dev_capacity = wanted.dev_bytes();
      if (cudaError_t e = cudaMallocHost(&wanted.host, wanted.host_capacity); e != cudaSuccess)
        return Status::io("cudaMallocHost staging: " + cuda_error(e));
      staging_ = wanted;  // owned from here on: release_staging frees what was allocated
      if (cudaError_t e = cudaMalloc(&staging_.dev, staging_.dev_capacity); e != cudaSuccess) {
        release_staging();
        return Status::io("cudaMalloc staging: " + cuda_error(e));
      }
    } else {
      staging_.inputs = wanted.inputs;
      staging_.outputs = wanted.outputs;
    }
    // Scalars stay host values (0-d kDLCPU tensors); tensors live in the device mirror.
    // The output region (whole pages) is page-locked, so checked calls' downloads and host-input
    // uploads of outputs run at full PCIe speed instead of through the driver's staging copies.
    // Only that region: pages of device-generated inputs are never touched on the host, and pinning
    // them would commit them. Optional: where the driver refuses, copies stay pageable.
    if (layout.size > outputs_begin_) {
      const uintptr_t page = 4096;
      const auto begin = reinterpret_cast<uintptr_t>(arena.data() + outputs_begin_) & ~(page - 1);
      const auto end = (reinterpret_cast<uintptr_t>(arena.data() + layout.size) + page - 1) & ~(page - 1);
      if (pinned_ != reinterpret_cast<void*>(begin) || pinned_end_ != end) {
        release_layout();
        if (cudaHostRegister(reinterpret_cast<void*>(begin), end - begin, cudaHostRegisterDefault) == cudaSuccess) {
          pinned_ = reinterpret_cast<void*>(begin);
          pinned_end_ = end;
        } else {
          cudaGetLastError();  // not sticky; clear it so the next call does not report it
        }
      }
    }
    describe_tensors(layout, [&](const eval::Slot& s) {
      return s.scalar ? std::pair<void*, DLDevice>{arena.data() + s.offset, DLDevice{kDLCPU, 0}}
                      : std::pair<void*, DLDevice>{mirror_ + s.offset, DLDevice{kDLCUDA, 0}};
    });
    return bind_python();
  }

  CallReply call(const CallRequest& req) override {
    CallReply r;
    const int64_t t_enter = clock_ns(CLOCK_MONOTONIC);
    if (req.upload) {
      uint64_t from = std::min(req.upload_from, mirror_bytes_);
      if (prepared_) from = std::max(from, outputs_begin_);  // device-generated inputs are never overwritten
      // On the harness stream, waited for by polling with the rest (a synchronous copy sleeps under
      // cudaDeviceScheduleBlockingSync; see the call's synchronisation below).
      if (cudaError_t e = cudaMemcpyAsync(mirror_ + from, arena_->data() + from, mirror_bytes_ - from,
                                          cudaMemcpyHostToDevice, stream_);
          e != cudaSuccess)
        return fail(r, "upload: " + cuda_error(e));
    }
    if (!req.poison.empty()) {
      if (!prepared_) return fail(r, "poison on the device needs device-side inputs (prepare first)");
      if (cudaError_t e = poison_on_device(req.poison); e != cudaSuccess) return fail(r, "poison: " + cuda_error(e));
    }
    const int64_t t_poisoned = clock_ns(CLOCK_MONOTONIC);
    if (req.flush) {
      // Cold L2: drop persisting lines, then read 2x the L2 size through it (clean lines, unlike a memset).
      cudaCtxResetPersistingL2Cache();
      if (cudaError_t e = flush_l2_by_reading(flush_buf_, flush_bytes_, flush_sink_, stream_); e != cudaSuccess)
        return fail(r, "L2 flush: " + cuda_error(e));
    }
    // All harness work is on the harness stream and the previous call ended with a device-wide
    // synchronisation, so waiting for the stream is waiting for the device. Polled, not slept on:
    // a blocking synchronisation's wake-up cost 20-50 us per call on the H200 (call_overhead_bench).
    const int64_t t_flushed = clock_ns(CLOCK_MONOTONIC);
    cudaError_t ready = cudaEventRecord(harness_done_, stream_);
    if (ready == cudaSuccess) ready = spin_wait(harness_done_);
    if (ready != cudaSuccess) return fail(r, "before call: " + cuda_error(ready));
    // Harness activity (upload, poison, flush) has ended by now: records that end before this
    // timestamp are the harness's, and are dropped after the call with one CUPTI flush instead of a
    // forced flush on each side of it.
    uint64_t call_begin = 0;
    if (req.timed && cupti_ok_) cuptiGetTimestamp(&call_begin);
    const int64_t pre_ns = clock_ns(CLOCK_MONOTONIC) - t_enter;
    if (req.profile_range) cudaProfilerStart();
    const int64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    cudaEventRecord(start_, stream_);
    std::string entry_error;
    const bool entry_ok = req.graph == CallRequest::Graph::kNone ? call_entry(stream_, &r.rc, &entry_error)
                                                                 : graph_call(req.graph, &r.rc, &entry_error, r.extra);
    const int64_t cpu1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);  // the candidate's host work: its entry point alone
    uint64_t entry_end = 0;
    if (req.timed && cupti_ok_) cuptiGetTimestamp(&entry_end);
    // Driver functions the call asked for by name and was refused (entry_point_guard.h).
    if (auto refused = take_refused_entry_points(); !refused.empty()) r.extra["driver_entry_points_refused"] = refused;
    // The call's work on the harness stream is polled for, then the device-wide synchronisation waits
    // for side streams. Asleep in a blocking synchronisation while the call ran, the runner read a
    // 2.6 us rmsnorm kernel at 3.3-4.2 us in some processes and not in others; polled, every process
    // read it alike (bench/gpu/call_spread.sh, H200 runs 52-57).
    cudaError_t sync = cudaEventRecord(call_done_, stream_);
    if (sync == cudaSuccess) sync = spin_wait(call_done_);
    if (sync == cudaSuccess) sync = cudaDeviceSynchronize();  // device-wide: work on side streams is waited for
    if (req.profile_range) cudaProfilerStop();
    cudaEventRecord(stop_, stream_);
    spin_wait(stop_);  // recorded after the device-wide synchronisation: done within microseconds
    cudaError_t last = cudaGetLastError();
    if (sync != cudaSuccess) return fail(r, cuda_error(sync));
    if (last != cudaSuccess) return fail(r, cuda_error(last));
    float ms = 0;
    cudaEventElapsedTime(&ms, start_, stop_);
    r.elapsed_ns = static_cast<int64_t>(static_cast<double>(ms) * 1e6);
    const int64_t t_after = clock_ns(CLOCK_MONOTONIC);
    int64_t t_records = t_after;
    if (req.timed && cupti_ok_ && req.defer_records) {
      // The window closes after the device-wide synchronisation: every record of the call ends in it,
      // and the next call's harness work starts after it.
      uint64_t call_end = 0;
      cuptiGetTimestamp(&call_end);
      pending_.push_back({req.seq, call_begin, entry_end, call_end});
      r.extra["deferred"] = true;
      r.extra["seq"] = req.seq;
    } else if (req.timed && cupti_ok_) {
      auto acts = drain_activities();
      attribute_pending(acts);  // records of earlier deferred calls, kept for the next collect
      const Window window{req.seq, call_begin, entry_end};
      std::erase_if(acts, [&](const Activity& a) { return harness_record(a, window); });
      summarize(acts, r.extra);
      t_records = clock_ns(CLOCK_MONOTONIC);
    }
    r.extra["event_ns"] = r.elapsed_ns;
    if (blocking_sync_) r.extra["cpu_ns"] = cpu1 - cpu0;
    if (req.download && !prepared_) {
      if (cudaError_t e = cudaMemcpy(arena_->data(), mirror_, mirror_bytes_, cudaMemcpyDeviceToHost); e != cudaSuccess)
        return fail(r, "download: " + cuda_error(e));
    } else if (req.download) {
      nlohmann::json digests = nlohmann::json::array();
      if (cudaError_t e = download_checked(req.download_outputs, &digests); e != cudaSuccess)
        return fail(r, "download: " + cuda_error(e));
      r.extra["input_digests"] = std::move(digests);
    }
    // Where the runner's own time went: before the call (upload, poison, flush, sync) and after it
    // (CUPTI records, download, digests). The evaluator adds them up in its report's phases.
    const int64_t t_done = clock_ns(CLOCK_MONOTONIC);
    r.extra["pre_ns"] = pre_ns;
    r.extra["post_ns"] = t_done - t_after;
    // The same, step by step: upload + poison, flush launch, waiting for both; CUPTI records
    // (flush and filtering), download with digests.
    r.extra["harness_ns"] = {{"poison", t_poisoned - t_enter},
                             {"flush", t_flushed - t_poisoned},
                             {"wait", t_enter + pre_ns - t_flushed},
                             {"records", t_records - t_after},
                             {"download", t_done - t_records}};
    r.ok = entry_ok;
    if (!r.ok) r.error = entry_error;
    return r;
  }

  nlohmann::json collect_records() override {
    if (!pending_.empty()) attribute_pending(drain_activities());
    nlohmann::json out = std::move(ready_);
    ready_ = nlohmann::json::array();
    return out;
  }

  PrepareReply prepare(const PrepareRequest& req) override {
    PrepareReply r;
    if (req.inputs.size() != layout_.inputs.size()) {
      r.error = "prepare: " + std::to_string(req.inputs.size()) + " input descriptions for " +
                std::to_string(layout_.inputs.size()) + " input slots";
      return r;
    }
    cudaEvent_t t0, t1;
    cudaEventCreate(&t0);
    cudaEventCreate(&t1);
    cudaEventRecord(t0, stream_);
    digest_key_ = req.digest_key;
    auto done = [&](std::string error) {
      cudaEventRecord(t1, stream_);
      cudaEventSynchronize(t1);
      float ms = 0;
      cudaEventElapsedTime(&ms, t0, t1);
      cudaEventDestroy(t0);
      cudaEventDestroy(t1);
      r.elapsed_ns = static_cast<int64_t>(static_cast<double>(ms) * 1e6);
      r.ok = error.empty();
      r.error = std::move(error);
      if (r.ok) prepared_ = true;
      return r;
    };
    for (size_t i = 0; i < req.inputs.size(); ++i) {
      const eval::Slot& s = layout_.inputs[i];
      const PrepareInput& in = req.inputs[i];
      cudaError_t e = cudaSuccess;
      if (!in.random || s.scalar) {
        e = copy_range(s.offset - eval::kGuardBytes, s.offset + s.nbytes + eval::kGuardBytes, cudaMemcpyHostToDevice);
      } else {
        e = copy_guards(s, cudaMemcpyHostToDevice);
        if (e == cudaSuccess)
          e = generate_random_device(mirror_ + s.offset, s.dtype, tensor::checked_numel(s.shape).value_or(0), in.seed,
                                     in.stream, in.fingerprint_seed, stream_);
      }
      if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
      if (e != cudaSuccess) return done("prepare input '" + s.name + "': " + cuda_error(e));
      eval::Digest128 d;
      if (e = digest_slot(s, &d); e != cudaSuccess) return done("digest of input '" + s.name + "': " + cuda_error(e));
      r.digests.push_back({d.lo, d.hi});
    }
    // The output region once, with its guard bands (later calls poison outputs on the device).
    if (cudaError_t e = copy_range(outputs_begin_, mirror_bytes_, cudaMemcpyHostToDevice); e != cudaSuccess)
      return done("upload of the output region: " + cuda_error(e));
    return done("");
  }

 private:
  cudaError_t copy_range(uint64_t begin, uint64_t end, cudaMemcpyKind kind) {
    end = std::min(end, mirror_bytes_);
    if (begin >= end) return cudaSuccess;
    return kind == cudaMemcpyHostToDevice ? cudaMemcpy(mirror_ + begin, arena_->data() + begin, end - begin, kind)
                                          : cudaMemcpy(arena_->data() + begin, mirror_ + begin, end - begin, kind);
  }
  // The CUPTI summary of one call's records: span (first start to last end, any stream, device work
  // only) and the part of it no record covers (idle_ns), kernel time in all and by kernel name, names, record and stream counts; the call's copies by
  // direction and host memory, and the host waits its entry point made, by API.
  static void summarize(const std::vector<Activity>& acts, nlohmann::json& extra) {
    uint64_t lo = UINT64_MAX, hi = 0, kernel_ns = 0;
    size_t device_records = 0;
    std::set<std::string> names;
    std::map<std::string, int64_t> by_name;
    std::set<uint32_t> streams;
    std::map<std::string, std::pair<int64_t, uint64_t>> copy_totals;  // direction and memory -> copies, bytes
    std::map<std::string, int64_t> waits;                             // API -> host waits
    std::vector<DeviceInterval> busy;
    for (const auto& a : acts) {
      if (a.kind == "sync") {
        ++waits[a.name];
        continue;
      }
      ++device_records;
      busy.push_back({a.start, a.end});
      lo = std::min(lo, a.start);
      hi = std::max(hi, a.end);
      streams.insert(a.stream);
      if (a.kind == "kernel") {
        names.insert(a.name);
        kernel_ns += a.end - a.start;
        by_name[a.name] += static_cast<int64_t>(a.end - a.start);
      } else if (a.kind == "memcpy") {
        auto& [count, bytes] = copy_totals[a.name];
        ++count;
        bytes += a.bytes;
      }
    }
    extra["kernel_ns"] = static_cast<int64_t>(kernel_ns);
    extra["kernel_ns_by_name"] = by_name;
    extra["cupti_activities"] = device_records;
    extra["cupti_span_ns"] = device_records == 0 ? 0 : static_cast<int64_t>(hi - lo);
    extra["idle_ns"] = static_cast<int64_t>(idle_within_span(std::move(busy)));  // gaps between launches
    extra["kernels"] = std::vector<std::string>(names.begin(), names.end());
    extra["streams"] = streams.size();
    for (const auto& [what, totals] : copy_totals)
      extra["copies"][what] = {{"count", totals.first}, {"bytes", totals.second}};
    if (!waits.empty()) extra["host_waits"] = waits;
  }

  // Summarises each pending window's records (those that overlap it; records outside every window
  // are the harness's) into ready_, in call order.
  void attribute_pending(const std::vector<Activity>& acts) {
    for (const Window& w : pending_) {
      std::vector<Activity> mine;
      for (const auto& a : acts)
        if (!harness_record(a, w) && a.start < w.end) mine.push_back(a);
      nlohmann::json entry{{"seq", w.seq}};
      summarize(mine, entry);
      ready_.push_back(std::move(entry));
    }
    pending_.clear();
  }

  // Where each piece of the staging buffers lies: per output a poison block (host and device); per
  // input two guard bands (host) and two digest sums (host and device).
  struct Staging {
    size_t inputs = 0, outputs = 0;
    std::byte* host = nullptr;  // pinned
    std::byte* dev = nullptr;
    size_t host_capacity = 0, dev_capacity = 0;  // allocated bytes (kept for later layouts that fit)
    Staging() = default;
    Staging(size_t in, size_t out) : inputs(in), outputs(out) {}
    size_t host_bytes() const {
      return std::max<size_t>(1, outputs * eval::kPoisonBlockBytes + inputs * (2 * eval::kGuardBytes + 16));
    }
    size_t dev_bytes() const { return std::max<size_t>(1, outputs * eval::kPoisonBlockBytes + inputs * 16); }
    std::byte* poison_host(size_t o) const { return host + o * eval::kPoisonBlockBytes; }
    std::byte* poison_dev(size_t o) const { return dev + o * eval::kPoisonBlockBytes; }
    std::byte* guards_host(size_t i) const {
      return host + outputs * eval::kPoisonBlockBytes + i * 2 * eval::kGuardBytes;
    }
    uint64_t* sums_host() const {
      return reinterpret_cast<uint64_t*>(host + outputs * eval::kPoisonBlockBytes + inputs * 2 * eval::kGuardBytes);
    }
    uint64_t* sums_dev() const { return reinterpret_cast<uint64_t*>(dev + outputs * eval::kPoisonBlockBytes); }
  };

  // eval::poison_block tiled over output slots on the device (what SharedArena::poison does on the
  // host). The pinned blocks are free to rewrite: the previous call synchronised the device.
  cudaError_t poison_on_device(const std::vector<std::pair<uint32_t, uint64_t>>& poison) {
    for (const auto& [index, seed] : poison) {
      if (index >= layout_.outputs.size()) return cudaErrorInvalidValue;
      eval::poison_block(layout_.outputs[index].dtype, seed,
                         *reinterpret_cast<std::byte(*)[eval::kPoisonBlockBytes]>(staging_.poison_host(index)));
    }
    if (cudaError_t e =
            cudaMemcpyAsync(staging_.poison_dev(0), staging_.poison_host(0),
                            layout_.outputs.size() * eval::kPoisonBlockBytes, cudaMemcpyHostToDevice, stream_);
        e != cudaSuccess)
      return e;
    for (const auto& [index, seed] : poison) {
      const eval::Slot& s = layout_.outputs[index];
      if (cudaError_t e = tile_on_device(mirror_ + s.offset, s.nbytes, staging_.poison_dev(index),
                                         eval::kPoisonBlockBytes, stream_);
          e != cudaSuccess)
        return e;
    }
    return cudaSuccess;
  }

  // After a checked call on device-side inputs: the output region (outputs and their guards) into the
  // arena, and per input its guard bands and its keyed digest, all queued on the harness stream and
  // waited for once (a synchronous copy per guard band and digest had cost a blocking wake-up each).
  // Without `outputs`, the input guard bands and digests only.
  cudaError_t download_checked(bool outputs, nlohmann::json* digests) {
    const size_t n = layout_.inputs.size();
    cudaError_t e = cudaSuccess;
    if (outputs)
      e = cudaMemcpyAsync(arena_->data() + outputs_begin_, mirror_ + outputs_begin_,
                          mirror_bytes_ - std::min(outputs_begin_, mirror_bytes_), cudaMemcpyDeviceToHost, stream_);
    for (size_t i = 0; i < n && e == cudaSuccess; ++i) {
      const eval::Slot& s = layout_.inputs[i];
      std::byte* g = staging_.guards_host(i);
      e = cudaMemcpyAsync(g, mirror_ + s.offset - eval::kGuardBytes, eval::kGuardBytes, cudaMemcpyDeviceToHost,
                          stream_);
      if (e == cudaSuccess)
        e = cudaMemcpyAsync(g + eval::kGuardBytes, mirror_ + s.offset + s.nbytes, eval::kGuardBytes,
                            cudaMemcpyDeviceToHost, stream_);
      if (e == cudaSuccess)
        e = digest_device_async(mirror_ + s.offset, s.nbytes, digest_key_, staging_.sums_dev() + 2 * i, stream_);
    }
    if (e == cudaSuccess && n > 0)
      e = cudaMemcpyAsync(staging_.sums_host(), staging_.sums_dev(), 2 * n * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                          stream_);
    if (e == cudaSuccess) e = cudaEventRecord(harness_done_, stream_);
    if (e == cudaSuccess) e = spin_wait(harness_done_);
    if (e != cudaSuccess) return e;
    for (size_t i = 0; i < n; ++i) {
      const eval::Slot& s = layout_.inputs[i];
      const std::byte* g = staging_.guards_host(i);
      std::memcpy(arena_->data() + s.offset - eval::kGuardBytes, g, eval::kGuardBytes);
      std::memcpy(arena_->data() + s.offset + s.nbytes, g + eval::kGuardBytes, eval::kGuardBytes);
      const uint64_t* sums = staging_.sums_host() + 2 * i;
      const eval::Digest128 d = eval::digest_finish(sums[0], sums[1], s.nbytes, digest_key_);
      digests->push_back({d.lo, d.hi});
    }
    return cudaSuccess;
  }
  void release_staging() {
    if (staging_.host != nullptr) cudaFreeHost(staging_.host);
    if (staging_.dev != nullptr) cudaFree(staging_.dev);
    staging_ = Staging();
  }
  // The evaluation's keyed digest of a slot of the device mirror.
  cudaError_t digest_slot(const eval::Slot& s, eval::Digest128* out) {
    return digest_device(mirror_ + s.offset, s.nbytes, digest_key_, digest_scratch_, stream_, out);
  }
  cudaError_t copy_guards(const eval::Slot& s, cudaMemcpyKind kind) {
    if (cudaError_t e = copy_range(s.offset - eval::kGuardBytes, s.offset, kind); e != cudaSuccess) return e;
    return copy_range(s.offset + s.nbytes, s.offset + s.nbytes + eval::kGuardBytes, kind);
  }

  // The deployment contract's call (CallRequest::graph). kCapture: the entry point recorded into a graph
  // on the harness stream in global capture mode, instantiated and launched; what broke a capture goes
  // to extra["graph_error"] (the call's own error, then the capture's). kReplay: the captured graph
  // launched again. Either launches on the harness stream; the caller waits as for any call.
  bool graph_call(CallRequest::Graph mode, int* rc, std::string* error, nlohmann::json& extra) {
    if (mode == CallRequest::Graph::kReplay) {
      if (graph_exec_ == nullptr) {
        *error = "graph replay: no graph was captured in this layout";
        return false;
      }
      if (cudaError_t e = cudaGraphLaunch(graph_exec_, stream_); e != cudaSuccess) {
        *error = "graph replay: cudaGraphLaunch: " + cuda_error(e);
        return false;
      }
      *rc = 0;
      return true;
    }
    drop_graph();
    if (cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal); e != cudaSuccess) {
      *error = "graph capture: cudaStreamBeginCapture: " + cuda_error(e);
      return false;
    }
    std::string call_error;
    const bool call_ok = call_entry(stream_, rc, &call_error);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    (void)cudaGetLastError();  // a broken capture is reported below, not left for the next call
    std::string broke;
    if (!call_ok) broke = "the call failed while captured: " + call_error;
    if (ended != cudaSuccess)
      broke += (broke.empty() ? "" : "; ") + std::string("cudaStreamEndCapture: ") + cuda_error(ended);
    if (broke.empty() && graph == nullptr) broke = "cudaStreamEndCapture gave no graph";
    if (broke.empty()) {
      size_t nodes = 0;
      cudaGraphGetNodes(graph, nullptr, &nodes);
      extra["graph_nodes"] = nodes;
      if (cudaError_t e = cudaGraphInstantiate(&graph_exec_, graph, 0); e != cudaSuccess) {
        graph_exec_ = nullptr;
        broke = "cudaGraphInstantiate: " + cuda_error(e);
      }
    }
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (!broke.empty()) {
      extra["graph_error"] = broke;
      *error = "graph capture: " + broke;
      return false;
    }
    if (cudaError_t e = cudaGraphLaunch(graph_exec_, stream_); e != cudaSuccess) {
      *error = "graph capture: cudaGraphLaunch: " + cuda_error(e);
      extra["graph_error"] = *error;
      return false;
    }
    return true;
  }
  void drop_graph() {
    if (graph_exec_ != nullptr) cudaGraphExecDestroy(graph_exec_);
    graph_exec_ = nullptr;
  }

  static CallReply& fail(CallReply& r, std::string msg) {
    r.ok = false;
    r.error = std::move(msg);
    return r;
  }

  cudaStream_t stream_ = nullptr;
  cudaGraphExec_t graph_exec_ = nullptr;  // the contract's captured call (graph_call), for this layout
  cudaEvent_t start_ = nullptr, stop_ = nullptr, harness_done_ = nullptr, call_done_ = nullptr;
  void* flush_buf_ = nullptr;
  size_t flush_bytes_ = 0;
  unsigned int* flush_sink_ = nullptr;
  static constexpr uint64_t kDevicePage = uint64_t{2} << 20;
  std::byte* mirror_ = nullptr;
  uint64_t mirror_capacity_ = 0;  // allocated bytes of mirror_, >= mirror_bytes_
  void* pinned_ = nullptr;        // the page-locked output region of the arena (cudaHostRegister), or null
  uintptr_t pinned_end_ = 0;      // one past its last byte
  Staging staging_;
  std::vector<Window> pending_;                     // deferred calls not yet summarised
  nlohmann::json ready_ = nlohmann::json::array();  // summaries not yet collected
  uint64_t mirror_bytes_ = 0;
  eval::SharedArena* arena_ = nullptr;
  eval::ArenaLayout layout_;
  bool prepared_ = false;       // inputs live on the device (prepare); the arena holds no input bytes
  uint64_t outputs_begin_ = 0;  // first byte of the output region (the first output's leading guard)
  uint64_t digest_key_ = 0;
  uint64_t* digest_scratch_ = nullptr;
  std::string device_name_;
  std::string compute_capability_;
  bool cupti_ok_ = true;
  bool blocking_sync_ = false;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace kda::runner
