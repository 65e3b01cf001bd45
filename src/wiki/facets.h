// Facets used by search filters (arch, op, technique), detected from a chunk's terms and tags.
//
// Authored pages declare facets in their tags ("arch:sm90", "op:gemm", "technique:tma"); code and
// documents get them from the identifiers they contain (a chunk using `wgmma` or `Sm90` is sm90, one
// mentioning `split_k` uses split-K). Detection is a term lookup, cheap enough for every chunk.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace kda::wiki {

struct Facets {
  std::set<std::string> arch, op, technique;

  // Space-separated, with a leading and trailing space (" sm90 sm100 ") for exact-word LIKE filters.
  static std::string joined(const std::set<std::string>& s);
};

// Facets from the terms of `text` (see tokenizer.h) and from tags such as "arch:sm90" or "tma".
Facets detect_facets(std::string_view text, const std::vector<std::string>& tags);

}  // namespace kda::wiki
