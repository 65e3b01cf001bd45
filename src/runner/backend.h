// A runner backend executes calls of one solution library on one target (host CPU or a CUDA GPU).
// It lives in the runner process; the evaluator drives it over the protocol in eval/protocol.h.
#pragma once

#include <array>
#include <filesystem>
#include <optional>
#include <utility>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>
#include <nlohmann/json.hpp>

#include "eval/arena.h"
#include "util/status.h"

namespace kda::runner {

struct CallRequest {
  uint64_t seq = 0;
  bool flush = true;             // flush caches (host LLC / GPU L2) before the call
  bool upload = true;            // cuda: copy the arena to the device mirror before the call...
  uint64_t upload_from = 0;      // ...from this byte offset on (outputs only: skip unchanged inputs)
  bool download = true;          // cuda: copy the device mirror back to the arena after the call
  bool download_outputs = true;  // cuda, device-side inputs: false copies back only input guards and digests
  bool timed = false;            // record timing (events + CUPTI span on cuda, monotonic clock on host)
  bool profile_range = false;    // cuda: bracket the call with cudaProfilerStart/Stop (ncu --profile-from-start off)
  // cuda, timed: keep the call's window and summarise its CUPTI records at the next collect_records()
  // instead of flushing CUPTI now (a forced flush per call cost 0.1-0.4 ms, and the next activity
  // after it another 0.1-0.7 ms while CUPTI set up a new buffer: bench/results/h200, run 17).
  bool defer_records = false;
  // Device-side inputs only: (output index, seed) pairs to poison on the device before the call
  // (eval::poison_block tiled over the slot), instead of uploading host-poisoned outputs.
  std::vector<std::pair<uint32_t, uint64_t>> poison;
};

struct CallReply {
  bool ok = false;    // the solution returned 0 and no runtime error occurred
  int rc = 0;         // the entry point's return value
  std::string error;  // CUDA error or other runtime failure
  int64_t elapsed_ns = 0;
  nlohmann::json extra = nlohmann::json::object();  // cupti span, kernel names, flush info...
};

// Device-side inputs (a backend with the "device_inputs" capability): the evaluator writes only the
// inputs it cannot describe by a seed (blobs, scalars, structured ones) and every guard band into the
// arena; the backend copies those, generates the plain random inputs itself and answers with a keyed
// digest of every input slot. Until the next layout, uploads never overwrite inputs, downloads bring
// back only outputs and guard bands, and every download adds the inputs' digests to the reply.
struct PrepareInput {
  bool random = false;  // false: copy the slot (and its guards) from the arena
  uint64_t seed = 0, stream = 0;
  std::optional<uint64_t> fingerprint_seed;  // eval::copy_fingerprint's positions come from this seed
};

struct PrepareRequest {
  std::vector<PrepareInput> inputs;  // one per input slot, in layout order
  uint64_t digest_key = 0;
};

struct PrepareReply {
  bool ok = false;
  std::string error;
  std::vector<std::array<uint64_t, 2>> digests;  // per input slot
  int64_t elapsed_ns = 0;                        // copy + generation + digests
};

using EntryFn = int (*)(const void* inputs, int64_t num_inputs, void* outputs, int64_t num_outputs, void* stream);

class Backend {
 public:
  virtual ~Backend() = default;
  // Creates the device context and harness resources (before the sandbox is applied).
  virtual Status init() = 0;
  // Device files the sandbox must leave usable (e.g. /dev/nvidia*).
  virtual std::vector<std::filesystem::path> sandbox_devices() const = 0;
  // dlopen (RTLD_NOW | RTLD_LOCAL) + dlsym of the entry point. A symbol `__tvm_ffi_<name>`
  // (TVM_FFI_DLL_EXPORT_TYPED_FUNC) is called with the tvm-ffi packed convention (tvm_ffi_abi.h),
  // any other with kda's C ABI (docs/solutions.md).
  Status load(const std::filesystem::path& library, const std::string& symbol);
  // A new layout over `arena`, which may be the mapping of the previous layout (kept while the
  // evaluator's memfd keeps its size) and may be larger than `layout.size`.
  virtual Status set_layout(const eval::ArenaLayout& layout, eval::SharedArena& arena) = 0;
  // Called before the arena is unmapped (it grew, or the end).
  virtual void release_layout() {}
  virtual CallReply call(const CallRequest& request) = 0;
  // What the backend offers beyond calls ("device_inputs"); told to the evaluator in kHello.
  virtual std::vector<std::string> capabilities() const { return {}; }
  virtual PrepareReply prepare(const PrepareRequest&) { return {.error = "this backend does not generate inputs"}; }
  // The CUPTI summaries of the deferred timed calls since the last collect, in call order (each with
  // its "seq"); an empty array where nothing is deferred.
  virtual nlohmann::json collect_records() { return nlohmann::json::array(); }
  // The machine as this backend sees it after init(), for the traces' provenance: "hardware" (CPU
  // model, or GPU name and compute capability), and on CUDA the "driver" and "cuda_runtime" versions.
  virtual nlohmann::json environment() const = 0;

 protected:
  // Rebuilds the DLTensors passed to the entry point, in definition order; `place` gives each
  // slot's data pointer and device.
  void describe_tensors(const eval::ArenaLayout& layout,
                        const std::function<std::pair<void*, DLDevice>(const eval::Slot&)>& place);

  // One call of the entry point on the described tensors; false with *error set when it failed
  // (kda ABI: "entry point returned N"; tvm-ffi: what the function raised).
  bool call_entry(void* stream, int* rc, std::string* error);

  enum class Abi { kKda, kTvmFfi };
  EntryFn entry_ = nullptr;
  void* tvm_ffi_entry_ = nullptr;
  Abi abi_ = Abi::kKda;
  void* handle_ = nullptr;
  std::vector<DLTensor> inputs_, outputs_;
  std::vector<std::vector<int64_t>> shapes_;   // storage the DLTensors' shape pointers refer to
  std::vector<std::vector<int64_t>> strides_;  // tvm-ffi: compact row-major strides (kda ABI: null)
};

// /proc/cpuinfo's "model name" ("" where there is none); the NVIDIA kernel module's version from
// /proc/driver/nvidia/version ("" where there is none).
std::string cpu_model_name();
std::string nvidia_kernel_driver_version();

std::unique_ptr<Backend> make_host_backend();
// nullptr when kda was built without CUDA.
std::unique_ptr<Backend> make_cuda_backend();

}  // namespace kda::runner
