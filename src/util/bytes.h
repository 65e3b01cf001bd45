// Bounds-checked reading of little-endian binary images (ELF files, the cubins in .ncu-rep reports):
// the range test, the fixed-size load after it, and NUL-terminated strings inside a limit. Every
// host kda builds for is little-endian, so a load is a memcpy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace kda::util {

// [off, off + len) lies inside `s` (no overflow for any off, len).
inline bool fits(std::string_view s, uint64_t off, uint64_t len) { return off <= s.size() && len <= s.size() - off; }

// The T at `off`; the caller has checked fits(s, off, sizeof(T)).
template <typename T>
T load_le(std::string_view s, uint64_t off) {
  T v{};
  std::memcpy(&v, s.data() + off, sizeof v);
  return v;
}

// The NUL-terminated string starting at `off`, which must end before min(limit, s.size()).
inline std::optional<std::string> c_string(std::string_view s, uint64_t off, uint64_t limit = UINT64_MAX) {
  limit = std::min<uint64_t>(limit, s.size());
  if (off >= limit) return std::nullopt;
  const char* start = s.data() + off;
  const void* nul = std::memchr(start, '\0', limit - off);
  if (nul == nullptr) return std::nullopt;
  return std::string(start, static_cast<const char*>(nul));
}

}  // namespace kda::util
