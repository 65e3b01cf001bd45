#include "wiki/chunker.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace kda::wiki {

namespace {

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Offsets of line starts; line_of(offset) is 1-based.
struct Lines {
  std::vector<size_t> starts;
  explicit Lines(std::string_view t) {
    starts.push_back(0);
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i] == '\n' && i + 1 < t.size()) starts.push_back(i + 1);
  }
  int line_of(size_t off) const {
    return static_cast<int>(std::upper_bound(starts.begin(), starts.end(), off) - starts.begin());
  }
  int count() const { return static_cast<int>(starts.size()); }
};

// Text of lines [a, b] (1-based, inclusive).
std::string_view line_range(std::string_view t, const Lines& L, int a, int b) {
  size_t s = L.starts[a - 1];
  size_t e = b < L.count() ? L.starts[b] : t.size();
  return t.substr(s, e - s);
}

// Copy of C/C++ source with comments, string/char literals and preprocessor lines replaced by spaces
// (newlines kept), so braces inside them do not confuse matching.
std::string mask_cpp(std::string_view t) {
  std::string m(t);
  size_t i = 0, n = t.size();
  bool line_start = true;
  auto blank = [&](size_t a, size_t b) {
    for (size_t k = a; k < b && k < n; ++k)
      if (m[k] != '\n') m[k] = ' ';
  };
  while (i < n) {
    char c = t[i];
    if (line_start && c == '#') {
      size_t j = i;
      while (j < n && !(t[j] == '\n' && (j == 0 || t[j - 1] != '\\'))) ++j;
      blank(i, j);
      i = j;
      continue;
    }
    if (c == '\n') {
      line_start = true;
      ++i;
      continue;
    }
    if (!space(c)) line_start = false;
    if (c == '/' && i + 1 < n && t[i + 1] == '/') {
      size_t j = t.find('\n', i);
      if (j == std::string_view::npos) j = n;
      blank(i, j);
      i = j;
    } else if (c == '/' && i + 1 < n && t[i + 1] == '*') {
      size_t j = t.find("*/", i + 2);
      j = j == std::string_view::npos ? n : j + 2;
      blank(i, j);
      i = j;
    } else if (c == 'R' && i + 1 < n && t[i + 1] == '"' && (i == 0 || !ident_char(t[i - 1]))) {
      size_t open = t.find('(', i + 2);
      if (open == std::string_view::npos) {
        ++i;
        continue;
      }
      std::string delim = ")" + std::string(t.substr(i + 2, open - i - 2)) + "\"";
      size_t j = t.find(delim, open);
      j = j == std::string_view::npos ? n : j + delim.size();
      blank(i, j);
      i = j;
    } else if (c == '"' || (c == '\'' && !(i > 0 && std::isxdigit(static_cast<unsigned char>(t[i - 1])) && i + 1 < n &&
                                           std::isxdigit(static_cast<unsigned char>(t[i + 1]))))) {
      // String or char literal (a quote between hex digits is a C++14 digit separator).
      size_t j = i + 1;
      while (j < n && t[j] != c && t[j] != '\n') j += t[j] == '\\' ? 2 : 1;
      j = std::min(n, j + 1);
      blank(i, j);
      i = j;
    } else {
      ++i;
    }
  }
  return m;
}

// Offset of the '}' matching the '{' at `open` in masked text, or npos.
size_t match_brace(const std::string& m, size_t open, size_t end) {
  int depth = 0;
  for (size_t i = open; i < end; ++i) {
    if (m[i] == '{')
      ++depth;
    else if (m[i] == '}' && --depth == 0)
      return i;
  }
  return std::string::npos;
}

std::vector<std::string> words_of(std::string_view s) {
  std::vector<std::string> w;
  size_t i = 0;
  while (i < s.size()) {
    if (ident_char(s[i])) {
      size_t j = i;
      while (j < s.size() && ident_char(s[j])) ++j;
      w.emplace_back(s.substr(i, j - i));
      i = j;
    } else {
      ++i;
    }
  }
  return w;
}

bool has_word(std::string_view s, std::string_view word) {
  size_t p = 0;
  while ((p = s.find(word, p)) != std::string_view::npos) {
    bool l = p == 0 || !ident_char(s[p - 1]);
    bool r = p + word.size() >= s.size() || !ident_char(s[p + word.size()]);
    if (l && r) return true;
    p += word.size();
  }
  return false;
}

const std::set<std::string>& skip_before_paren() {
  static const std::set<std::string> k = {
      "__launch_bounds__", "__align__", "alignas",       "__attribute__",    "__declspec", "decltype", "requires",
      "noexcept",          "sizeof",    "static_assert", "__cluster_dims__", "template",   "operator"};
  return k;
}

struct Header {
  enum Kind { kNone, kContainer, kFunction, kType, kSkip } kind = kNone;
  std::string name;
  bool kernel = false;
};

// Classifies the text before a '{' at namespace or class scope.
Header classify(std::string_view h) {
  Header r;
  std::string_view t = h;
  while (!t.empty() && space(t.back())) t.remove_suffix(1);
  if (t.empty()) return r;
  char last = t.back();
  if (last == '=' || last == ',' || last == '(' || last == '[' || last == '{' || last == '?' || last == ':' ||
      last == '|' || last == '&' || last == '+' || last == '-')
    if (!(last == ':' && t.size() >= 2 && t[t.size() - 2] == ':')) {
      r.kind = Header::kSkip;
      return r;
    }
  if (has_word(t, "namespace") || (has_word(t, "extern") && t.find('(') == std::string_view::npos)) {
    r.kind = Header::kContainer;
    return r;
  }
  // '=' at paren depth 0 (not part of an operator name or a comparison) means an initializer or lambda.
  int pd = 0, ad = 0;
  size_t first_paren = std::string_view::npos;
  for (size_t i = 0; i < t.size(); ++i) {
    char c = t[i];
    if (c == '(') {
      if (pd == 0 && first_paren == std::string_view::npos) {
        size_t e = i;
        while (e > 0 && space(t[e - 1])) --e;
        size_t b = e;
        while (b > 0 && ident_char(t[b - 1])) --b;
        std::string w(t.substr(b, e - b));
        if (!w.empty() && !skip_before_paren().count(w) && !std::isdigit(static_cast<unsigned char>(w[0])))
          first_paren = i;
      }
      ++pd;
    } else if (c == ')') {
      --pd;
    } else if (c == '<' && pd == 0) {
      ++ad;
    } else if (c == '>' && pd == 0 && ad > 0) {
      --ad;
    } else if (c == '=' && pd == 0 && ad == 0) {
      bool op = i > 0 && std::string_view("=!<>+-*/%&|^").find(t[i - 1]) != std::string_view::npos;
      bool next_eq = i + 1 < t.size() && t[i + 1] == '=';
      if (!op && !next_eq && !has_word(t.substr(0, i), "operator")) {
        r.kind = Header::kSkip;
        return r;
      }
    }
  }
  // The last class/struct/union/enum keyword outside template angle brackets names a type.
  std::vector<std::string> w = words_of(t);
  if (first_paren == std::string_view::npos) {
    ad = 0;
    size_t kw = std::string_view::npos;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == '<')
        ++ad;
      else if (t[i] == '>' && ad > 0)
        --ad;
      else if (ad == 0 && ident_char(t[i]) && (i == 0 || !ident_char(t[i - 1]))) {
        for (std::string_view k : {"class", "struct", "union", "enum"})
          if (t.substr(i, k.size()) == k && (i + k.size() >= t.size() || !ident_char(t[i + k.size()]))) kw = i;
      }
    }
    if (kw != std::string_view::npos) {
      std::vector<std::string> after = words_of(t.substr(kw));
      r.kind = Header::kType;
      for (size_t i = 1; i < after.size(); ++i) {
        const std::string& x = after[i];
        if (x == "class" || x == "struct" || x == "alignas" || x == "__align__" || x == "final" ||
            std::all_of(x.begin(), x.end(),
                        [](char c) { return std::isupper(static_cast<unsigned char>(c)) || c == '_'; }))
          continue;  // skip "enum class", attributes and export macros such as CUTLASS_API
        r.name = x;
        break;
      }
      if (r.name.empty() && after.size() > 1) r.name = after[1];
      return r;
    }
    r.kind = Header::kSkip;
    return r;
  }
  // A function: the identifier (with qualifiers) before the first significant '('.
  size_t e = first_paren;
  while (e > 0 && space(t[e - 1])) --e;
  size_t b = e;
  while (b > 0 && (ident_char(t[b - 1]) || t[b - 1] == ':' || t[b - 1] == '~')) --b;
  std::string name(t.substr(b, e - b));
  while (!name.empty() && name.front() == ':') name.erase(0, 1);
  if (name == "if" || name == "for" || name == "while" || name == "switch" || name == "catch" || name.empty()) {
    r.kind = Header::kSkip;
    return r;
  }
  r.kind = Header::kFunction;
  r.name = name;
  r.kernel = has_word(t, "__global__");
  return r;
}

struct Span {
  size_t begin, end;  // offsets, [begin, end)
  Header header;
  std::string context;  // enclosing type
};

// Finds function and type chunks in [begin, end) of the masked text. Large types are descended into.
void scan_scope(std::string_view t, const std::string& m, const Lines& L, size_t begin, size_t end,
                const std::string& context, std::vector<Span>& out) {
  size_t stmt = begin;
  size_t i = begin;
  int paren = 0;
  while (i < end) {
    char c = m[i];
    if (c == '(')
      ++paren;
    else if (c == ')')
      paren = std::max(0, paren - 1);
    if (c == ';' && paren == 0) {
      stmt = i + 1;
    } else if (c == '}') {
      stmt = i + 1;
    } else if (c == '{') {
      size_t close = match_brace(m, i, end);
      if (close == std::string::npos) return;  // unbalanced (e.g. #if branches): leave the rest as glue
      Header h = classify(std::string_view(m).substr(stmt, i - stmt));
      size_t s = stmt;
      while (s < i && space(m[s])) ++s;
      size_t after = close + 1;
      // Keep a trailing ';' (types) on the chunk.
      size_t k = after;
      while (k < end && (m[k] == ' ' || m[k] == '\t')) ++k;
      if (k < end && m[k] == ';') after = k + 1;
      if (h.kind == Header::kContainer) {
        scan_scope(t, m, L, i + 1, close, context, out);
      } else if (h.kind == Header::kFunction || h.kind == Header::kType) {
        int lines = L.line_of(after) - L.line_of(s) + 1;
        if (h.kind == Header::kType && lines > kMaxChunkLines) {
          scan_scope(t, m, L, i + 1, close, context.empty() ? h.name : context + "::" + h.name, out);
        } else {
          out.push_back({s, after, h, context});
        }
      }
      i = after;
      stmt = after;
      paren = 0;
      continue;
    }
    ++i;
  }
}

// Extends a chunk's start upwards over the comment lines directly above it.
int extend_over_comments(std::string_view t, const Lines& L, int line, int floor_line) {
  while (line - 1 > floor_line) {
    std::string_view prev = line_range(t, L, line - 1, line - 1);
    size_t b = prev.find_first_not_of(" \t\r\n");
    if (b == std::string_view::npos) break;
    std::string_view p = prev.substr(b);
    if (p.starts_with("//") || p.starts_with("/*") || p.starts_with("*") || p.starts_with("template"))
      --line;
    else
      break;
  }
  return line;
}

bool blank_text(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

// Splits [a, b] into windows of at most `w` lines, each a copy of `proto` with its own body and lines.
void push_windows(std::string_view t, const Lines& L, int a, int b, int w, const Chunk& proto,
                  std::vector<Chunk>& out) {
  for (int s = a; s <= b; s += w) {
    int e = std::min(b, s + w - 1);
    std::string_view body = line_range(t, L, s, e);
    if (blank_text(body)) continue;
    Chunk c = proto;
    c.body = std::string(body);
    c.start_line = s;
    c.end_line = e;
    out.push_back(std::move(c));
  }
}

// Adds glue chunks for the non-blank line ranges of [1, count] not covered by `covered`.
void add_glue(std::string_view t, const Lines& L, std::vector<std::pair<int, int>> covered, int first_line,
              std::vector<Chunk>& out) {
  std::sort(covered.begin(), covered.end());
  int next = 1;
  Chunk proto;
  proto.unit = "glue";
  auto flush = [&](int a, int b) {
    if (a > b) return;
    push_windows(t, L, a, b, kGlueWindowLines, proto, out);
  };
  for (auto [a, b] : covered) {
    flush(next, a - 1);
    next = std::max(next, b + 1);
  }
  flush(next, L.count());
  (void)first_line;
}

void sort_chunks(std::vector<Chunk>& v) {
  std::stable_sort(v.begin(), v.end(), [](const Chunk& a, const Chunk& b) { return a.start_line < b.start_line; });
}

}  // namespace

std::vector<std::string> ptx_mnemonics(std::string_view code) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < code.size(); ++i) {
    if (code[i] != '"') continue;
    size_t j = i + 1;
    // Skip whitespace, escapes, braces and a predicate guard ("@p ").
    while (j < code.size()) {
      if (code[j] == ' ' || code[j] == '\t' || code[j] == '{')
        ++j;
      else if (code[j] == '\\' && j + 1 < code.size())
        j += 2;
      else if (code[j] == '@') {
        while (j < code.size() && code[j] != ' ' && code[j] != '"') ++j;
      } else
        break;
    }
    size_t s = j;
    while (j < code.size() &&
           (std::islower(static_cast<unsigned char>(code[j])) || std::isdigit(static_cast<unsigned char>(code[j])) ||
            code[j] == '.' || code[j] == '_' || code[j] == ':'))
      ++j;
    std::string_view w = code.substr(s, j - s);
    while (!w.empty() && (w.back() == '.' || w.back() == ':')) w.remove_suffix(1);
    if (w.size() >= 4 && w.find('.') != std::string_view::npos && std::islower(static_cast<unsigned char>(w[0])) &&
        w.find("..") == std::string_view::npos && w.find('.') > 0 && w.substr(0, w.find('.')).size() <= 12) {
      std::string m(w);
      if (seen.insert(m).second) out.push_back(m);
    }
  }
  return out;
}

std::vector<Chunk> chunk_cpp(std::string_view t) {
  std::vector<Chunk> out;
  if (t.empty()) return out;
  std::string m = mask_cpp(t);
  Lines L(t);
  std::vector<Span> spans;
  scan_scope(t, m, L, 0, m.size(), "", spans);
  std::vector<std::pair<int, int>> covered;
  int prev_end = 0;
  for (const auto& sp : spans) {
    int a = L.line_of(sp.begin);
    int b = L.line_of(sp.end > 0 ? sp.end - 1 : 0);
    if (a <= prev_end) a = prev_end + 1;  // two chunks on one line: keep lines disjoint
    if (a > b) continue;
    a = extend_over_comments(t, L, a, prev_end);
    prev_end = b;
    Chunk proto;
    std::string qualified = sp.context.empty() ? sp.header.name : sp.context + "::" + sp.header.name;
    proto.title = qualified;
    proto.unit = sp.header.kind == Header::kType ? "type" : (sp.header.kernel ? "kernel" : "function");
    if (!sp.header.name.empty()) proto.symbols.push_back(sp.header.name);
    if (qualified != sp.header.name && !qualified.empty()) proto.symbols.push_back(qualified);
    std::string_view body = line_range(t, L, a, b);
    for (auto& p : ptx_mnemonics(body)) proto.symbols.push_back(p);
    int w = b - a + 1 > kMaxChunkLines ? kWindowLines : b - a + 1;
    push_windows(t, L, a, b, w, proto, out);
    covered.emplace_back(a, b);
  }
  add_glue(t, L, covered, 1, out);
  for (auto& c : out)
    if (c.unit == "glue")
      for (auto& p : ptx_mnemonics(c.body)) c.symbols.push_back(p);
  sort_chunks(out);
  return out;
}

std::vector<Chunk> chunk_python(std::string_view t) {
  std::vector<Chunk> out;
  if (t.empty()) return out;
  Lines L(t);
  int n = L.count();
  auto line = [&](int k) { return line_range(t, L, k, k); };
  auto top_def = [&](std::string_view s, std::string* name) {
    for (std::string_view kw : {"def ", "async def ", "class "}) {
      if (s.starts_with(kw)) {
        size_t b = kw.size(), e = b;
        while (e < s.size() && ident_char(s[e])) ++e;
        *name = std::string(s.substr(b, e - b));
        return true;
      }
    }
    return false;
  };
  std::vector<std::pair<int, int>> covered;
  int k = 1;
  while (k <= n) {
    std::string name;
    int start = k;
    // Decorators belong to the def below them.
    while (k <= n && line(k).starts_with("@")) ++k;
    if (k <= n && top_def(line(k), &name)) {
      int e = k + 1;
      int last_code = k;
      while (e <= n) {
        std::string_view s = line(e);
        bool blank = blank_text(s);
        if (!blank && s[0] != ' ' && s[0] != '\t' && s[0] != '#' && s[0] != ')' && s[0] != ']') break;
        if (!blank) last_code = e;
        ++e;
      }
      Chunk proto;
      proto.title = name;
      proto.unit = line(k).starts_with("class") ? "type" : "function";
      proto.symbols.push_back(name);
      int b = last_code;
      if (b - start + 1 > kMaxChunkLines) {
        // Large classes: one chunk per method (title Class.method), the rest windowed.
        int s = start;
        for (int q = start + 1; q <= b + 1; ++q) {
          std::string_view ql = q <= b ? line(q) : std::string_view();
          size_t ind = ql.find_first_not_of(' ');
          bool method = q <= b && ind != std::string_view::npos && ind > 0 && ind <= 8 &&
                        (ql.substr(ind).starts_with("def ") || ql.substr(ind).starts_with("async def "));
          if (method || q == b + 1 || q - s >= kWindowLines) {
            Chunk c = proto;
            std::string mname;
            std::string_view sl = line(s);
            size_t si = sl.find_first_not_of(' ');
            if (si != std::string_view::npos && si > 0 && top_def(sl.substr(si), &mname)) {
              c.title = name + "." + mname;
              c.symbols.push_back(mname);
            }
            c.body = std::string(line_range(t, L, s, q - 1));
            c.start_line = s;
            c.end_line = q - 1;
            if (!blank_text(c.body)) out.push_back(std::move(c));
            s = q;
          }
        }
      } else {
        push_windows(t, L, start, b, b - start + 1, proto, out);
      }
      covered.emplace_back(start, b);
      k = b + 1;
    } else {
      k = std::max(k, start) + 1;
    }
  }
  add_glue(t, L, covered, 1, out);
  sort_chunks(out);
  return out;
}

std::vector<Chunk> chunk_markdown(std::string_view t, int first_line) {
  std::vector<Chunk> out;
  if (t.empty()) return out;
  Lines L(t);
  int n = L.count();
  std::vector<std::pair<int, std::string>> stack;  // (level, heading)
  int sec_start = 1;
  std::string title, path;
  bool fence = false;
  auto flush = [&](int end) {
    if (end < sec_start) return;
    Chunk proto;
    proto.title = title;
    proto.headings = path;
    proto.unit = "section";
    int w = end - sec_start + 1 > kMaxChunkLines ? kWindowLines : end - sec_start + 1;
    std::vector<Chunk> tmp;
    push_windows(t, L, sec_start, end, w, proto, tmp);
    for (auto& c : tmp) {
      c.start_line += first_line - 1;
      c.end_line += first_line - 1;
      out.push_back(std::move(c));
    }
  };
  for (int k = 1; k <= n; ++k) {
    std::string_view s = line_range(t, L, k, k);
    std::string_view ts = s.substr(0, s.find_last_not_of("\r\n") + 1);
    if (ts.starts_with("```") || ts.starts_with("~~~")) fence = !fence;
    if (fence) continue;
    size_t level = 0;
    while (level < ts.size() && ts[level] == '#') ++level;
    if (level == 0 || level > 6 || level >= ts.size() || ts[level] != ' ') continue;
    flush(k - 1);
    std::string h(ts.substr(level + 1));
    while (!h.empty() && (h.back() == ' ' || h.back() == '#')) h.pop_back();
    while (!stack.empty() && stack.back().first >= static_cast<int>(level)) stack.pop_back();
    stack.emplace_back(static_cast<int>(level), h);
    title = h;
    path.clear();
    for (auto& [lv, hh] : stack) path += (path.empty() ? "" : " > ") + hh;
    sec_start = k;
  }
  flush(n);
  return out;
}

std::vector<Chunk> chunk_lines(std::string_view t, int lines, int first_line) {
  std::vector<Chunk> out;
  if (t.empty()) return out;
  Lines L(t);
  Chunk proto;
  proto.unit = "glue";
  push_windows(t, L, 1, L.count(), lines, proto, out);
  for (auto& c : out) {
    c.start_line += first_line - 1;
    c.end_line += first_line - 1;
  }
  return out;
}

}  // namespace kda::wiki
