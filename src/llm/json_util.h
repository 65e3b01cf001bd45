// Small tolerant accessors for provider JSON (wrong types read as absent, never throw).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace kda::llm::detail {

inline std::string str(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

inline int64_t num(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return 0;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : 0;
}

inline const nlohmann::json& obj(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it != j.end() ? *it : kNull;
}

inline std::string trim_slash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

// Parses tool arguments; "" means {}; anything but an object is invalid.
inline bool parse_arguments(const std::string& text, nlohmann::json& out) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    out = nlohmann::json::object();
    return true;
  }
  out = nlohmann::json::parse(text, nullptr, false);
  if (out.is_discarded() || !out.is_object()) {
    out = nlohmann::json::object();
    return false;
  }
  return true;
}

}  // namespace kda::llm::detail
