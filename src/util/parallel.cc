#include "util/parallel.h"

#include <algorithm>
#include <system_error>
#include <thread>

namespace kda::util {

std::vector<std::pair<uint64_t, uint64_t>> split_ranges(uint64_t n, uint64_t min_per_part, uint64_t align) {
  align = std::max<uint64_t>(align, 1);
  const uint64_t cores = std::max<uint64_t>(1, std::thread::hardware_concurrency());
  const uint64_t parts = std::clamp<uint64_t>(n / std::max<uint64_t>(min_per_part, 1), 1, cores);
  uint64_t per = (n + parts - 1) / parts;
  per = (per + align - 1) / align * align;
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (uint64_t b = 0; b < n || out.empty(); b += per) {
    out.emplace_back(b, std::min(n, b + per));
    if (per == 0) break;
  }
  return out;
}

void run_ranges(const std::vector<std::pair<uint64_t, uint64_t>>& ranges,
                const std::function<void(size_t index, uint64_t begin, uint64_t end)>& fn) {
  std::vector<std::thread> pool;
  size_t started = 1;
  for (; started < ranges.size(); ++started) {
    try {
      pool.emplace_back([&, k = started] { fn(k, ranges[k].first, ranges[k].second); });
    } catch (const std::system_error&) {  // no more threads: the calling thread does the rest
      break;
    }
  }
  for (size_t k = started; k < ranges.size(); ++k) fn(k, ranges[k].first, ranges[k].second);
  if (!ranges.empty()) fn(0, ranges[0].first, ranges[0].second);
  for (auto& t : pool) t.join();
}

}  // namespace kda::util
