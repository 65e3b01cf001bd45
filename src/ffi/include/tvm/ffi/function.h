// TVM_FFI_DLL_EXPORT_TYPED_FUNC(name, f) (kda's subset): exports `__tvm_ffi_<name>`, the packed
// C entry point (c_api.h) that unpacks kda's arguments into f's typed parameters, calls f and
// reports what it raised. Parameter types: TensorView / Tensor (kTVMFFIDLTensorPtr), bool, integers
// (kTVMFFIInt or kTVMFFIBool), float / double (kTVMFFIFloat or kTVMFFIInt), DLDataType, DLDevice,
// void*; by value or const reference. The return type is void or one of the scalar types.
#ifndef KDA_TVM_FFI_FUNCTION_H_
#define KDA_TVM_FFI_FUNCTION_H_

#include <tvm/ffi/c_api.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace tvm {
namespace ffi {
namespace details {

inline const char* type_index_name(int32_t index) {
  switch (index) {
    case kTVMFFINone: return "None";
    case kTVMFFIInt: return "int";
    case kTVMFFIBool: return "bool";
    case kTVMFFIFloat: return "float";
    case kTVMFFIOpaquePtr: return "void*";
    case kTVMFFIDataType: return "DataType";
    case kTVMFFIDevice: return "Device";
    case kTVMFFIDLTensorPtr: return "DLTensor*";
    case kTVMFFIRawStr: return "const char*";
    default: return "object";
  }
}

template <typename T>
T unpack_arg(const TVMFFIAny& a, int i, const char* fn) {
  using U = std::remove_cv_t<std::remove_reference_t<T>>;
  auto mismatch = [&](const char* want) {
    ::tvm::ffi::details::ErrorBuilder("TypeError", nullptr, 0)
        << "Mismatched type on argument #" << i << " when calling `" << fn << "`: expected " << want << ", got "
        << type_index_name(a.type_index);
  };
  if constexpr (std::is_base_of_v<TensorView, U>) {
    if (a.type_index != kTVMFFIDLTensorPtr) mismatch("Tensor");
    return U(static_cast<const DLTensor*>(a.v_ptr));
  } else if constexpr (std::is_same_v<U, bool>) {
    if (a.type_index != kTVMFFIBool && a.type_index != kTVMFFIInt) mismatch("bool");
    return a.v_int64 != 0;
  } else if constexpr (std::is_integral_v<U>) {
    if (a.type_index != kTVMFFIInt && a.type_index != kTVMFFIBool) mismatch("int");
    return static_cast<U>(a.v_int64);
  } else if constexpr (std::is_floating_point_v<U>) {
    if (a.type_index == kTVMFFIFloat) return static_cast<U>(a.v_float64);
    if (a.type_index == kTVMFFIInt || a.type_index == kTVMFFIBool) return static_cast<U>(a.v_int64);
    mismatch("float");
  } else if constexpr (std::is_same_v<U, DLDataType>) {
    if (a.type_index != kTVMFFIDataType) mismatch("DataType");
    return a.v_dtype;
  } else if constexpr (std::is_same_v<U, DLDevice>) {
    if (a.type_index != kTVMFFIDevice) mismatch("Device");
    return a.v_device;
  } else if constexpr (std::is_pointer_v<U> && std::is_void_v<std::remove_pointer_t<U>>) {
    if (a.type_index != kTVMFFIOpaquePtr && a.type_index != kTVMFFINone) mismatch("void*");
    return a.v_ptr;
  } else {
    static_assert(sizeof(U) == 0, "kda's tvm-ffi subset: unsupported parameter type of an exported function");
  }
  return U{};
}

template <typename R>
void pack_result(R&& value, TVMFFIAny* out) {
  using U = std::remove_cv_t<std::remove_reference_t<R>>;
  out->zero_padding = 0;
  if constexpr (std::is_same_v<U, bool>) {
    out->type_index = kTVMFFIBool;
    out->v_int64 = value ? 1 : 0;
  } else if constexpr (std::is_integral_v<U>) {
    out->type_index = kTVMFFIInt;
    out->v_int64 = static_cast<int64_t>(value);
  } else if constexpr (std::is_floating_point_v<U>) {
    out->type_index = kTVMFFIFloat;
    out->v_float64 = static_cast<double>(value);
  } else {
    static_assert(sizeof(U) == 0, "kda's tvm-ffi subset: an exported function returns void or a scalar");
  }
}

template <typename R, typename... Args, size_t... I>
int invoke(R (*f)(Args...), const char* name, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result,
           std::index_sequence<I...>) {
  try {
    if (num_args != static_cast<int32_t>(sizeof...(Args)))
      ErrorBuilder("TypeError", nullptr, 0) << "Mismatched number of arguments when calling `" << name << "`: expected "
                                            << sizeof...(Args) << ", got " << num_args;
    if constexpr (std::is_void_v<R>) {
      f(unpack_arg<Args>(args[I], static_cast<int>(I), name)...);
      result->type_index = kTVMFFINone;
      result->zero_padding = 0;
      result->v_int64 = 0;
    } else {
      pack_result(f(unpack_arg<Args>(args[I], static_cast<int>(I), name)...), result);
    }
    return 0;
  } catch (const Error& e) {
    TVMFFIErrorSetRaisedFromCStr(e.kind().c_str(), e.message().c_str());
  } catch (const std::exception& e) {
    TVMFFIErrorSetRaisedFromCStr("RuntimeError", e.what());
  } catch (...) {
    TVMFFIErrorSetRaisedFromCStr("RuntimeError", "unknown C++ exception");
  }
  return -1;
}

template <typename R, typename... Args>
int invoke(R (*f)(Args...), const char* name, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  return invoke(f, name, args, num_args, result, std::index_sequence_for<Args...>{});
}

}  // namespace details
}  // namespace ffi
}  // namespace tvm

#define TVM_FFI_DLL_EXPORT_TYPED_FUNC(ExportName, Function)                                                \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_##ExportName(void*, const TVMFFIAny* args, int32_t num_args, \
                                                           TVMFFIAny* result) {                            \
    return ::tvm::ffi::details::invoke(+(Function), #ExportName, args, num_args, result);                  \
  }

#endif  // KDA_TVM_FFI_FUNCTION_H_
