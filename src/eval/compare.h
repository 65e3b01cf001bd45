// Correctness checkers. `default` follows FlashInfer-Bench exactly: shape -> dtype -> any Inf in
// the candidate -> any NaN -> per element failure iff |x-y| > atol AND |x-y|/(|y|+1e-8) > rtol ->
// matched ratio >= required. Errors are computed in double from the stored values.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tensor/tensor.h"

namespace kda::eval {

enum class CheckVerdict { kPass, kIncorrectShape, kIncorrectDtype, kIncorrectNumerical };
const char* check_verdict_status(CheckVerdict v);  // FlashInfer-Bench status string

struct Tolerance {
  double atol = 1e-2;
  double rtol = 1e-2;
  double matched_ratio = 1.0;
};

// One element beyond tolerance: where, what the candidate wrote, what the reference holds.
struct BadElement {
  int64_t index = 0;  // flat, row-major
  double got = 0, expected = 0;
  double abs = 0, rel = 0;  // Inf for a non-finite candidate value
};

// How many of the worst elements each output keeps (by absolute error).
inline constexpr size_t kWorstKept = 3;

struct OutputCheck {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int64_t failed = 0;  // elements beyond tolerance (or Inf/NaN)
  int64_t inf = 0;
  int64_t nan = 0;
  double max_abs = 0;
  double max_rel = 0;
  double matched_ratio = 1.0;
  // The error budget spent: over the elements, the largest min(abs / atol, rel / rtol); an element
  // fails where this exceeds 1 (Inf for an Inf or NaN candidate value).
  double tolerance_used = 0;
  int64_t first_bad_index = -1;
  std::vector<BadElement> worst;  // up to kWorstKept, the largest absolute error first
};

// "[i, j]" of a flat row-major index in `shape` ("[k]" for a flat or empty shape).
std::string index_string(int64_t flat, const std::vector<int64_t>& shape);
// "[i, j]: got x, expected y (abs e, rel r)".
std::string bad_element_string(const BadElement& e, const std::vector<int64_t>& shape);

struct CheckResult {
  CheckVerdict verdict = CheckVerdict::kPass;
  std::string message;  // the first reason for failing, naming the output
  std::vector<OutputCheck> outputs;
  double max_abs = 0;
  double max_rel = 0;
  double matched_ratio = 1.0;  // minimum over compared outputs
  double tolerance_used = 0;   // maximum over compared outputs
  nlohmann::json to_json() const;
};

// Compares candidate outputs with reference outputs, output by output in definition order.
// `compare` selects which outputs count (empty = all).
CheckResult check_default(const std::vector<std::string>& names, const std::vector<tensor::Tensor>& candidate,
                          const std::vector<tensor::Tensor>& reference, const Tolerance& tol,
                          const std::vector<std::string>& compare = {});

// True when every output is bitwise identical (the determinism gate).
bool outputs_bitwise_equal(const std::vector<tensor::Tensor>& a, const std::vector<tensor::Tensor>& b);

}  // namespace kda::eval
