// FlashInfer-Bench Definition: axes, ordered input/output tensor specs and the reference, with every
// schema rule checked on load; shape resolution and var-axis binding.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "task/json_reader.h"
#include "tensor/dtype.h"
#include "util/diagnostics.h"
#include "util/status.h"

namespace kda::task {

struct AxisSpec {
  enum class Kind { kConst, kVar };
  std::string name;
  Kind kind = Kind::kVar;
  int64_t value = 0;  // kConst only
  std::string description;
  bool operator==(const AxisSpec&) const = default;
};

struct TensorSpec {
  std::string name;
  std::optional<std::vector<std::string>> shape;  // axis names; nullopt = a scalar (JSON null)
  tensor::DType dtype = tensor::DType::kFloat32;
  std::string description;
  bool is_scalar() const { return !shape.has_value(); }
  bool operator==(const TensorSpec&) const = default;
};

struct Definition {
  std::string name;
  std::string op_type;
  std::vector<AxisSpec> axes;       // in file order
  std::vector<TensorSpec> inputs;   // positional call order
  std::vector<TensorSpec> outputs;  // destination-passing order
  std::string reference;            // Python text defining a top-level run(...)
  std::vector<std::string> tags;
  std::string description;
  std::vector<std::string> constraints;  // syntax-free strings, never enforced

  const AxisSpec* axis(const std::string& name) const;
  const TensorSpec* input(const std::string& name) const;
  const TensorSpec* output(const std::string& name) const;
  std::vector<std::string> var_axes() const;
  std::map<std::string, int64_t> const_axes() const;

  ojson to_json() const;  // order-preserving (inputs/outputs keep their order)
  bool operator==(const Definition&) const = default;
};

// Parses and checks a Definition; every problem goes to `diags` (file, JSON pointer). nullopt if any.
std::optional<Definition> definition_from_json(const ojson& j, const std::string& file, Diagnostics& diags);
// Reads a definition JSON file (problems -> diags).
std::optional<Definition> load_definition(const std::filesystem::path& path, Diagnostics& diags);
// Same; the error lists every problem.
Result<Definition> load_definition(const std::filesystem::path& path);

// True when `reference` has a line starting (column 0) with "def run(".
bool has_top_level_run(const std::string& reference);

// Concrete shape of `spec` given axis values (const axes come from the definition; `axes` holds the var
// axes, e.g. a workload's, and may also repeat consts, which must then agree). Scalars give {}.
Result<std::vector<int64_t>> resolve_shape(const Definition& def, const TensorSpec& spec,
                                           const std::map<std::string, int64_t>& axes);

// Binds var axes from concrete input shapes (input name -> shape): each var axis takes its size from the
// first input, in definition order, that uses it; later uses must agree, ranks must match and consts must
// equal their value. Returns all axes (consts and bound vars). Inputs absent from the map are skipped.
Result<std::map<std::string, int64_t>> bind_var_axes(const Definition& def,
                                                     const std::map<std::string, std::vector<int64_t>>& input_shapes);

// Joins diagnostics into one kBadInput status ("file:line: /ptr: msg; ...").
Status diagnostics_status(const Diagnostics& diags);

}  // namespace kda::task
