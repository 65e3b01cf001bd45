// JsonReader: reads the fields of one JSON document and records every problem (file, line, JSON pointer)
// instead of stopping at the first, so that `kda task validate` can list them all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/diagnostics.h"

namespace kda::task {

// FlashInfer-Bench documents are read order-preserving: definition inputs/outputs are ordered maps.
using ojson = nlohmann::ordered_json;

// Pointer of a member / an element below `pointer` ("/inputs" + "x" -> "/inputs/x").
std::string child_pointer(const std::string& pointer, std::string_view key);
std::string child_pointer(const std::string& pointer, size_t index);

// JSON type name for messages ("object", "string", ...).
std::string json_type_name(const ojson& v);

class JsonReader {
 public:
  JsonReader(std::string file, int line, Diagnostics& diags) : file_(std::move(file)), line_(line), diags_(diags) {}

  void error(const std::string& pointer, const std::string& message);
  size_t errors() const { return errors_; }
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  Diagnostics& diagnostics() { return diags_; }

  // True when `v` is an object; otherwise records "<what> must be an object".
  bool expect_object(const ojson& v, const std::string& pointer);
  // Member `key` of `obj` (an object), or nullptr when absent; absence is an error when `required`.
  // An explicit null counts as absent unless `null_ok` (then the null member is returned).
  const ojson* member(const ojson& obj, const std::string& pointer, const char* key, bool required,
                      bool null_ok = false);
  // Typed members: nullopt when absent (error if required) or of the wrong type (always an error).
  std::optional<std::string> string(const ojson& obj, const std::string& pointer, const char* key, bool required,
                                    bool non_empty = false);
  std::optional<int64_t> integer(const ojson& obj, const std::string& pointer, const char* key, bool required);
  std::optional<bool> boolean(const ojson& obj, const std::string& pointer, const char* key, bool required);
  std::optional<std::vector<std::string>> string_list(const ojson& obj, const std::string& pointer, const char* key,
                                                      bool required);
  // A number, or one of the strings NaN / Infinity / -Infinity / inf / -inf (FlashInfer-Bench writes
  // non-finite errors as strings).
  std::optional<double> number(const ojson& obj, const std::string& pointer, const char* key, bool required);

 private:
  std::string file_;
  int line_;
  Diagnostics& diags_;
  size_t errors_ = 0;
};

// Parses a JSON text; a syntax error is recorded (with the byte offset) and gives nullopt.
std::optional<ojson> parse_json_text(std::string_view text, const std::string& file, int line, Diagnostics& diags);

// One non-blank line of a JSONL file.
struct JsonlLine {
  int line = 0;  // 1-based
  std::string_view text;
};
std::vector<JsonlLine> split_jsonl(std::string_view text);

// Number as written by kda: finite numbers as numbers, NaN/inf as the strings "NaN", "Infinity", "-Infinity".
nlohmann::json number_to_json(double v);

}  // namespace kda::task
