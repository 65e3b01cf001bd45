#include "runner/tvm_ffi_abi.h"

#include <cstring>
#include <vector>

#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>

namespace {

// The state of the call in progress (calls are made from one thread; thread_local keeps a
// candidate's own threads from reading another call's state).
thread_local void* current_stream = nullptr;
thread_local std::string raised_error;
thread_local bool error_set = false;

bool is_scalar(const DLTensor& t) { return t.ndim == 0 && t.device.device_type == kDLCPU; }

TVMFFIAny pack_scalar(const DLTensor& t) {
  TVMFFIAny a{};
  const char* p = static_cast<const char*>(t.data) + t.byte_offset;
  const DLDataType d = t.dtype;
  if (d.code == kDLFloat && d.bits == 32) {
    float v;
    std::memcpy(&v, p, 4);
    a.type_index = kTVMFFIFloat;
    a.v_float64 = v;
  } else if (d.code == kDLFloat && d.bits == 64) {
    a.type_index = kTVMFFIFloat;
    std::memcpy(&a.v_float64, p, 8);
  } else if ((d.code == kDLInt || d.code == kDLUInt) && (d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64)) {
    int64_t v = 0;
    if (d.code == kDLInt) {
      if (d.bits == 8) v = *reinterpret_cast<const int8_t*>(p);
      if (d.bits == 16) { int16_t x; std::memcpy(&x, p, 2); v = x; }
      if (d.bits == 32) { int32_t x; std::memcpy(&x, p, 4); v = x; }
      if (d.bits == 64) std::memcpy(&v, p, 8);
    } else {
      if (d.bits == 8) v = *reinterpret_cast<const uint8_t*>(p);
      if (d.bits == 16) { uint16_t x; std::memcpy(&x, p, 2); v = x; }
      if (d.bits == 32) { uint32_t x; std::memcpy(&x, p, 4); v = x; }
      if (d.bits == 64) { uint64_t x; std::memcpy(&x, p, 8); v = static_cast<int64_t>(x); }
    }
    a.type_index = kTVMFFIInt;
    a.v_int64 = v;
  } else if (d.code == 6 /* kDLBool, DLPack 1.0 */ && d.bits == 8) {
    a.type_index = kTVMFFIBool;
    a.v_int64 = *reinterpret_cast<const uint8_t*>(p) != 0;
  } else {
    // A scalar of another dtype (e.g. a bf16 0-d input) is passed as the tensor it is.
    a.type_index = kTVMFFIDLTensorPtr;
    a.v_ptr = const_cast<DLTensor*>(&t);
  }
  return a;
}

}  // namespace

extern "C" {

TVMFFIStreamHandle TVMFFIEnvGetStream(int32_t device_type, int32_t /*device_id*/) {
  return device_type == kDLCUDA ? current_stream : nullptr;
}

void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message) {
  raised_error = std::string(kind != nullptr ? kind : "Error") + ": " + (message != nullptr ? message : "");
  if (raised_error.size() > 4096) raised_error.resize(4096);
  error_set = true;
}

}  // extern "C"

namespace kda::runner {

int call_tvm_ffi(void* fn, std::vector<DLTensor>& inputs, std::vector<DLTensor>& outputs, void* stream,
                 std::string* raised) {
  std::vector<TVMFFIAny> args;
  args.reserve(inputs.size() + outputs.size());
  for (auto* group : {&inputs, &outputs}) {
    for (DLTensor& t : *group) {
      if (is_scalar(t)) {
        args.push_back(pack_scalar(t));
        continue;
      }
      TVMFFIAny a{};
      a.type_index = kTVMFFIDLTensorPtr;
      a.v_ptr = &t;
      args.push_back(a);
    }
  }
  TVMFFIAny result{};
  current_stream = stream;
  error_set = false;
  raised_error.clear();
  const int rc = reinterpret_cast<TVMFFISafeCallType>(fn)(nullptr, args.data(), static_cast<int32_t>(args.size()), &result);
  current_stream = nullptr;
  if (rc != 0) {
    *raised = error_set ? raised_error : "the function returned " + std::to_string(rc) + " without raising an error";
    return rc;
  }
  return 0;
}

}  // namespace kda::runner
