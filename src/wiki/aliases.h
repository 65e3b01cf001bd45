// Alias groups for query expansion and filter values, kept as editable data (knowledge/aliases.txt).
//
// File format, one group per line:  canonical: alternative, alternative, ...
// '#' starts a comment. Entries are phrases ("gated delta net") or identifiers ("cp.async.bulk");
// they are compared by their identifier parts, so "sm_90a", "SM90a" and "sm90a" are the same entry.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace kda::wiki {

struct AliasGroup {
  std::string canonical;
  std::vector<std::string> members;  // canonical first, then the alternatives, as written
};

class AliasTable {
 public:
  static Result<AliasTable> parse(std::string_view text, const std::string& origin);
  static Result<AliasTable> load(const std::filesystem::path& file);
  // The table compiled into kda, used when no aliases file is found.
  static const AliasTable& builtin();

  // The group whose member has exactly these parts (see identifier_parts), if any.
  const AliasGroup* find(const std::vector<std::string>& parts) const;
  // The canonical name of a filter value ("H200" -> "sm90"); the value lowercased when not an alias.
  std::string canonical(std::string_view value) const;
  // Longest member length in parts (for longest-match scanning of queries).
  size_t max_parts() const { return max_parts_; }
  const std::vector<AliasGroup>& groups() const { return groups_; }

 private:
  std::vector<AliasGroup> groups_;
  std::vector<std::pair<std::vector<std::string>, size_t>> keys_;  // parts -> group index
  size_t max_parts_ = 1;
};

}  // namespace kda::wiki
