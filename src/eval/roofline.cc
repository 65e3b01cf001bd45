#include "eval/roofline.h"

#include <algorithm>

namespace kda::eval {

DevicePeaks h200_peaks() { return {4.8e12, 989e12}; }

std::optional<double> roofline_floor_ms(const task::TaskPack& pack, const std::map<std::string, int64_t>& axes,
                                        const std::string& backend) {
  if (backend != "cuda") return std::nullopt;
  const auto& s = pack.settings;
  if (!s.roofline_bytes && !s.roofline_flops) return std::nullopt;
  DevicePeaks peaks = h200_peaks();
  double t = 0;
  if (s.roofline_bytes) {
    auto b = s.roofline_bytes->evaluate(axes);
    if (b.ok()) t = std::max(t, *b / peaks.bytes_per_s);
  }
  if (s.roofline_flops) {
    auto f = s.roofline_flops->evaluate(axes);
    if (f.ok()) t = std::max(t, *f / peaks.flops_per_s);
  }
  if (t <= 0) return std::nullopt;
  return t * 1e3;
}

}  // namespace kda::eval
