// What part of a call's device span no device work covered: the gaps between its launches.
//
// kda's CUDA latency is CUPTI's span from the first record's start to the last one's end (kernels,
// copies, memsets, on any stream). A call of several short launches can spend most of that span with
// the GPU idle, waiting for the host to issue the next launch; the per-kernel times alone do not
// show it. The runner reports the idle part with each call's summary (`idle_ns`).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace kda::runner {

struct DeviceInterval {
  uint64_t start = 0, end = 0;  // ns; end >= start
};

// The time within [earliest start, latest end] covered by none of the intervals (overlaps, as on
// concurrent streams, count once). 0 for no intervals.
inline uint64_t idle_within_span(std::vector<DeviceInterval> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end(), [](const DeviceInterval& a, const DeviceInterval& b) { return a.start < b.start; });
  uint64_t idle = 0, covered_to = v.front().end;
  for (const DeviceInterval& i : v) {
    if (i.start > covered_to) idle += i.start - covered_to;
    covered_to = std::max(covered_to, i.end);
  }
  return idle;
}

}  // namespace kda::runner
