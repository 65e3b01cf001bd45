#include "loop/backend_factory.h"

#include <functional>
#include <utility>

#include "backends/api_backend.h"
#include "backends/cli_backend_spec.h"
#include "agent/scripted_backend.h"
#include "llm/provider_config.h"
#include "loop/rules_reviewer.h"
#include "loop/tuner_writer.h"

namespace kda::loop {

namespace {

using Maker = std::function<Result<std::unique_ptr<agent::Backend>>(const std::string& arg)>;

struct Kind {
  std::string prefix;  // "scripted"
  std::string usage;   // "scripted:<file.json>"
  Maker make;
};

Maker api_kind(const std::string& prefix) {
  return [prefix](const std::string& arg) -> Result<std::unique_ptr<agent::Backend>> {
    auto config = llm::parse_provider_spec(prefix + ":" + arg);
    if (!config.ok()) return config.status();
    return agent::make_api_backend(std::move(*config));
  };
}

const std::vector<Kind>& kinds() {
  static const std::vector<Kind> k = {
      {"scripted", "scripted:<file.json>",
       [](const std::string& arg) -> Result<std::unique_ptr<agent::Backend>> {
         if (arg.empty()) return Status::bad_input("scripted backend: expected scripted:<file.json>");
         return agent::make_scripted_backend(std::filesystem::path(arg));
       }},
      // Native API agents: the whole spec is a provider spec (llm/provider_config.h).
      {"anthropic", "anthropic:<model>[?base_url=..&key_env=..]", api_kind("anthropic")},
      {"openai", "openai:<model>[?...] (chat completions)", api_kind("openai")},
      {"openai-chat", "openai-chat:<model>[?...]", api_kind("openai-chat")},
      {"openai-responses", "openai-responses:<model>[?...]", api_kind("openai-responses")},
      // The real CLIs under kda's sandbox (agent/cli_backend_spec.h lists the keys).
      {"claude-code", "claude-code[:<model>][?base_url=..&key_env=..]",
       [](const std::string& a) { return agent::make_cli_backend("claude-code", a); }},
      {"codex", "codex[:<model>][?base_url=..&key_env=..]",
       [](const std::string& a) { return agent::make_cli_backend("codex", a); }},
      // Offline, no LLM: the autotuning writer (kda_tune) and the rule-based reviewer.
      {"tuner", "tuner (offline autotuning writer)", make_tuner_writer},
      {"rules", "rules (offline rule-based reviewer)",
       [](const std::string& a) -> Result<std::unique_ptr<agent::Backend>> {
         if (!a.empty()) return Status::bad_input("rules backend: takes no argument (got 'rules:" + a + "')");
         return make_rules_reviewer();
       }},
  };
  return k;
}

}  // namespace

std::vector<std::string> known_backend_kinds() {
  std::vector<std::string> out;
  for (const auto& k : kinds()) out.push_back(k.usage);
  return out;
}

Result<std::unique_ptr<agent::Backend>> make_backend(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string prefix = spec.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  for (const auto& k : kinds()) {
    if (k.prefix == prefix) return k.make(arg);
  }
  std::string known;
  for (const auto& u : known_backend_kinds()) known += (known.empty() ? "" : ", ") + u;
  return Status::bad_input("unknown backend '" + spec + "' (known: " + known + ")");
}

}  // namespace kda::loop
