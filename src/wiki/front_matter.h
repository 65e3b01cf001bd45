// YAML front matter of markdown pages (the KernelWiki layout: id, title, type, tags, related, sources).
//
// Only the simple subset pages use is accepted: `key: scalar`, `key: [a, b]` inline lists, block lists
// (`key:` then `  - item` lines), quoted scalars and `|` / `>` block scalars. Anything else is an error
// naming the file and line, so a typo does not silently drop a page's tags.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace kda::wiki {

struct FrontMatter {
  std::map<std::string, std::string> scalars;
  std::map<std::string, std::vector<std::string>> lists;
  bool present = false;    // the text starts with a '---' block
  size_t body_offset = 0;  // byte offset of the body after the closing '---'
  int body_line = 1;       // 1-based line number where the body starts

  std::string scalar(const std::string& key) const;
  // A list field; a scalar is read as a one-element list.
  std::vector<std::string> list(const std::string& key) const;
};

// Parses the front matter at the start of `text` (if any). `origin` names the file in errors.
Result<FrontMatter> parse_front_matter(std::string_view text, const std::string& origin);

}  // namespace kda::wiki
