// Identifier-aware tokenisation for the KernelWiki index.
//
// Kernel code is searched by identifiers such as `cp.async.bulk.tensor.2d.shared::cluster` or
// `KernelTmaWarpSpecializedPingpong`. A word is a maximal run of letters, digits, '_', '.' and ':'
// (trailing punctuation trimmed). Each word yields its *parts* (split on '.', '::', '_', camelCase and
// letter/digit boundaries, lowercased, plural-stripped with the original spelling colocated) as
// consecutive positions, and, at the position of its first part,
// the whole identifier (separators normalised to '_') and every multi-part segment as colocated terms.
// Phrase queries over parts therefore match identifiers written any way (`warp specialized` matches
// `WarpSpecialized` and `warp_specialized`), and an exact identifier matches its own whole term.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kda::wiki {

struct Term {
  std::string text;   // lowercase [a-z0-9_]
  bool colocated;     // same position as the previous term (whole identifier / segment)
  size_t begin, end;  // byte offsets of the word in the input
};

// Calls `sink` for each term of `text` in order. Returns early if sink returns false.
void for_each_term(std::string_view text, const std::function<bool(const Term&)>& sink);

// All terms of `text` (tests and query building).
std::vector<Term> terms_of(std::string_view text);

// The parts of one identifier ("KernelTmaWarp" -> kernel, tma, warp).
std::vector<std::string> identifier_parts(std::string_view word);

// The whole-identifier term ("cp.async.bulk" -> "cp_async_bulk"); "" when the word has one part.
std::string whole_term(std::string_view word);

// Plural stripping for lowercase words ("layouts" -> "layout", "entries" -> "entry"; not "access", "bus").
// Parts are indexed and queried as stems, so singular and plural match each other.
std::string light_stem(const std::string& w);

// Lowercase ASCII copy.
std::string ascii_lower(std::string_view s);

}  // namespace kda::wiki
