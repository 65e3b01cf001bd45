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
#include "eval/protocol.h"
#include "runner/python_runtime.h"
#include "util/status.h"

namespace kda::runner {

// The protocol's messages (eval/protocol.h), as the backend takes and answers them.
using CallRequest = eval::CallRequest;
using CallReply = eval::CallReply;
using PrepareInput = eval::PrepareInput;
using PrepareRequest = eval::PrepareRequest;
using PrepareReply = eval::PrepareReply;

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
  // any other with kda's C ABI (docs/solutions.md). A Python solution (start_python() first):
  // `library` is its entry file and `symbol` the function, imported by the embedded interpreter.
  // python_module: a compiled extension module (binding "torch"), imported like a Python solution.
  Status load(const std::filesystem::path& library, const std::string& symbol, bool returns_outputs = false,
              const std::string& python_module = {});
  // Before the sandbox: opens libkda-python.so beside this executable and starts its interpreter
  // for this backend's device ("cpu" or "cuda"). The interpreter's directories join the sandbox's
  // read-only paths (python_read_paths()). `jit_dir` (a triton solution): where its JIT compiler
  // writes (PythonRuntime::start); the programs it may run are python_exec_paths().
  Status start_python(const std::filesystem::path& jit_dir = {});
  std::vector<std::filesystem::path> python_read_paths() const;
  std::vector<std::filesystem::path> python_exec_paths() const;
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
  // "cpu" or "cuda": the device the Python glue imports its array library for.
  virtual const char* python_device() const = 0;
  // After describe_tensors, for a Python solution: its views of the new tensors.
  Status bind_python();

  // Rebuilds the DLTensors passed to the entry point, in definition order; `place` gives each
  // slot's data pointer and device.
  void describe_tensors(const eval::ArenaLayout& layout,
                        const std::function<std::pair<void*, DLDevice>(const eval::Slot&)>& place);

  // One call of the entry point on the described tensors; false with *error set when it failed
  // (kda ABI: "entry point returned N"; tvm-ffi: what the function raised).
  bool call_entry(void* stream, int* rc, std::string* error);

  enum class Abi { kKda, kTvmFfi, kPython };
  EntryFn entry_ = nullptr;
  void* tvm_ffi_entry_ = nullptr;
  Abi abi_ = Abi::kKda;
  void* handle_ = nullptr;
  PythonRuntime* python_ = nullptr;  // started by start_python()
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
