#include "wiki/query.h"

#include <set>

#include "wiki/tokenizer.h"

namespace kda::wiki {

namespace {

const std::set<std::string>& stop_words() {
  static const std::set<std::string> k = {"a",    "an",   "the", "to",    "of",   "in",    "on",   "for",  "and",
                                          "or",   "is",   "are", "how",   "what", "why",   "when", "with", "by",
                                          "do",   "does", "use", "using", "i",    "my",    "it",   "its",  "be",
                                          "from", "at",   "as",  "that",  "this", "which", "can",  "not"};
  return k;
}

std::string fts_quoted(const std::string& s) { return "\"" + s + "\""; }

// Expression for one member ("cp.async.bulk" -> ("cp_async_bulk" OR "cp async bulk")).
std::string member_expr(std::string_view member) {
  std::vector<std::string> parts;
  for_each_term(member, [&](const Term& t) {
    if (!t.colocated) parts.push_back(t.text);
    return true;
  });
  if (parts.empty()) return "";
  if (parts.size() == 1) return fts_quoted(parts[0]);
  std::string phrase;
  for (const auto& p : parts) phrase += (phrase.empty() ? "" : " ") + p;
  bool one_word = member.find_first_of(" \t") == std::string_view::npos;
  std::string w = whole_term(member);
  if (one_word && !w.empty()) return "(" + fts_quoted(w) + " OR " + fts_quoted(phrase) + ")";
  return fts_quoted(phrase);
}

// Loose form: the whole term, or all parts anywhere in the chunk ("cp.async.bulk.tensor.{1..5}d" in
// prose still matches cp.async.bulk.tensor.2d).
std::string member_loose_expr(std::string_view member) {
  std::vector<std::string> parts;
  for_each_term(member, [&](const Term& t) {
    if (!t.colocated) parts.push_back(t.text);
    return true;
  });
  if (parts.empty()) return "";
  if (parts.size() == 1) return fts_quoted(parts[0]);
  std::string all;
  for (const auto& p : parts) all += (all.empty() ? "" : " AND ") + fts_quoted(p);
  std::string w = whole_term(member);
  bool one_word = member.find_first_of(" \t") == std::string_view::npos;
  if (one_word && !w.empty()) return "(" + fts_quoted(w) + " OR (" + all + "))";
  return "(" + all + ")";
}

std::string or_join(const std::vector<std::string>& v) {
  if (v.size() == 1) return v[0];
  std::string r = "(";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? " OR " : "") + v[i];
  return r + ")";
}

}  // namespace

QueryPlan build_query(std::string_view text, const AliasTable& aliases) {
  // Words as the tokenizer sees them (runs of identifier characters).
  std::vector<std::string> words;
  std::vector<std::vector<std::string>> word_parts;
  size_t last_begin = std::string_view::npos;
  for_each_term(text, [&](const Term& t) {
    if (t.begin != last_begin) {
      words.emplace_back(text.substr(t.begin, t.end - t.begin));
      word_parts.push_back(identifier_parts(words.back()));
      last_begin = t.begin;
    }
    return true;
  });
  QueryPlan plan;
  std::set<std::string> seen;
  size_t i = 0;
  while (i < words.size()) {
    // Longest run of words starting at i that is an alias member.
    const AliasGroup* group = nullptr;
    size_t used = 0;
    std::vector<std::string> parts, matched;
    for (size_t j = i; j < words.size() && j < i + aliases.max_parts(); ++j) {
      parts.insert(parts.end(), word_parts[j].begin(), word_parts[j].end());
      if (const AliasGroup* g = aliases.find(parts)) {
        group = g;
        used = j - i + 1;
        matched = parts;
      }
    }
    QueryGroup qg;
    if (group) {
      std::vector<std::string> exprs, loose;
      for (const auto& m : group->members) {
        // The words as typed match whole or as a phrase of parts; the other members of the group only by
        // their whole term (or phrase, for multi-word members). Every phrase costs BM25 a pass over its
        // terms' position lists to count documents, so alias expansion must not multiply phrases.
        bool typed = identifier_parts(m) == matched;
        std::string w = whole_term(m);
        bool one_word = m.find_first_of(" \t") == std::string::npos;
        std::string e = typed || !one_word || w.empty() ? member_expr(m) : fts_quoted(w);
        if (!e.empty()) {
          exprs.push_back(e);
          loose.push_back(typed || !one_word || w.empty() ? member_loose_expr(m) : e);
          qg.members.push_back(m);
          qg.member_parts.push_back(identifier_parts(m));
        }
      }
      qg.expr = or_join(exprs);
      qg.loose_expr = or_join(loose);
      i += used;
    } else {
      const std::string& w = words[i];
      ++i;
      std::string lw = ascii_lower(w);
      if (stop_words().count(lw)) continue;
      qg.expr = member_expr(w);
      qg.loose_expr = member_loose_expr(w);
      qg.members.push_back(w);
      qg.member_parts.push_back(identifier_parts(w));
    }
    if (qg.expr.empty() || !seen.insert(qg.expr).second) continue;
    plan.groups.push_back(std::move(qg));
  }
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    plan.strict += (g ? " AND " : "") + plan.groups[g].expr;
    plan.loose += (g ? " OR " : "") + plan.groups[g].loose_expr;
  }
  return plan;
}

}  // namespace kda::wiki
