#include "tensor/dtype.h"

namespace kda::tensor {

namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  std::string_view st_name;
  int bits;
  uint8_t dl_code;
};

// DLPack type codes (DLDataTypeCode): 0 int, 1 uint, 2 float, 4 bfloat, 6 bool; 1.0 adds the fp8/fp4 codes.
constexpr uint8_t kDLIntCode = 0, kDLUIntCode = 1, kDLFloatCode = 2, kDLBfloatCode = 4, kDLBoolCode = 6;
constexpr uint8_t kDLFloat8E4M3FN = 10, kDLFloat8E5M2 = 12, kDLFloat4E2M1FN = 17;

constexpr DTypeInfo kInfo[] = {
    {DType::kFloat32, "float32", "F32", 32, kDLFloatCode},
    {DType::kFloat16, "float16", "F16", 16, kDLFloatCode},
    {DType::kBFloat16, "bfloat16", "BF16", 16, kDLBfloatCode},
    {DType::kFloat8E4M3FN, "float8_e4m3fn", "F8_E4M3", 8, kDLFloat8E4M3FN},
    {DType::kFloat8E5M2, "float8_e5m2", "F8_E5M2", 8, kDLFloat8E5M2},
    {DType::kFloat4E2M1, "float4_e2m1", "F4", 4, kDLFloat4E2M1FN},
    {DType::kInt64, "int64", "I64", 64, kDLIntCode},
    {DType::kInt32, "int32", "I32", 32, kDLIntCode},
    {DType::kInt16, "int16", "I16", 16, kDLIntCode},
    {DType::kInt8, "int8", "I8", 8, kDLIntCode},
    {DType::kUInt8, "uint8", "U8", 8, kDLUIntCode},
    {DType::kBool, "bool", "BOOL", 8, kDLBoolCode},
};

const DTypeInfo& info(DType t) { return kInfo[static_cast<int>(t)]; }

}  // namespace

std::string_view dtype_name(DType t) { return info(t).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.name == name) return i.type;
  return std::nullopt;
}

std::string_view safetensors_name(DType t) { return info(t).st_name; }

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.st_name == name) return i.type;
  return std::nullopt;
}

int dtype_bits(DType t) { return info(t).bits; }

int64_t dtype_storage_bytes(DType t, int64_t n) { return (n * dtype_bits(t) + 7) / 8; }

bool is_float(DType t) { return t <= DType::kFloat4E2M1; }
bool is_integer(DType t) { return !is_float(t); }

DLDataType to_dlpack(DType t) {
  const auto& i = info(t);
  return DLDataType{i.dl_code, static_cast<uint8_t>(i.bits), 1};
}

std::optional<DType> from_dlpack(DLDataType d) {
  if (d.lanes != 1) return std::nullopt;
  for (const auto& i : kInfo)
    if (i.dl_code == d.code && i.bits == d.bits) return i.type;
  return std::nullopt;
}

}  // namespace kda::tensor
