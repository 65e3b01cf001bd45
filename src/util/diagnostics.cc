#include "util/diagnostics.h"

#include <nlohmann/json.hpp>

namespace kda {

std::string Diagnostic::to_string() const {
  std::string s = file;
  if (line > 0) s += ":" + std::to_string(line);
  s += ": ";
  if (!pointer.empty()) s += pointer + ": ";
  s += message;
  return s;
}

nlohmann::json Diagnostic::to_json() const {
  nlohmann::json j{{"file", file}, {"pointer", pointer}, {"message", message}};
  if (line > 0) j["line"] = line;
  return j;
}

std::string json_pointer_token(const std::string& token) {
  std::string out;
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

}  // namespace kda
