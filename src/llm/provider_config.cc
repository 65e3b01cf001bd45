#include "llm/provider_config.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "llm/price_table.h"

namespace kda::llm {

namespace {

std::string percent_decode(const std::string& s, bool* ok) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
          !std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
        *ok = false;
        return s;
      }
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<int64_t> parse_int(const std::string& v, int64_t lo, int64_t hi) {
  if (v.empty() || v.size() > 12) return std::nullopt;
  for (char c : v) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  int64_t x = std::stoll(v);
  if (x < lo || x > hi) return std::nullopt;
  return x;
}

bool valid_env_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

namespace {

// One key=value option of a provider spec's query applied to `c`; what is wrong with it, or nullopt.
std::optional<std::string> apply_option(ProviderConfig& c, const std::string& key, const std::string& value,
                                        std::string& base_source, bool& explicit_field) {
  auto seconds = [&](int64_t lo, int64_t hi) -> std::optional<int64_t> { return parse_int(value, lo, hi); };

  if (key == "base_url") {
    if (value.rfind("http://", 0) != 0 && value.rfind("https://", 0) != 0) {
      return std::string("base_url must start with http:// or https:// (got '" + value + "')");
    }
    c.base_url = value;
    base_source = "base_url";
  } else if (key == "key_env") {
    if (value != kNoKey && !valid_env_name(value)) return std::string("key_env '" + value + "' is not a variable name");
    c.api_key_env = value;
  } else if (key == "max_tokens") {
    auto v = seconds(1, 10'000'000);
    if (!v) return std::string("max_tokens must be an integer >= 1 (got '" + value + "')");
    c.max_tokens = static_cast<int>(*v);
  } else if (key == "temperature") {
    char* end = nullptr;
    double t = std::strtod(value.c_str(), &end);
    if (value.empty() || end == nullptr || *end != '\0' || t < 0 || t > 2) {
      return std::string("temperature must be a number in [0, 2] (got '" + value + "')");
    }
    c.temperature = t;
  } else if (key == "max_tokens_field") {
    if (value != "max_tokens" && value != "max_completion_tokens") {
      return std::string("max_tokens_field must be max_tokens or max_completion_tokens");
    }
    c.max_tokens_field = value;
    explicit_field = true;
  } else if (key == "connect_timeout_s") {
    auto v = seconds(1, 3600);
    if (!v) return std::string("connect_timeout_s must be an integer in [1, 3600]");
    c.timeouts.connect = std::chrono::seconds(*v);
  } else if (key == "timeout_s") {
    auto v = seconds(1, 86400);
    if (!v) return std::string("timeout_s must be an integer in [1, 86400]");
    c.timeouts.total = std::chrono::seconds(*v);
  } else if (key == "stall_timeout_s") {
    auto v = seconds(1, 86400);
    if (!v) return std::string("stall_timeout_s must be an integer in [1, 86400]");
    c.timeouts.stall = std::chrono::seconds(*v);
  } else if (key == "max_attempts") {
    auto v = seconds(1, 100);
    if (!v) return std::string("max_attempts must be an integer in [1, 100]");
    c.retry.max_attempts = static_cast<int>(*v);
  } else if (key == "cache") {
    if (value != "on" && value != "off") return std::string("cache must be on or off (got '" + value + "')");
    c.prompt_cache = value == "on";
  } else if (key == "prices") {
    auto table = PriceTable::load(value);
    if (!table.ok()) return std::string("prices: " + table.status().message());
    c.price_table_path = value;
  } else {
    return std::string("unknown key '" + key +
                       "' (known: base_url, key_env, max_tokens, temperature, max_tokens_field, "
                       "connect_timeout_s, timeout_s, stall_timeout_s, max_attempts, prices, cache)");
  }
  return std::nullopt;
}

}  // namespace

Result<ProviderConfig> parse_provider_spec(const std::string& spec, const EnvLookup& env) {
  auto bad = [&](const std::string& what) { return Status::bad_input("provider spec '" + spec + "': " + what); };
  ProviderConfig c;
  c.spec = spec;

  std::string head = spec, query;
  if (auto q = spec.find('?'); q != std::string::npos) {
    head = spec.substr(0, q);
    query = spec.substr(q + 1);
  }
  auto colon = head.find(':');
  if (colon == std::string::npos) {
    return bad("expected <provider>:<model>, e.g. anthropic:claude-sonnet-4-5 or openai:gpt-5.5");
  }
  std::string kind = head.substr(0, colon);
  c.model = head.substr(colon + 1);  // may itself hold ':' (Ollama tags: qwen3:8b)
  if (kind == "anthropic") {
    c.kind = ProviderKind::kAnthropic;
  } else if (kind == "openai" || kind == "openai-chat") {
    c.kind = ProviderKind::kOpenAiChat;
  } else if (kind == "openai-responses") {
    c.kind = ProviderKind::kOpenAiResponses;
  } else {
    return bad("unknown provider '" + kind + "' (expected anthropic, openai, openai-chat or openai-responses)");
  }
  if (c.model.empty()) return bad("model is empty");

  const bool anthropic = c.kind == ProviderKind::kAnthropic;
  auto from_env = [&](const char* name) -> std::string {
    auto v = env ? env(name) : std::nullopt;
    return v ? *v : std::string();
  };
  std::string base_source = anthropic ? "KDA_ANTHROPIC_BASE_URL" : "KDA_OPENAI_BASE_URL";
  c.base_url = from_env(base_source.c_str());
  if (c.base_url.empty()) {
    base_source = anthropic ? "ANTHROPIC_BASE_URL" : "OPENAI_BASE_URL";
    c.base_url = from_env(base_source.c_str());
  }
  c.api_key_env = from_env(anthropic ? "KDA_ANTHROPIC_KEY_ENV" : "KDA_OPENAI_KEY_ENV");
  if (c.api_key_env.empty()) c.api_key_env = anthropic ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY";

  bool explicit_field = false;
  size_t pos = 0;
  while (!query.empty() && pos <= query.size()) {
    size_t amp = query.find('&', pos);
    std::string pair = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    pos = amp == std::string::npos ? query.size() + 1 : amp + 1;
    if (pair.empty()) continue;
    auto eq = pair.find('=');
    if (eq == std::string::npos) return bad("'" + pair + "' is not key=value");
    std::string key = pair.substr(0, eq);
    bool ok = true;
    std::string value = percent_decode(pair.substr(eq + 1), &ok);
    if (!ok) return bad(key + ": bad %-escape in '" + pair.substr(eq + 1) + "'");
    if (auto why = apply_option(c, key, value, base_source, explicit_field)) return bad(*why);
  }

  if (!c.base_url.empty() && c.base_url.rfind("http://", 0) != 0 && c.base_url.rfind("https://", 0) != 0) {
    return bad(base_source + " '" + c.base_url + "' must start with http:// or https://");
  }
  if (c.kind == ProviderKind::kOpenAiChat && !explicit_field) {
    // api.openai.com wants max_completion_tokens; local servers (vLLM, llama.cpp, Ollama) know max_tokens.
    bool official = c.base_url.empty() || c.base_url.find("api.openai.com") != std::string::npos;
    c.max_tokens_field = official ? "max_completion_tokens" : "max_tokens";
  }
  auto key = resolve_api_key(c, env);
  if (!key.ok()) return bad(key.status().message());
  return c;
}

Result<std::string> resolve_api_key(const ProviderConfig& config, const EnvLookup& env) {
  if (config.api_key_env == kNoKey) return std::string();
  auto v = env ? env(config.api_key_env) : std::nullopt;
  if (!v || v->empty()) {
    return Status::bad_input("key variable " + config.api_key_env +
                             " is not set (export it, name another with key_env=VAR, or use key_env=NONE "
                             "for a server without authentication)");
  }
  return *v;
}

Result<Endpoint> make_endpoint(const ProviderConfig& config, const EnvLookup& env) {
  Endpoint e;
  e.base_url = config.base_url;
  KDA_ASSIGN_OR_RETURN(e.api_key, resolve_api_key(config, env));
  if (!config.max_tokens_field.empty()) e.max_tokens_field = config.max_tokens_field;
  e.prompt_cache = config.prompt_cache;
  return e;
}

}  // namespace kda::llm
