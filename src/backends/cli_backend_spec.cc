#include "backends/cli_backend_spec.h"

#include <cctype>

#include "util/strings.h"

namespace kda::agent {

namespace {

std::string percent_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

Status parse_common(const std::string& kind, const std::string& arg, CliAgentConfig& c, bool* guard_hook) {
  const size_t q = arg.find('?');
  c.model = percent_decode(arg.substr(0, q));
  if (q == std::string::npos) return {};
  std::string query = arg.substr(q + 1);
  size_t start = 0;
  while (start <= query.size()) {
    size_t amp = query.find('&', start);
    std::string item = query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    start = amp == std::string::npos ? query.size() + 1 : amp + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos) return Status::bad_input(kind + " spec: '" + item + "' is not key=value");
    const std::string key = item.substr(0, eq), value = percent_decode(item.substr(eq + 1));
    auto as_int = [&](int* out) -> Status {
      try {
        size_t used = 0;
        int v = std::stoi(value, &used);
        if (used != value.size() || v < 0) throw 0;
        *out = v;
        return {};
      } catch (...) {
        return Status::bad_input(kind + " spec: " + key + " must be a non-negative integer, not '" + value + "'");
      }
    };
    if (key == "base_url") {
      c.base_url = value;
      if (!url_port(value))
        return Status::bad_input(kind + " spec: base_url must be an http(s) URL, not '" + value + "'");
    } else if (key == "key_env") {
      c.api_key_env = value;
    } else if (key == "api_retries") {
      KDA_RETURN_IF_ERROR(as_int(&c.api_retries));
    } else if (key == "max_start_attempts") {
      KDA_RETURN_IF_ERROR(as_int(&c.max_start_attempts));
    } else if (key == "sessions_dir") {
      c.sessions_dir = value;
    } else if (key == "binary") {
      c.binary = value;
    } else if (key == "pass_env") {
      for (std::string& name : util::split_list(value)) c.pass_env.push_back(std::move(name));
    } else if (key == "guard_hook" && guard_hook != nullptr) {
      if (value != "0" && value != "1") return Status::bad_input(kind + " spec: guard_hook must be 0 or 1");
      *guard_hook = value == "1";
    } else {
      return Status::bad_input(kind + " spec: unknown key '" + key +
                               "' (known: base_url, key_env, api_retries, max_start_attempts, sessions_dir, binary, "
                               "pass_env" +
                               (guard_hook ? ", guard_hook" : "") + ")");
    }
  }
  return {};
}

}  // namespace

Result<ClaudeCodeConfig> parse_claude_code_spec(const std::string& arg) {
  ClaudeCodeConfig c;
  KDA_RETURN_IF_ERROR(parse_common("claude-code", arg, c, &c.guard_hook));
  return c;
}

Result<CodexConfig> parse_codex_spec(const std::string& arg) {
  CodexConfig c;
  KDA_RETURN_IF_ERROR(parse_common("codex", arg, c, nullptr));
  return c;
}

Result<std::unique_ptr<Backend>> make_cli_backend(const std::string& kind, const std::string& arg) {
  if (kind == "claude-code") {
    KDA_ASSIGN_OR_RETURN(ClaudeCodeConfig c, parse_claude_code_spec(arg));
    return make_claude_code_backend(std::move(c));
  }
  if (kind == "codex") {
    KDA_ASSIGN_OR_RETURN(CodexConfig c, parse_codex_spec(arg));
    return make_codex_backend(std::move(c));
  }
  return Status::bad_input("unknown CLI agent kind '" + kind + "' (claude-code, codex)");
}

}  // namespace kda::agent
