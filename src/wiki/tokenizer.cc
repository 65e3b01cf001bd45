#include "wiki/tokenizer.h"

#include <cctype>

namespace kda::wiki {

namespace {

bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool is_word_char(char c) { return is_alnum(c) || c == '_' || c == '.' || c == ':'; }
bool is_sep(char c) { return c == '_' || c == '.' || c == ':'; }
bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Splits one separator-free segment on camelCase and letter/digit boundaries.
void split_segment(std::string_view seg, std::vector<std::string>& out) {
  size_t start = 0;
  for (size_t i = 1; i <= seg.size(); ++i) {
    bool cut = i == seg.size();
    if (!cut) {
      char p = seg[i - 1], c = seg[i];
      if (is_lower(p) && is_upper(c))
        cut = true;  // fooBar
      else if (is_digit(p) != is_digit(c))
        cut = true;                                                                       // sm90, e4m3
      else if (is_upper(p) && is_upper(c) && i + 1 < seg.size() && is_lower(seg[i + 1]))  // HTTPServer
        cut = true;
    }
    if (cut) {
      if (i > start) out.push_back(ascii_lower(seg.substr(start, i - start)));
      start = i;
    }
  }
}

// Splits a word (or a phrase) into segments on runs of anything but letters and digits.
std::vector<std::string_view> segments_of(std::string_view word) {
  std::vector<std::string_view> segs;
  size_t i = 0;
  while (i < word.size()) {
    while (i < word.size() && !is_alnum(word[i])) ++i;
    size_t s = i;
    while (i < word.size() && is_alnum(word[i])) ++i;
    if (i > s) segs.push_back(word.substr(s, i - s));
  }
  return segs;
}

}  // namespace

std::string light_stem(const std::string& w) {
  size_t n = w.size();
  if (n <= 3 || w.back() != 's' || !is_lower(w[n - 2])) return w;
  if (w.ends_with("ss") || w.ends_with("us") || w.ends_with("is")) return w;
  if (w.ends_with("ies") && n > 4) return w.substr(0, n - 3) + "y";
  return w.substr(0, n - 1);
}

std::string ascii_lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

std::vector<std::string> identifier_parts(std::string_view word) {
  std::vector<std::string> parts;
  for (auto seg : segments_of(word)) split_segment(seg, parts);
  return parts;
}

std::string whole_term(std::string_view word) {
  auto segs = segments_of(word);
  std::vector<std::string> parts;
  for (auto seg : segs) split_segment(seg, parts);
  if (parts.size() < 2) return "";
  std::string w;
  for (auto seg : segs) {
    if (!w.empty()) w += '_';
    w += ascii_lower(seg);
  }
  return w;
}

void for_each_term(std::string_view text, const std::function<bool(const Term&)>& sink) {
  size_t i = 0;
  std::vector<std::string> parts;
  while (i < text.size()) {
    while (i < text.size() && !is_word_char(text[i])) ++i;
    size_t s = i;
    while (i < text.size() && is_word_char(text[i])) ++i;
    size_t e = i;
    // Trim separators at the ends ("foo." at a sentence end, "::bar", "__global__").
    while (s < e && is_sep(text[s])) ++s;
    size_t te = e;
    while (te > s && is_sep(text[te - 1])) --te;
    if (te <= s) continue;
    std::string_view word = text.substr(s, te - s);
    auto segs = segments_of(word);
    parts.clear();
    std::vector<std::pair<std::string, size_t>> multi;  // multi-part segments
    for (auto seg : segs) {
      size_t before = parts.size();
      split_segment(seg, parts);
      if (parts.size() - before > 1) multi.emplace_back(ascii_lower(seg), 0);
    }
    if (parts.empty()) continue;
    // Each part is indexed as its light stem, with the original spelling colocated when it differs.
    auto emit_part = [&](const std::string& p) {
      std::string st = light_stem(p);
      if (!sink({st, false, s, te})) return false;
      return st == p || sink({p, true, s, te});
    };
    if (!emit_part(parts[0])) return;
    if (parts.size() > 1) {
      std::string whole;
      for (auto seg : segs) {
        if (!whole.empty()) whole += '_';
        whole += ascii_lower(seg);
      }
      if (!sink({whole, true, s, te})) return;
      for (auto& m : multi)
        if (m.first != whole && !sink({m.first, true, s, te})) return;
    }
    for (size_t k = 1; k < parts.size(); ++k)
      if (!emit_part(parts[k])) return;
  }
}

std::vector<Term> terms_of(std::string_view text) {
  std::vector<Term> out;
  for_each_term(text, [&](const Term& t) {
    out.push_back(t);
    return true;
  });
  return out;
}

}  // namespace kda::wiki
