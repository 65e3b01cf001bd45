/* kda's implementation of the tvm-ffi C ABI subset that FlashInfer-Bench solutions use, written
 * from the public ABI description (type indices, the 16-byte TVMFFIAny, the packed-call signature).
 * A solution with "binding": "tvm-ffi" is compiled against these headers; kda-runner is its caller
 * and provides the functions declared here (src/runner/tvm_ffi_abi.cc). See docs/solutions.md. */
#ifndef KDA_TVM_FFI_C_API_H_
#define KDA_TVM_FFI_C_API_H_

#include <dlpack/dlpack.h>
#include <stdint.h>

#ifndef TVM_FFI_DLL_EXPORT
#define TVM_FFI_DLL_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Type indices of the values a TVMFFIAny holds (the public numbering; kda passes the first eight). */
enum {
  kTVMFFINone = 0,
  kTVMFFIInt = 1,
  kTVMFFIBool = 2,
  kTVMFFIFloat = 3,
  kTVMFFIOpaquePtr = 4,
  kTVMFFIDataType = 5,
  kTVMFFIDevice = 6,
  kTVMFFIDLTensorPtr = 7,
  kTVMFFIRawStr = 8,
  kTVMFFIByteArrayPtr = 9,
  kTVMFFIObjectRValueRef = 10,
  kTVMFFISmallStr = 11,
  kTVMFFISmallBytes = 12,
  kTVMFFIStaticObjectBegin = 64
};

/* One argument or result: 16 bytes, a type index and an 8-byte payload. */
typedef struct {
  int32_t type_index;
  uint32_t zero_padding;
  union {
    int64_t v_int64;
    double v_float64;
    void* v_ptr;
    const char* v_c_str;
    DLDataType v_dtype;
    DLDevice v_device;
  };
} TVMFFIAny;

typedef void* TVMFFIStreamHandle;
typedef void* TVMFFIObjectHandle;

/* What TVM_FFI_DLL_EXPORT_TYPED_FUNC(name, f) exports as __tvm_ffi_<name>: 0 on success, -1 when
 * the function raised (the error was set with TVMFFIErrorSetRaisedFromCStr). */
typedef int (*TVMFFISafeCallType)(void* handle, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result);

/* Records the error the current call raised (kind such as "ValueError", and its message). */
void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message);

#ifdef __cplusplus
}
#endif

#endif /* KDA_TVM_FFI_C_API_H_ */
