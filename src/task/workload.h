// FlashInfer-Bench Workload: var-axis values and per-input specs (random, scalar by value, safetensors
// blob), and the checks of a workload against its Definition.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "task/definition.h"
#include "task/json_reader.h"
#include "util/diagnostics.h"
#include "util/status.h"

namespace kda::task {

struct InputSpec {
  enum class Kind { kRandom, kScalar, kSafetensors };
  Kind kind = Kind::kRandom;
  nlohmann::json value;    // kScalar: the number or bool
  std::string path;        // kSafetensors: relative to the dataset root / pack directory
  std::string tensor_key;  // kSafetensors
  nlohmann::json to_json() const;
  bool operator==(const InputSpec&) const = default;
};

struct Workload {
  std::string uuid;
  std::map<std::string, int64_t> axes;      // var axis values
  std::map<std::string, InputSpec> inputs;  // inputs not listed are random
  nlohmann::json to_json() const;
  bool operator==(const Workload&) const = default;
  // The spec of `input` (random when not listed).
  InputSpec input(const std::string& name) const;
};

// Parses the Workload object at `pointer` (schema only; no definition needed).
std::optional<Workload> workload_from_json(const ojson& j, const std::string& file, int line,
                                           const std::string& pointer, Diagnostics& diags);

// Where safetensors paths are resolved and checked.
struct BlobCheck {
  std::filesystem::path root;  // dataset root or pack directory
};

// Checks `w` against `def`: axes declared, every var axis given (>= 0), consts consistent; inputs name only
// definition inputs; scalars by value (a scalar input takes random or scalar, a tensor input never scalar);
// scalar values fit the dtype; safetensors paths relative without "..". With `blobs`, safetensors files must
// exist and hold `tensor_key` with exactly the resolved shape and dtype. Problems name `pointer` + field.
void check_workload(const Definition& def, const Workload& w, const std::string& file, int line,
                    const std::string& pointer, Diagnostics& diags, const BlobCheck* blobs);

// All axis values of `w` for `def` (consts and the workload's var axes); error if a var axis is missing.
Result<std::map<std::string, int64_t>> workload_axes(const Definition& def, const Workload& w);

// A relative path without "..", absolute roots or empty components (source paths, blob paths).
bool is_safe_relative_path(const std::string& path);

// Checks one safetensors input (implemented in blob_check.cc on top of tensor/safetensors.h).
void check_safetensors_blob(const BlobCheck& blobs, const InputSpec& spec, const std::vector<int64_t>& shape,
                            tensor::DType dtype, const std::string& file, int line, const std::string& pointer,
                            Diagnostics& diags);

}  // namespace kda::task
