// safetensors files: strict header validation, single-tensor reads, atomic writes.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON, then the data section. The JSON is an object
// mapping tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data
// section), plus an optional "__metadata__" object of string values. kda checks every rule of the format: N fits
// the file and a 100 MB cap; the JSON is an object; every dtype is one kda knows (dtype.h, "F4" = float4_e2m1
// packed two per byte, low nibble first, odd counts rounded up to whole bytes); shapes are non-negative integers;
// end - begin is exactly the tensor's byte size; sorted by offset, the tensors tile the data section with no gap,
// overlap or trailing bytes. Unknown fields inside a tensor entry are ignored (forward compatibility).
// Every failure is Status::bad_input naming the file and, where there is one, the tensor key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/tensor.h"
#include "util/status.h"

namespace kda::tensor {

inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets within the data section
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> tensors;  // in data-section order (by begin offset)
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // absolute file offset of the data section (8 + header length)
  uint64_t file_size = 0;
};

// Reads and validates the header only (the data section is not read). Missing file: not_found.
Result<SafetensorsHeader> read_safetensors_header(const std::filesystem::path& path);

// Reads one tensor. Unknown name: not_found naming the file and the key.
Result<Tensor> read_safetensors_tensor(const std::filesystem::path& path, const std::string& name);

// Reads every tensor, in data-section order, with one header parse.
Result<std::vector<std::pair<std::string, Tensor>>> read_safetensors(const std::filesystem::path& path);

// Writes the tensors, in the given order, atomically (temp file + rename). The JSON header is padded with spaces to
// a multiple of 8 bytes so that the data section is 8-byte aligned. Names must be unique and not "__metadata__".
Status write_safetensors(const std::filesystem::path& path,
                         const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// The validation behind read_safetensors_header, on bytes in memory: `prefix` holds the file's first bytes (at
// least 8 + N of them, or the whole file), `file_size` the file's full size; `source` names the file in errors.
Result<SafetensorsHeader> parse_safetensors_header(std::string_view prefix, uint64_t file_size,
                                                   std::string_view source);

// Serialises tensors exactly as write_safetensors writes them (for in-memory use and tests).
Result<std::string> serialize_safetensors(const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                                          const std::map<std::string, std::string>& metadata = {});

}  // namespace kda::tensor
