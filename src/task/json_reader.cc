#include "task/json_reader.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/json_text.h"

namespace kda::task {

std::string child_pointer(const std::string& pointer, std::string_view key) {
  return pointer + "/" + json_pointer_token(std::string(key));
}

std::string child_pointer(const std::string& pointer, size_t index) { return pointer + "/" + std::to_string(index); }

std::string json_type_name(const ojson& v) {
  if (v.is_number_integer()) return "integer";
  return v.type_name();
}

void JsonReader::error(const std::string& pointer, const std::string& message) {
  ++errors_;
  diags_.add(file_, line_, pointer, message);
}

bool JsonReader::expect_object(const ojson& v, const std::string& pointer) {
  if (v.is_object()) return true;
  error(pointer, "must be an object, not " + json_type_name(v));
  return false;
}

const ojson* JsonReader::member(const ojson& obj, const std::string& pointer, const char* key, bool required,
                                bool null_ok) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || (it->is_null() && !null_ok)) {
    if (required) error(child_pointer(pointer, key), std::string("required field '") + key + "' is missing");
    return nullptr;
  }
  return &*it;
}

std::optional<std::string> JsonReader::string(const ojson& obj, const std::string& pointer, const char* key,
                                              bool required, bool non_empty) {
  const ojson* v = member(obj, pointer, key, required);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    error(child_pointer(pointer, key), "must be a string, not " + json_type_name(*v));
    return std::nullopt;
  }
  std::string s = v->get<std::string>();
  if (non_empty && s.empty()) {
    error(child_pointer(pointer, key), "must not be empty");
    return std::nullopt;
  }
  return s;
}

std::optional<int64_t> JsonReader::integer(const ojson& obj, const std::string& pointer, const char* key,
                                           bool required) {
  const ojson* v = member(obj, pointer, key, required);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      error(child_pointer(pointer, key), "integer out of range");
      return std::nullopt;
    }
    return static_cast<int64_t>(u);
  }
  if (v->is_number_integer()) return v->get<int64_t>();
  error(child_pointer(pointer, key), "must be an integer, not " + json_type_name(*v));
  return std::nullopt;
}

std::optional<bool> JsonReader::boolean(const ojson& obj, const std::string& pointer, const char* key, bool required) {
  const ojson* v = member(obj, pointer, key, required);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    error(child_pointer(pointer, key), "must be true or false, not " + json_type_name(*v));
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::vector<std::string>> JsonReader::string_list(const ojson& obj, const std::string& pointer,
                                                                const char* key, bool required) {
  const ojson* v = member(obj, pointer, key, required);
  if (v == nullptr) return std::nullopt;
  std::string p = child_pointer(pointer, key);
  if (!v->is_array()) {
    error(p, "must be a list of strings, not " + json_type_name(*v));
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (size_t i = 0; i < v->size(); ++i) {
    const ojson& e = (*v)[i];
    if (!e.is_string()) {
      error(child_pointer(p, i), "must be a string, not " + json_type_name(e));
      ok = false;
      continue;
    }
    out.push_back(e.get<std::string>());
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<double> JsonReader::number(const ojson& obj, const std::string& pointer, const char* key, bool required) {
  const ojson* v = member(obj, pointer, key, required);
  if (v == nullptr) return std::nullopt;
  if (v->is_number()) return v->get<double>();
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity" || s == "inf" || s == "+inf") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  error(child_pointer(pointer, key), "must be a number (or \"NaN\"/\"Infinity\"), not " + json_type_name(*v));
  return std::nullopt;
}

namespace {

constexpr int kMaxNesting = 128;

}  // namespace

std::optional<ojson> parse_json_text(std::string_view text, const std::string& file, int line, Diagnostics& diags) {
  if (util::json_nesting_depth(text) > kMaxNesting) {
    diags.add(file, line, "", "invalid JSON: nested deeper than " + std::to_string(kMaxNesting) + " levels");
    return std::nullopt;
  }
  try {
    return ojson::parse(text.begin(), text.end());
  } catch (const ojson::exception& e) {
    // nlohmann messages read "[json.exception.parse_error.101] parse error at line 1, column 5: ...".
    std::string what = e.what();
    auto pos = what.find("] ");
    diags.add(file, line, "", "invalid JSON: " + (pos == std::string::npos ? what : what.substr(pos + 2)));
    return std::nullopt;
  }
}

std::vector<JsonlLine> split_jsonl(std::string_view text) {
  std::vector<JsonlLine> out;
  int line = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    ++line;
    std::string_view l = text.substr(start, end - start);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.find_first_not_of(" \t") != std::string_view::npos) out.push_back({line, l});
    if (end == text.size()) break;
    start = end + 1;
  }
  return out;
}

nlohmann::json number_to_json(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

}  // namespace kda::task
