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

template <typename T>
int64_t read(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return static_cast<int64_t>(v);
}

bool is_scalar(const DLTensor& t) { return t.ndim == 0 && t.device.device_type == kDLCPU; }

TVMFFIAny pack_scalar(const DLTensor& t) {
  TVMFFIAny a{};
  const char* p = static_cast<const char*>(t.data) + t.byte_offset;
  const DLDataType d = t.dtype;
  if (d.code == kDLFloat && d.bits == 32) {
    float v;
    std::memcpy(&v, p, sizeof v);
    a.type_index = kTVMFFIFloat;
    a.v_float64 = v;
  } else if (d.code == kDLFloat && d.bits == 64) {
    a.type_index = kTVMFFIFloat;
    std::memcpy(&a.v_float64, p, 8);
  } else if (d.code == kDLInt && (d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64)) {
    a.type_index = kTVMFFIInt;
    a.v_int64 = d.bits == 8    ? read<int8_t>(p)
                : d.bits == 16 ? read<int16_t>(p)
                : d.bits == 32 ? read<int32_t>(p)
                               : read<int64_t>(p);
  } else if (d.code == kDLUInt && (d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64)) {
    a.type_index = kTVMFFIInt;
    a.v_int64 = d.bits == 8    ? read<uint8_t>(p)
                : d.bits == 16 ? read<uint16_t>(p)
                : d.bits == 32 ? read<uint32_t>(p)
                               : read<uint64_t>(p);
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
  // Reused from call to call: no allocation inside a timed call after the first.
  static thread_local std::vector<TVMFFIAny> args;
  args.clear();
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
  const int rc =
      reinterpret_cast<TVMFFISafeCallType>(fn)(nullptr, args.data(), static_cast<int32_t>(args.size()), &result);
  current_stream = nullptr;
  if (rc != 0) {
    *raised = error_set ? raised_error : "the function returned " + std::to_string(rc) + " without raising an error";
    return rc;
  }
  return 0;
}

}  // namespace kda::runner
