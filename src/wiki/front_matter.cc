#include "wiki/front_matter.h"

#include <fmt/format.h>

#include "util/strings.h"

namespace kda::wiki {

namespace {

std::string unquote(std::string s) {
  if (s.size() >= 2 && ((s.front() == '"' && s.back() == '"') || (s.front() == '\'' && s.back() == '\'')))
    return s.substr(1, s.size() - 2);
  return s;
}

// "[a, 'b, c', d]" -> a | b, c | d
Result<std::vector<std::string>> inline_list(const std::string& v, const std::string& where) {
  if (v.back() != ']') return Status::bad_input(where + ": unterminated inline list");
  std::vector<std::string> out;
  std::string cur;
  char quote = 0;
  for (size_t i = 1; i + 1 < v.size(); ++i) {
    char c = v[i];
    if (quote) {
      if (c == quote)
        quote = 0;
      else
        cur += c;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == ',') {
      if (auto t = util::trimmed(cur); !t.empty()) out.push_back(t);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (quote) return Status::bad_input(where + ": unterminated quote in inline list");
  if (auto t = util::trimmed(cur); !t.empty()) out.push_back(t);
  return out;
}

}  // namespace

std::string FrontMatter::scalar(const std::string& key) const {
  auto it = scalars.find(key);
  return it == scalars.end() ? "" : it->second;
}

std::vector<std::string> FrontMatter::list(const std::string& key) const {
  if (auto it = lists.find(key); it != lists.end()) return it->second;
  if (auto it = scalars.find(key); it != scalars.end() && !it->second.empty()) return {it->second};
  return {};
}

Result<FrontMatter> parse_front_matter(std::string_view text, const std::string& origin) {
  FrontMatter fm;
  // Split into lines with their offsets.
  std::vector<std::pair<size_t, std::string_view>> lines;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    lines.emplace_back(pos, text.substr(pos, end - pos));
    pos = end + 1;
  }
  if (lines.empty() || util::trimmed(lines[0].second) != "---") return fm;
  size_t close = 0;
  for (size_t i = 1; i < lines.size(); ++i)
    if (util::trimmed(lines[i].second) == "---" || util::trimmed(lines[i].second) == "...") {
      close = i;
      break;
    }
  if (close == 0) return Status::bad_input(origin + ":1: front matter has no closing '---'");
  fm.present = true;
  fm.body_line = static_cast<int>(close) + 2;
  fm.body_offset = close + 1 < lines.size() ? lines[close + 1].first : text.size();

  std::string list_key;   // key whose block list is being read
  std::string block_key;  // key whose | or > block scalar is being read
  bool block_fold = false;
  for (size_t i = 1; i < close; ++i) {
    std::string_view raw = lines[i].second;
    std::string where = fmt::format("{}:{}", origin, i + 1);
    std::string t = util::trimmed(raw);
    bool indented = !raw.empty() && (raw[0] == ' ' || raw[0] == '\t');
    if (!block_key.empty()) {
      if (indented || t.empty()) {
        auto& v = fm.scalars[block_key];
        if (!v.empty()) v += block_fold ? " " : "\n";
        v += t;
        continue;
      }
      block_key.clear();
    }
    if (t.empty() || t[0] == '#') continue;
    if (t[0] == '-' && (t.size() == 1 || t[1] == ' ')) {
      if (list_key.empty()) return Status::bad_input(where + ": list item outside a list");
      fm.lists[list_key].push_back(unquote(util::trimmed(t.substr(1))));
      continue;
    }
    if (indented && !list_key.empty()) {
      // A nested mapping line inside a list item (e.g. "    url: ..."): keep it with the last item.
      auto& items = fm.lists[list_key];
      if (items.empty()) return Status::bad_input(where + ": unexpected indentation");
      items.back() += " " + t;
      continue;
    }
    size_t colon = t.find(':');
    if (colon == std::string::npos || colon == 0) return Status::bad_input(where + ": expected 'key: value'");
    std::string key = util::trimmed(t.substr(0, colon));
    std::string value = util::trimmed(t.substr(colon + 1));
    list_key.clear();
    if (value.empty()) {
      list_key = key;
      fm.lists[key];
    } else if (value == "|" || value == ">" || value == "|-" || value == ">-") {
      block_key = key;
      block_fold = value[0] == '>';
      fm.scalars[key];
    } else if (value[0] == '[') {
      KDA_ASSIGN_OR_RETURN(auto items, inline_list(value, where));
      fm.lists[key] = std::move(items);
    } else {
      fm.scalars[key] = unquote(value);
    }
  }
  return fm;
}

}  // namespace kda::wiki
