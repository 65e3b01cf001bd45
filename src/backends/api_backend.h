// The native API agent: a Backend that drives an LLM directly over its HTTP API (Anthropic
// Messages, OpenAI chat completions or Responses), running kda's tools in-process. Each session
// is one fresh conversation: system prompt + prompt, then send -> run every tool_use through
// request.tools -> send the results, until the model ends its turn, max_turns, or the timeout.
// Built into kda_llm (it needs the clients); the contract is agent/backend.h.
#pragma once

#include <memory>

#include "agent/backend.h"
#include "llm/http_transport.h"
#include "llm/provider_config.h"
#include "llm/retry.h"

namespace kda::agent {

// Real transport (libcurl) and clock; the key is read from config.api_key_env when a session runs.
std::unique_ptr<Backend> make_api_backend(llm::ProviderConfig config);

// For tests and embedding: a given transport, retry environment and variable lookup.
std::unique_ptr<Backend> make_api_backend(llm::ProviderConfig config, std::shared_ptr<llm::HttpTransport> transport,
                                          llm::RetryEnv retry_env, llm::EnvLookup env = llm::process_env());

}  // namespace kda::agent
