// Calls of solutions with the tvm-ffi binding: kda-runner is the caller of a library's
// `__tvm_ffi_<name>` (src/ffi/include/tvm/ffi/c_api.h) and the environment it reads during a call
// (TVMFFIEnvGetStream, TVMFFIErrorSetRaisedFromCStr, defined in tvm_ffi_abi.cc and exported from
// the executable).
#pragma once

#include <string>
#include <vector>

#include <dlpack/dlpack.h>

namespace kda::runner {

// The prefix TVM_FFI_DLL_EXPORT_TYPED_FUNC gives the exported symbol.
inline constexpr const char* kTvmFfiSymbolPrefix = "__tvm_ffi_";

// Calls `fn` (a TVMFFISafeCallType) with the definition's inputs then outputs, in order
// (destination-passing style): tensors as DLTensor pointers, scalars (0-d host tensors) as the
// int, bool or float value they hold; the current stream is `stream` for the duration of the call.
// Returns 0, or -1 with *raised set to "<kind>: <message>" (what the function raised, or why kda
// could not call it).
int call_tvm_ffi(void* fn, std::vector<DLTensor>& inputs, std::vector<DLTensor>& outputs, void* stream,
                 std::string* raised);

}  // namespace kda::runner
