// Small helpers for the CLI stream parsers (internal to the agent_cli module).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kda::agent::detail {

inline constexpr size_t kDetailChars = 2000;  // bound on text copied into an event

inline std::string clip(std::string_view s, size_t n = kDetailChars) {
  if (s.size() <= n) return std::string(s);
  return std::string(s.substr(0, n)) + "...[" + std::to_string(s.size() - n) + " more bytes]";
}

inline std::string str(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "";
  return j[key].get<std::string>();
}

inline int64_t num(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return 0;
  return j[key].get<int64_t>();
}

// Text of a content value: a string, or an array of {type:"text", text} blocks.
inline std::string content_text(const nlohmann::json& c) {
  if (c.is_string()) return c.get<std::string>();
  std::string out;
  if (c.is_array())
    for (const auto& b : c)
      if (b.is_object() && b.value("type", "") == "text" && b.contains("text") && b["text"].is_string()) {
        if (!out.empty()) out += "\n";
        out += b["text"].get<std::string>();
      }
  return out;
}

}  // namespace kda::agent::detail
