// What every backend shares: loading the entry point and describing the arena's tensors.
#include "runner/backend.h"

#include <dlfcn.h>

#include <fstream>
#include <sstream>

#include "runner/tvm_ffi_abi.h"

namespace kda::runner {

namespace {

// Where kda-runner lies: libkda-python.so and kda_python.py are installed beside it.
std::filesystem::path executable_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path(".") : exe.parent_path();
}

}  // namespace

Status Backend::start_python(const std::filesystem::path& jit_dir) {
  if (python_ != nullptr) return {};
  const auto dir = executable_dir();
  const auto plugin = dir / "libkda-python.so";
  // RTLD_GLOBAL: extension modules (numpy's, torch's) take the interpreter's symbols from the
  // global scope, as they do in a python3 process.
  void* handle = ::dlopen(plugin.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr)
    return Status::failed(std::string("this kda-runner cannot run Python solutions (built without libpython: ") +
                          ::dlerror() + ")");
  auto make = reinterpret_cast<PythonRuntimeFn>(::dlsym(handle, kPythonRuntimeSymbol));
  if (make == nullptr) return Status::failed(plugin.string() + " does not export " + kPythonRuntimeSymbol);
  PythonRuntime* runtime = make();
  if (std::string e = runtime->start(dir / "kda_python.py", python_device(), jit_dir); !e.empty())
    return Status::failed("Python: " + e);
  python_ = runtime;
  return {};
}

std::vector<std::filesystem::path> Backend::python_read_paths() const {
  return python_ != nullptr ? python_->read_paths() : std::vector<std::filesystem::path>{};
}

std::vector<std::filesystem::path> Backend::python_exec_paths() const {
  return python_ != nullptr ? python_->exec_paths() : std::vector<std::filesystem::path>{};
}

Status Backend::bind_python() {
  if (abi_ != Abi::kPython) return {};
  if (std::string e = python_->bind(inputs_, outputs_); !e.empty()) return Status::failed("Python: " + e);
  return {};
}

Status Backend::load(const std::filesystem::path& library, const std::string& symbol, bool returns_outputs,
                     const std::string& python_module) {
  if (library.extension() == ".py" || !python_module.empty()) {
    if (python_ == nullptr) return Status::failed("a Python solution, and the runner's interpreter was not started");
    if (std::string e = python_->load(library, symbol, returns_outputs, python_module); !e.empty())
      return Status::failed("importing " + library.filename().string() + ": " + e);
    abi_ = Abi::kPython;
    entry_ = nullptr;
    tvm_ffi_entry_ = nullptr;
    return {};
  }
  handle_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) return Status::failed(std::string("dlopen: ") + ::dlerror());
  void* sym = ::dlsym(handle_, symbol.c_str());
  if (sym == nullptr) return Status::failed("entry point '" + symbol + "' not found in " + library.string());
  abi_ = symbol.rfind(kTvmFfiSymbolPrefix, 0) == 0 ? Abi::kTvmFfi : Abi::kKda;
  entry_ = abi_ == Abi::kKda ? reinterpret_cast<EntryFn>(sym) : nullptr;
  tvm_ffi_entry_ = abi_ == Abi::kTvmFfi ? sym : nullptr;
  return {};
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    const auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  }
  return {};
}

std::string nvidia_kernel_driver_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  std::getline(in, line);
  const auto at = line.find("Kernel Module");
  if (at == std::string::npos) return {};
  std::istringstream words(line.substr(at + 13));
  std::string version;
  words >> version;
  return version;
}

bool Backend::call_entry(void* stream, int* rc, std::string* error) {
  if (abi_ == Abi::kPython) {
    const bool ok = python_->call(stream, error);
    *rc = ok ? 0 : -1;
    return ok;
  }
  if (abi_ == Abi::kTvmFfi) {
    *rc = call_tvm_ffi(tvm_ffi_entry_, inputs_, outputs_, stream, error);
    return *rc == 0;
  }
  *rc = entry_(inputs_.data(), static_cast<int64_t>(inputs_.size()), outputs_.data(),
               static_cast<int64_t>(outputs_.size()), stream);
  if (*rc != 0) *error = "entry point returned " + std::to_string(*rc);
  return *rc == 0;
}

void Backend::describe_tensors(const eval::ArenaLayout& layout,
                               const std::function<std::pair<void*, DLDevice>(const eval::Slot&)>& place) {
  inputs_.clear();
  outputs_.clear();
  shapes_.clear();
  strides_.clear();
  shapes_.reserve(layout.inputs.size() + layout.outputs.size());  // no reallocation: pointers stay valid
  strides_.reserve(layout.inputs.size() + layout.outputs.size());
  auto make = [&](const eval::Slot& s) {
    shapes_.push_back(s.shape);
    std::vector<int64_t> strides(s.shape.size());
    int64_t step = 1;
    for (size_t i = s.shape.size(); i-- > 0;) {
      strides[i] = step;
      step *= s.shape[i];
    }
    strides_.push_back(std::move(strides));
    auto [data, device] = place(s);
    DLTensor t{};
    t.data = data;
    t.device = device;
    t.ndim = static_cast<int32_t>(s.shape.size());
    t.dtype = tensor::to_dlpack(s.dtype);
    t.shape = shapes_.back().data();
    if (abi_ == Abi::kTvmFfi && t.ndim > 0) t.strides = strides_.back().data();
    return t;
  };
  for (const auto& s : layout.inputs) inputs_.push_back(make(s));
  for (const auto& s : layout.outputs) outputs_.push_back(make(s));
}

}  // namespace kda::runner
