// DLDataType helpers of tvm-ffi (kda's subset): comparison and the usual names ("float32", "bfloat16").
#ifndef KDA_TVM_FFI_DTYPE_H_
#define KDA_TVM_FFI_DTYPE_H_

#include <dlpack/dlpack.h>

#include <string>

inline bool operator==(const DLDataType& a, const DLDataType& b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}
inline bool operator!=(const DLDataType& a, const DLDataType& b) { return !(a == b); }

namespace tvm {
namespace ffi {

inline std::string DLDataTypeToString(DLDataType t) {
  std::string name;
  switch (t.code) {
    case 0: name = "int"; break;     // kDLInt
    case 1: name = "uint"; break;    // kDLUInt
    case 2: name = "float"; break;   // kDLFloat
    case 4: name = "bfloat"; break;  // kDLBfloat
    case 6: return "bool";           // kDLBool (DLPack 1.0)
    case 10: return "float8_e4m3fn";
    case 12: return "float8_e5m2";
    case 17: return "float4_e2m1fn";
    default: name = "code" + std::to_string(t.code) + "_"; break;
  }
  name += std::to_string(t.bits);
  if (t.lanes != 1) name += "x" + std::to_string(t.lanes);
  return name;
}

}  // namespace ffi
}  // namespace tvm

#endif  // KDA_TVM_FFI_DTYPE_H_
