// Element types of FlashInfer-Bench definitions: names, sizes and DLPack codes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include <dlpack/dlpack.h>

namespace kda::tensor {

enum class DType : uint8_t {
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat8E4M3FN,
  kFloat8E5M2,
  kFloat4E2M1,
  kInt64,
  kInt32,
  kInt16,
  kInt8,
  kUInt8,
  kBool,
};

inline constexpr DType kAllDTypes[] = {DType::kFloat32,    DType::kFloat16,    DType::kBFloat16, DType::kFloat8E4M3FN,
                                       DType::kFloat8E5M2, DType::kFloat4E2M1, DType::kInt64,    DType::kInt32,
                                       DType::kInt16,      DType::kInt8,       DType::kUInt8,    DType::kBool};

// FlashInfer-Bench spelling: "float32", "bfloat16", "float8_e4m3fn", "float4_e2m1", "bool", ...
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);

// safetensors spelling: "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F4" (kda: packed e2m1), "I64", ..., "U8", "BOOL".
std::string_view safetensors_name(DType t);
std::optional<DType> dtype_from_safetensors(std::string_view name);

// Storage bits per element (fp4 is 4: two elements per byte, low nibble first).
int dtype_bits(DType t);
// Bytes for n elements (fp4 rounds up to whole bytes).
int64_t dtype_storage_bytes(DType t, int64_t n);

bool is_float(DType t);
bool is_integer(DType t);  // bool and uint8 count as integers

// DLPack type descriptor (lanes = 1). fp8/fp4 use the DLPack 1.0 codes
// (kDLFloat8_e4m3fn = 10, kDLFloat8_e5m2 = 12, kDLFloat4_e2m1fn = 17) as raw numbers,
// because older dlpack.h headers (Debian 12 ships 0.6) do not name them.
DLDataType to_dlpack(DType t);
std::optional<DType> from_dlpack(DLDataType d);

}  // namespace kda::tensor
