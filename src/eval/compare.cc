#include "eval/compare.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kda::eval {

const char* check_verdict_status(CheckVerdict v) {
  switch (v) {
    case CheckVerdict::kPass: return "PASSED";
    case CheckVerdict::kIncorrectShape: return "INCORRECT_SHAPE";
    case CheckVerdict::kIncorrectDtype: return "INCORRECT_DTYPE";
    case CheckVerdict::kIncorrectNumerical: return "INCORRECT_NUMERICAL";
  }
  return "?";
}

namespace {

// JSON cannot hold Inf/NaN: FlashInfer-Bench serialises them as strings.
nlohmann::json number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

OutputCheck compare_one(const std::string& name, const tensor::Tensor& x, const tensor::Tensor& y,
                        const Tolerance& tol) {
  OutputCheck c;
  c.name = name;
  c.numel = x.numel();
  for (int64_t i = 0; i < x.numel(); ++i) {
    double xv = x.get_as_double(i);
    double yv = y.get_as_double(i);
    bool bad = false;
    if (std::isinf(xv)) {
      ++c.inf;
      bad = true;
    } else if (std::isnan(xv)) {
      ++c.nan;
      bad = true;
    } else {
      double e = std::fabs(xv - yv);
      double r = e / (std::fabs(yv) + 1e-8);
      if (std::isnan(e)) e = r = INFINITY;  // reference NaN: never a wildcard
      c.max_abs = std::max(c.max_abs, e);
      c.max_rel = std::max(c.max_rel, r);
      bad = e > tol.atol && r > tol.rtol;
    }
    if (bad) {
      if (c.first_bad_index < 0) c.first_bad_index = i;
      ++c.failed;
    }
  }
  c.matched_ratio = c.numel == 0 ? 1.0 : 1.0 - static_cast<double>(c.failed) / static_cast<double>(c.numel);
  return c;
}

}  // namespace

CheckResult check_default(const std::vector<std::string>& names, const std::vector<tensor::Tensor>& candidate,
                          const std::vector<tensor::Tensor>& reference, const Tolerance& tol,
                          const std::vector<std::string>& compare) {
  CheckResult res;
  auto fail = [&res](CheckVerdict v, std::string msg) {
    if (res.verdict == CheckVerdict::kPass) {
      res.verdict = v;
      res.message = std::move(msg);
    }
  };
  for (size_t k = 0; k < names.size() && k < candidate.size() && k < reference.size(); ++k) {
    if (!compare.empty() && std::find(compare.begin(), compare.end(), names[k]) == compare.end()) continue;
    const auto& x = candidate[k];
    const auto& y = reference[k];
    if (x.shape() != y.shape()) {
      fail(CheckVerdict::kIncorrectShape, fmt::format("output '{}': shape {} expected {}", names[k],
                                                      tensor::shape_string(x.shape()), tensor::shape_string(y.shape())));
      continue;
    }
    if (x.dtype() != y.dtype()) {
      fail(CheckVerdict::kIncorrectDtype, fmt::format("output '{}': dtype {} expected {}", names[k],
                                                      tensor::dtype_name(x.dtype()), tensor::dtype_name(y.dtype())));
      continue;
    }
    OutputCheck c = compare_one(names[k], x, y, tol);
    res.max_abs = std::max(res.max_abs, c.max_abs);
    res.max_rel = std::max(res.max_rel, c.max_rel);
    res.matched_ratio = std::min(res.matched_ratio, c.matched_ratio);
    if (c.inf > 0)
      fail(CheckVerdict::kIncorrectNumerical, fmt::format("output '{}': {} Inf value(s), first at element {}", c.name,
                                                          c.inf, c.first_bad_index));
    else if (c.nan > 0)
      fail(CheckVerdict::kIncorrectNumerical,
           fmt::format("output '{}': {} NaN value(s) (unwritten or invalid), first at element {}", c.name, c.nan,
                       c.first_bad_index));
    else if (c.matched_ratio < tol.matched_ratio)
      fail(CheckVerdict::kIncorrectNumerical,
           fmt::format("output '{}': {} of {} elements beyond atol {} and rtol {} (matched {:.6f} < {}), first at {}",
                       c.name, c.failed, c.numel, tol.atol, tol.rtol, c.matched_ratio, tol.matched_ratio,
                       c.first_bad_index));
    res.outputs.push_back(std::move(c));
  }
  return res;
}

bool outputs_bitwise_equal(const std::vector<tensor::Tensor>& a, const std::vector<tensor::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].bitwise_equal(b[i])) return false;
  return true;
}

nlohmann::json CheckResult::to_json() const {
  nlohmann::json outs = nlohmann::json::array();
  for (const auto& o : outputs)
    outs.push_back({{"name", o.name}, {"numel", o.numel}, {"failed", o.failed}, {"inf", o.inf}, {"nan", o.nan},
                    {"max_absolute_error", number(o.max_abs)}, {"max_relative_error", number(o.max_rel)},
                    {"matched_ratio", o.matched_ratio}});
  return {{"max_absolute_error", number(max_abs)}, {"max_relative_error", number(max_rel)},
          {"matched_ratio", matched_ratio}, {"outputs", outs}};
}

}  // namespace kda::eval
