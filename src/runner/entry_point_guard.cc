#include "runner/entry_point_guard.h"

#include <array>
#include <mutex>

namespace kda::runner {

namespace {

std::mutex g_mu;
std::vector<std::string> g_refused;

}  // namespace

bool allowed_driver_entry_point(std::string_view symbol) {
  // The tensor-map encoders, and the two harmless error-string lookups some TMA wrappers make.
  static constexpr std::array<std::string_view, 7> kAllowed = {
      "cuTensorMapEncodeTiled",    "cuTensorMapEncodeIm2col",      "cuTensorMapEncodeIm2colWide",
      "cuTensorMapReplaceAddress", "cuTensorMapEncodeTiledMemref", "cuGetErrorName",
      "cuGetErrorString"};
  for (std::string_view a : kAllowed)
    if (symbol == a) return true;
  return false;
}

void record_refused_entry_point(std::string_view symbol) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_refused.size() < 64) g_refused.emplace_back(symbol.substr(0, 128));
}

std::vector<std::string> take_refused_entry_points() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<std::string> out;
  out.swap(g_refused);
  return out;
}

}  // namespace kda::runner
