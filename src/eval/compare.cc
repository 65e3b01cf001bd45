#include "eval/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "util/parallel.h"

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

// Statistics of one contiguous range of elements; ranges are merged in index order.
struct RangeStats {
  int64_t failed = 0, inf = 0, nan = 0, first_bad = -1;
  double max_abs = 0, max_rel = 0, used = 0;
  std::vector<BadElement> worst;  // largest abs first, at most kWorstKept
};

// An error over its tolerance (a zero tolerance: any error is all of it and more).
double over(double err, double tol) { return tol > 0 ? err / tol : err > 0 ? INFINITY : 0; }

// Keeps `e` among the kWorstKept largest absolute errors (ties: the lower index stays).
void keep_worst(std::vector<BadElement>& worst, const BadElement& e) {
  if (worst.size() == kWorstKept && !(e.abs > worst.back().abs)) return;
  auto at = std::upper_bound(worst.begin(), worst.end(), e,
                             [](const BadElement& a, const BadElement& b) { return a.abs > b.abs; });
  worst.insert(at, e);
  if (worst.size() > kWorstKept) worst.pop_back();
}

// Decodes elements [begin, begin + n) of `t` into doubles: one dtype switch per block, so the
// inner loops stay branch-free for the common types (this runs on every checked call).
void decode_block(const tensor::Tensor& t, int64_t begin, int64_t n, double* out) {
  using tensor::DType;
  const std::byte* base = t.data();
  switch (t.dtype()) {
    case DType::kFloat32:
      for (int64_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, base + 4 * (begin + i), 4);
        out[i] = f;
      }
      return;
    case DType::kBFloat16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, base + 2 * (begin + i), 2);
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        out[i] = f;
      }
      return;
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = t.get_as_double(begin + i);
      return;
  }
}

RangeStats compare_range(const tensor::Tensor& x, const tensor::Tensor& y, int64_t begin, int64_t end,
                         const Tolerance& tol) {
  constexpr int64_t kBlock = 4096;
  RangeStats st;
  std::vector<double> xs(kBlock), ys(kBlock);
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t n = std::min(kBlock, end - b);
    decode_block(x, b, n, xs.data());
    decode_block(y, b, n, ys.data());
    for (int64_t i = 0; i < n; ++i) {
      const double xv = xs[i], yv = ys[i];
      bool bad = false;
      double e = INFINITY, r = INFINITY;
      if (std::isinf(xv)) {
        ++st.inf;
        bad = true;
      } else if (std::isnan(xv)) {
        ++st.nan;
        bad = true;
      } else {
        e = std::fabs(xv - yv);
        r = e / (std::fabs(yv) + 1e-8);
        if (std::isnan(e)) e = r = INFINITY;  // reference NaN: never a wildcard
        st.max_abs = std::max(st.max_abs, e);
        st.max_rel = std::max(st.max_rel, r);
        st.used = std::max(st.used, std::min(over(e, tol.atol), over(r, tol.rtol)));
        bad = e > tol.atol && r > tol.rtol;
      }
      if (bad) {
        if (std::isinf(e)) st.used = INFINITY;
        if (st.first_bad < 0) st.first_bad = b + i;
        ++st.failed;
        keep_worst(st.worst, {b + i, xv, yv, e, r});
      }
    }
  }
  return st;
}

OutputCheck compare_one(const std::string& name, const tensor::Tensor& x, const tensor::Tensor& y,
                        const Tolerance& tol) {
  OutputCheck c;
  c.name = name;
  c.shape = x.shape();
  c.numel = x.numel();
  // Large outputs are split over threads (the H200 host has 16 cores; a 32M-element output is
  // re-checked several times per workload).
  const auto ranges = util::split_ranges(static_cast<uint64_t>(c.numel), uint64_t{1} << 20);
  std::vector<RangeStats> parts(ranges.size());
  util::run_ranges(ranges, [&](size_t k, uint64_t begin, uint64_t end) {
    parts[k] = compare_range(x, y, static_cast<int64_t>(begin), static_cast<int64_t>(end), tol);
  });
  for (const auto& p : parts) {
    c.failed += p.failed;
    c.inf += p.inf;
    c.nan += p.nan;
    c.max_abs = std::max(c.max_abs, p.max_abs);
    c.max_rel = std::max(c.max_rel, p.max_rel);
    c.tolerance_used = std::max(c.tolerance_used, p.used);
    if (c.first_bad_index < 0) c.first_bad_index = p.first_bad;
    for (const auto& e : p.worst) keep_worst(c.worst, e);  // ranges in index order: ties keep the lower index
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
      fail(CheckVerdict::kIncorrectShape,
           fmt::format("output '{}': shape {} expected {}", names[k], tensor::shape_string(x.shape()),
                       tensor::shape_string(y.shape())));
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
    res.tolerance_used = std::max(res.tolerance_used, c.tolerance_used);
    if (c.inf > 0)
      fail(CheckVerdict::kIncorrectNumerical, fmt::format("output '{}': {} Inf value(s), first at {}", c.name, c.inf,
                                                          index_string(c.first_bad_index, c.shape)));
    else if (c.nan > 0)
      fail(CheckVerdict::kIncorrectNumerical,
           fmt::format("output '{}': {} NaN value(s) (unwritten or invalid), first at {}", c.name, c.nan,
                       index_string(c.first_bad_index, c.shape)));
    else if (c.matched_ratio < tol.matched_ratio)
      fail(CheckVerdict::kIncorrectNumerical,
           fmt::format("output '{}': {} of {} elements beyond atol {} and rtol {} (matched {:.6f} < {}), first at {}; "
                       "worst {}",
                       c.name, c.failed, c.numel, tol.atol, tol.rtol, c.matched_ratio, tol.matched_ratio,
                       index_string(c.first_bad_index, c.shape),
                       c.worst.empty() ? std::string("-") : bad_element_string(c.worst.front(), c.shape)));
    res.outputs.push_back(std::move(c));
  }
  return res;
}

std::string index_string(int64_t flat, const std::vector<int64_t>& shape) {
  if (shape.size() <= 1) return fmt::format("[{}]", flat);
  std::vector<int64_t> idx(shape.size());
  int64_t rest = flat;
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t n = std::max<int64_t>(shape[d], 1);
    idx[d] = rest % n;
    rest /= n;
  }
  return fmt::format("[{}]", fmt::join(idx, ", "));
}

std::string bad_element_string(const BadElement& e, const std::vector<int64_t>& shape) {
  return fmt::format("{}: got {:.6g}, expected {:.6g} (abs {:.3g}, rel {:.3g})", index_string(e.index, shape), e.got,
                     e.expected, e.abs, e.rel);
}

bool outputs_bitwise_equal(const std::vector<tensor::Tensor>& a, const std::vector<tensor::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].bitwise_equal(b[i])) return false;
  return true;
}

nlohmann::json CheckResult::to_json() const {
  nlohmann::json outs = nlohmann::json::array();
  for (const auto& o : outputs) {
    outs.push_back({{"name", o.name},
                    {"numel", o.numel},
                    {"failed", o.failed},
                    {"inf", o.inf},
                    {"nan", o.nan},
                    {"max_absolute_error", number(o.max_abs)},
                    {"max_relative_error", number(o.max_rel)},
                    {"matched_ratio", o.matched_ratio},
                    {"tolerance_used", number(o.tolerance_used)}});
    if (!o.worst.empty()) {
      nlohmann::json w = nlohmann::json::array();
      for (const auto& e : o.worst)
        w.push_back(nlohmann::json{{"index", e.index},
                                   {"at", index_string(e.index, o.shape)},
                                   {"got", number(e.got)},
                                   {"expected", number(e.expected)},
                                   {"abs", number(e.abs)},
                                   {"rel", number(e.rel)}});
      outs.back()["worst"] = std::move(w);
    }
  }
  return {{"max_absolute_error", number(max_abs)},
          {"max_relative_error", number(max_rel)},
          {"matched_ratio", matched_ratio},
          {"tolerance_used", number(tolerance_used)},
          {"outputs", outs}};
}

}  // namespace kda::eval
