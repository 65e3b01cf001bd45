// Turns a user's search text into FTS5 match expressions (see tokenizer.h for the term scheme).
//
// Each query word becomes a group: its whole-identifier term OR the phrase of its parts. Words (or runs of
// words) that are alias members become the OR of every member of the alias group. The strict expression
// ANDs the groups; the loose one ORs them and is used when the strict one finds too little.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "wiki/aliases.h"

namespace kda::wiki {

struct QueryGroup {
  std::string expr;                  // FTS5 expression of the group (parts as a phrase)
  std::string loose_expr;            // the same with parts ANDed in any order
  std::vector<std::string> members;  // what the group accepts, as written ("tma", "cp.async.bulk", ...)
  std::vector<std::vector<std::string>> member_parts;  // identifier parts of each member
};

struct QueryPlan {
  std::vector<QueryGroup> groups;
  std::string strict;  // groups ANDed ("" when there are no groups)
  std::string loose;   // loose groups ORed
};

QueryPlan build_query(std::string_view text, const AliasTable& aliases);

}  // namespace kda::wiki
