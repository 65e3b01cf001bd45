// A wire format turns a Request into an HTTP POST (URL, headers, JSON body with stream:true) and
// an SSE stream back into a Response. Three are built in: Anthropic Messages, OpenAI chat
// completions and OpenAI Responses. Unknown fields and events are ignored.
#pragma once

#include <memory>
#include <string>

#include "llm/http_transport.h"
#include "llm/message.h"
#include "llm/sse_parser.h"
#include "util/status.h"

namespace kda::llm {

enum class ProviderKind { kAnthropic, kOpenAiChat, kOpenAiResponses };
const char* provider_kind_name(ProviderKind kind);  // "anthropic" | "openai-chat" | "openai-responses"

struct Endpoint {
  // Anthropic: the bare origin ("https://api.anthropic.com"; a trailing "/v1" is tolerated).
  // OpenAI: the API root including "/v1" ("https://api.openai.com/v1"), as OPENAI_BASE_URL.
  std::string base_url;
  std::string api_key;  // empty: no auth header (local servers)
  // OpenAI chat only: "max_completion_tokens" (api.openai.com) or "max_tokens" (vLLM, llama.cpp...).
  std::string max_tokens_field = "max_completion_tokens";
  // Anthropic only: mark the system prompt and the newest message as cache breakpoints
  // (cache_control ephemeral), so each turn re-reads the conversation so far from the cache.
  bool prompt_cache = true;
};

// Consumes one response stream. on_event errors (malformed JSON, an error event from the server)
// and finish() errors (the stream ended before its final event) are retryable failures.
class StreamDecoder {
 public:
  virtual ~StreamDecoder() = default;
  virtual Status on_event(const SseEvent& event) = 0;
  virtual bool complete() const = 0;  // the final event arrived
  virtual Result<Response> finish() = 0;
};

class WireFormat {
 public:
  virtual ~WireFormat() = default;
  virtual ProviderKind kind() const = 0;
  virtual std::string url(const Endpoint& endpoint) const = 0;
  virtual nlohmann::json encode_body(const Request& request, const Endpoint& endpoint) const = 0;
  virtual std::vector<std::pair<std::string, std::string>> headers(const Endpoint& endpoint) const = 0;
  virtual std::unique_ptr<StreamDecoder> make_decoder() const = 0;
  // The request-id header this provider sends ("request-id", "x-request-id").
  virtual std::string request_id_header() const = 0;

  HttpRequest encode(const Request& request, const Endpoint& endpoint) const;
};

std::unique_ptr<WireFormat> make_wire_format(ProviderKind kind);

// Decodes a whole SSE body in one go (tests, replay).
Result<Response> decode_stream(const WireFormat& format, std::string_view sse_body);

}  // namespace kda::llm
