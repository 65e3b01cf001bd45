// Small string helpers: trimming, joining, and splitting the comma-separated lists that options and
// spec files carry ("a,b , c").
#pragma once

#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace kda::util {

// `s` without leading and trailing spaces and tabs.
inline std::string_view trim_blanks(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// `s` without leading and trailing white space (std::isspace: blanks, tabs, CR, LF, VT, FF).
inline std::string_view trim_space(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}
// The same, as a string of its own.
inline std::string trimmed(std::string_view s) { return std::string(trim_space(s)); }

// The items of `v` with `sep` between them ("a, b, c").
inline std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += sep;
    out += v[i];
  }
  return out;
}

// The items of `s` separated by `sep`, each trimmed of blanks; empty items are dropped
// ("a,,b," gives {"a", "b"}; "" gives {}).
inline std::vector<std::string> split_list(std::string_view s, char sep = ',') {
  std::vector<std::string> out;
  for (size_t start = 0; start <= s.size();) {
    size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    if (std::string_view item = trim_blanks(s.substr(start, end - start)); !item.empty()) out.emplace_back(item);
    start = end + 1;
  }
  return out;
}

}  // namespace kda::util
