#include "eval/probes.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

namespace kda::eval {

namespace {

// The largest finite magnitude a probe may write: fp8 formats saturate to NaN (e4m3fn) or Inf.
double max_finite(tensor::DType d) {
  switch (d) {
    case tensor::DType::kFloat8E4M3FN: return 448.0;
    case tensor::DType::kFloat8E5M2: return 57344.0;
    case tensor::DType::kFloat4E2M1: return 6.0;
    case tensor::DType::kFloat16: return 65504.0;
    default: return 1e30;
  }
}

}  // namespace

ProbeApplied apply_probe(task::Probe probe, uint64_t seed, const std::string& name, tensor::Tensor& t) {
  if (!tensor::is_float(t.dtype())) return {name + ": not floating-point, left as is"};
  std::mt19937_64 rng(seed);
  const int64_t n = t.numel();
  const double limit = max_finite(t.dtype());
  auto put = [&](int64_t i, double v) { t.set_from_double(i, std::clamp(v, -limit, limit)); };
  switch (probe) {
    case task::Probe::kOffset: {
      const double c = std::uniform_real_distribution<double>(2.0, 4.0)(rng) * ((rng() & 1) ? 1 : -1);
      for (int64_t i = 0; i < n; ++i) put(i, t.get_as_double(i) + c);
      return {fmt::format("{} {} {:.3f}", name, c < 0 ? '-' : '+', std::fabs(c))};
    }
    case task::Probe::kScale: {
      static constexpr int kExponents[] = {-3, -2, -1, 1, 2, 3};
      const int k = kExponents[rng() % 6];
      const double s = std::ldexp(1.0, k);
      for (int64_t i = 0; i < n; ++i) put(i, t.get_as_double(i) * s);
      return {fmt::format("{} * 2^{}", name, k)};
    }
    case task::Probe::kOutliers: {
      double sum_sq = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double v = t.get_as_double(i);
        if (std::isfinite(v)) sum_sq += v * v;
      }
      const double rms = std::max(1.0, n > 0 ? std::sqrt(sum_sq / static_cast<double>(n)) : 1.0);
      const int64_t count = std::max<int64_t>(1, n / 512);
      std::uniform_int_distribution<int64_t> where(0, std::max<int64_t>(0, n - 1));
      std::uniform_real_distribution<double> size(8.0, 16.0);
      for (int64_t j = 0; j < count && n > 0; ++j) put(where(rng), size(rng) * rms * ((rng() & 1) ? 1 : -1));
      return {fmt::format("{}: {} outlier(s) of 8-16x its RMS", name, count)};
    }
  }
  return {name};
}

}  // namespace kda::eval
