#include "eval/probes.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "util/parallel.h"

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

// Elementwise over the host's cores (a 64 MiB input is 32 M elements; one core took ~0.3 s per
// probe). Ranges are multiples of 64 elements, so packed sub-byte elements never share a byte
// across threads.
template <typename Fn>
void for_each_element(int64_t n, Fn&& fn) {
  util::run_ranges(util::split_ranges(static_cast<uint64_t>(n), uint64_t{1} << 20, 64),
                   [&](size_t, uint64_t b, uint64_t e) {
                     for (auto i = static_cast<int64_t>(b); i < static_cast<int64_t>(e); ++i) fn(i);
                   });
}

// Sum of squares of the finite elements, by fixed chunks of 2^20 added in order: the same value on
// any number of cores.
double finite_sum_sq(const tensor::Tensor& t) {
  constexpr int64_t kChunk = int64_t{1} << 20;
  const int64_t n = t.numel();
  std::vector<double> part(static_cast<size_t>((n + kChunk - 1) / kChunk), 0.0);
  util::run_ranges(util::split_ranges(part.size(), 1), [&](size_t, uint64_t b, uint64_t e) {
    for (uint64_t c = b; c < e; ++c)
      for (int64_t i = static_cast<int64_t>(c) * kChunk; i < std::min(n, static_cast<int64_t>(c + 1) * kChunk); ++i) {
        const double v = t.get_as_double(i);
        if (std::isfinite(v)) part[c] += v * v;
      }
  });
  double sum = 0;
  for (double p : part) sum += p;
  return sum;
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
      for_each_element(n, [&](int64_t i) { put(i, t.get_as_double(i) + c); });
      return {fmt::format("{} {} {:.3f}", name, c < 0 ? '-' : '+', std::fabs(c))};
    }
    case task::Probe::kScale: {
      static constexpr int kExponents[] = {-3, -2, -1, 1, 2, 3};
      const int k = kExponents[rng() % 6];
      const double s = std::ldexp(1.0, k);
      for_each_element(n, [&](int64_t i) { put(i, t.get_as_double(i) * s); });
      return {fmt::format("{} * 2^{}", name, k)};
    }
    case task::Probe::kOutliers: {
      const double sum_sq = finite_sum_sq(t);
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
