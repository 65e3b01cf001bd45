// A small, safe arithmetic language for roofline formulas in task.toml: numbers, axis names, + - * / % ( ),
// unary minus, min(a,b,...), max(a,b,...), ceil_div(a,b); and, for tunables.toml constraints,
// comparisons (< <= > >= == !=), && || and ! giving 1 or 0. Parsed once, evaluated per workload.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "util/status.h"

namespace kda::task {

class Expression {
 public:
  struct Node;

  // Parse errors name the offending token and its 1-based column.
  static Result<Expression> parse(std::string_view text);

  // Unknown names and division by zero are errors naming the token.
  Result<double> evaluate(const std::map<std::string, int64_t>& vars) const;
  // Every identifier used (axis names).
  std::set<std::string> identifiers() const;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
};

}  // namespace kda::task
