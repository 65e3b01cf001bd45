// kda-runner's definitions of the CUDA runtime's driver-entry-point lookups (exported from the
// executable, so a candidate library's imports bind here before libcudart): see entry_point_guard.h.
#include <dlfcn.h>

#include <string_view>

#include <cuda_runtime_api.h>

#include "runner/entry_point_guard.h"

namespace {

using Unversioned = cudaError_t (*)(const char*, void**, unsigned long long, cudaDriverEntryPointQueryResult*);
using Versioned = cudaError_t (*)(const char*, void**, unsigned int, unsigned long long,
                                  cudaDriverEntryPointQueryResult*);

template <class Fn>
Fn next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// A refused lookup answers as the runtime does for a symbol it does not know.
cudaError_t refuse(const char* symbol, void** fn, cudaDriverEntryPointQueryResult* status) {
  kda::runner::record_refused_entry_point(symbol == nullptr ? "(null)" : symbol);
  if (fn != nullptr) *fn = nullptr;
  if (status != nullptr) *status = cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

// The CUDA libraries themselves (and the runner) are trusted callers: should the runtime or CUPTI
// look a driver function up through the exported name, it gets it. Every other caller is candidate
// code (its library, or code it generated, which the audit forbids anyway).
bool trusted_caller(const void* caller) {
  Dl_info info{};
  if (dladdr(caller, &info) == 0 || info.dli_fname == nullptr) return false;
  const std::string_view file(info.dli_fname);
  const std::string_view base = file.substr(file.rfind('/') == std::string_view::npos ? 0 : file.rfind('/') + 1);
  return base.starts_with("libcudart.so") || base.starts_with("libcupti.so") || base.starts_with("libcuda.so") ||
         base == "kda-runner";
}

// A lookup by an untrusted caller of a symbol that is not allowed is refused; any other goes to the
// real runtime function `real` (resolved once, by the caller's own spelling).
template <class Real, class... Args>
cudaError_t guarded(const void* caller, Real real, const char* symbol, void** fn,
                    cudaDriverEntryPointQueryResult* status, Args... args) {
  const bool ok = trusted_caller(caller) || (symbol != nullptr && kda::runner::allowed_driver_entry_point(symbol));
  if (!ok) return refuse(symbol, fn, status);
  return real != nullptr ? real(symbol, fn, args..., status) : cudaErrorNotSupported;
}

}  // namespace

extern "C" {

// The header maps these names to *_ptsz under per-thread default streams; the runner is not built
// that way, so both spellings are defined here by hand.
#undef cudaGetDriverEntryPoint
#undef cudaGetDriverEntryPointByVersion

__attribute__((visibility("default"))) cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** fn,
                                                                           unsigned long long flags,
                                                                           cudaDriverEntryPointQueryResult* status) {
  static const auto real = next<Unversioned>("cudaGetDriverEntryPoint");
  return guarded(__builtin_return_address(0), real, symbol, fn, status, flags);
}
__attribute__((visibility("default"))) cudaError_t cudaGetDriverEntryPoint_ptsz(
    const char* symbol, void** fn, unsigned long long flags, cudaDriverEntryPointQueryResult* status) {
  static const auto real = next<Unversioned>("cudaGetDriverEntryPoint_ptsz");
  return guarded(__builtin_return_address(0), real, symbol, fn, status, flags);
}
__attribute__((visibility("default"))) cudaError_t cudaGetDriverEntryPointByVersion(
    const char* symbol, void** fn, unsigned int version, unsigned long long flags,
    cudaDriverEntryPointQueryResult* status) {
  static const auto real = next<Versioned>("cudaGetDriverEntryPointByVersion");
  return guarded(__builtin_return_address(0), real, symbol, fn, status, version, flags);
}
__attribute__((visibility("default"))) cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char* symbol, void** fn, unsigned int version, unsigned long long flags,
    cudaDriverEntryPointQueryResult* status) {
  static const auto real = next<Versioned>("cudaGetDriverEntryPointByVersion_ptsz");
  return guarded(__builtin_return_address(0), real, symbol, fn, status, version, flags);
}

}  // extern "C"
