// Which LLM API a native agent talks to, parsed from a one-line spec:
//   anthropic:claude-sonnet-4-5
//   openai:gpt-5.5                      (= openai-chat: chat completions)
//   openai-responses:gpt-5.5
//   openai:qwen3?base_url=http://127.0.0.1:8000/v1&key_env=NONE
// Query keys: base_url, key_env (a variable name, or NONE for no key), max_tokens, temperature,
// max_tokens_field, connect_timeout_s, timeout_s, stall_timeout_s, max_attempts, prices (a JSON
// price table file), cache (on|off: Anthropic prompt caching). Values may be %-encoded. Environment (spec keys win):
//   base URL:      KDA_ANTHROPIC_BASE_URL, ANTHROPIC_BASE_URL / KDA_OPENAI_BASE_URL, OPENAI_BASE_URL
//   key variable:  KDA_ANTHROPIC_KEY_ENV / KDA_OPENAI_KEY_ENV (name of the variable holding the key),
//                  default ANTHROPIC_API_KEY / OPENAI_API_KEY.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "llm/http_transport.h"
#include "llm/retry.h"
#include "llm/wire_format.h"
#include "util/status.h"

namespace kda::llm {

inline constexpr const char* kNoKey = "NONE";

struct ProviderConfig {
  ProviderKind kind = ProviderKind::kAnthropic;
  std::string model;
  std::string base_url;     // resolved; see Endpoint for the convention per kind
  std::string api_key_env;  // the variable holding the key; kNoKey: send no key
  int max_tokens = 16384;   // per response
  std::optional<double> temperature;
  std::string max_tokens_field;  // openai-chat: "max_completion_tokens" | "max_tokens"
  bool prompt_cache = true;      // anthropic: cache_control breakpoints (spec: cache=off)
  HttpTimeouts timeouts;
  RetryPolicy retry;
  std::string price_table_path;  // "" = built-in table
  std::string spec;              // the spec as given
};

// Looks a variable up; the default reads the process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup process_env();

// Errors (kBadInput) name the spec and the bad field. A missing key variable is an error unless
// key_env=NONE.
Result<ProviderConfig> parse_provider_spec(const std::string& spec, const EnvLookup& env = process_env());

// The key for a config ("" for key_env=NONE); error when the variable is unset or empty.
Result<std::string> resolve_api_key(const ProviderConfig& config, const EnvLookup& env = process_env());

// The endpoint (base URL, key, max-tokens field) a Client needs.
Result<Endpoint> make_endpoint(const ProviderConfig& config, const EnvLookup& env = process_env());

}  // namespace kda::llm
