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

// `word` single-quoted for a POSIX shell: every character literal, a quote written as '\''.
inline std::string shell_quote(std::string_view word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

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

// Length of the longest prefix of `s` of at most `n` bytes that does not end inside a UTF-8 sequence.
inline size_t utf8_cut(std::string_view s, size_t n) {
  if (n >= s.size()) return s.size();
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}

// `s` with every byte that does not start a well-formed UTF-8 sequence (truncated, overlong two-byte,
// stray continuation) replaced by '?', so the text always serialises as JSON (nlohmann throws otherwise).
inline std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok && len == 2 && c < 0xC2) ok = false;  // overlong
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out.push_back('?');
      ++i;
    }
  }
  return out;
}

}  // namespace kda::util
