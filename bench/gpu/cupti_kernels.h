// What the GPU probes (timer_offset.cu, latency_modes.cu) share: CUPTI's kernel durations of the
// kernels whose names contain one of a few words, collected as kda-runner collects them
// (CONCURRENT_KERNEL activity records), and a quantile of a sample.
#pragma once

#include <cupti.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace kda::bench {

inline double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

// Durations (µs) of the recorded kernels, in completion order.
inline std::vector<double> g_kernel_us;
inline std::vector<std::string> g_kernel_words;  // a recorded kernel's name contains one of these

inline void CUPTIAPI kernel_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, 1 << 20));
  *size = 1 << 20;
  *max_records = 0;
}
inline void CUPTIAPI kernel_buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    if (k->name == nullptr) continue;
    for (const auto& w : g_kernel_words)
      if (std::strstr(k->name, w.c_str()) != nullptr) {
        g_kernel_us.push_back(static_cast<double>(k->end - k->start) / 1e3);
        break;
      }
  }
  std::free(buffer);
}

// Starts recording the kernels whose names contain one of `words`; false where CUPTI refuses.
inline bool record_kernels(std::vector<std::string> words) {
  g_kernel_words = std::move(words);
  return cuptiActivityRegisterCallbacks(kernel_buffer_requested, kernel_buffer_completed) == CUPTI_SUCCESS &&
         cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS;
}
// Forgets what was recorded so far (after delivering what CUPTI still holds).
inline void clear_kernel_records() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  g_kernel_us.clear();
}
// The last `n` durations recorded, or none where fewer were.
inline std::vector<double> last_kernel_us(size_t n) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (g_kernel_us.size() < n) return {};
  return {g_kernel_us.end() - static_cast<std::ptrdiff_t>(n), g_kernel_us.end()};
}

}  // namespace kda::bench
