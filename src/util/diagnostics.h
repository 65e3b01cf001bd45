// Diagnostics: problems found in user input, each naming the file, the line (JSONL) and the JSON pointer.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kda {

struct Diagnostic {
  std::string file;     // path as the user gave it
  int line = 0;         // 1-based line for JSONL files; 0 when not applicable
  std::string pointer;  // RFC 6901 JSON pointer of the offending field ("" = whole document)
  std::string message;

  // "file:line: /pointer: message" (line and pointer omitted when absent).
  std::string to_string() const;
  nlohmann::json to_json() const;
};

class Diagnostics {
 public:
  void add(Diagnostic d) { items_.push_back(std::move(d)); }
  void add(const std::string& file, int line, const std::string& pointer, const std::string& message) {
    items_.push_back({file, line, pointer, message});
  }
  void append(const Diagnostics& other) { items_.insert(items_.end(), other.items_.begin(), other.items_.end()); }
  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  const std::vector<Diagnostic>& items() const { return items_; }

 private:
  std::vector<Diagnostic> items_;
};

// Escapes one reference token for a JSON pointer ("~" -> "~0", "/" -> "~1").
std::string json_pointer_token(const std::string& token);

}  // namespace kda
