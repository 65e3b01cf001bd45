#include "llm/wire_format.h"

#include "llm/anthropic_format.h"
#include "llm/openai_chat_format.h"
#include "llm/openai_responses_format.h"

namespace kda::llm {

const char* provider_kind_name(ProviderKind kind) {
  switch (kind) {
    case ProviderKind::kAnthropic: return "anthropic";
    case ProviderKind::kOpenAiChat: return "openai-chat";
    case ProviderKind::kOpenAiResponses: return "openai-responses";
  }
  return "anthropic";
}

HttpRequest WireFormat::encode(const Request& request, const Endpoint& endpoint) const {
  HttpRequest http;
  http.url = url(endpoint);
  http.headers = headers(endpoint);
  http.body = encode_body(request, endpoint).dump();
  return http;
}

std::unique_ptr<WireFormat> make_wire_format(ProviderKind kind) {
  switch (kind) {
    case ProviderKind::kAnthropic: return std::make_unique<AnthropicFormat>();
    case ProviderKind::kOpenAiChat: return std::make_unique<OpenAiChatFormat>();
    case ProviderKind::kOpenAiResponses: return std::make_unique<OpenAiResponsesFormat>();
  }
  return nullptr;
}

Result<Response> decode_stream(const WireFormat& format, std::string_view sse_body) {
  SseParser parser;
  auto decoder = format.make_decoder();
  for (const auto& ev : parser.feed(sse_body)) KDA_RETURN_IF_ERROR(decoder->on_event(ev));
  parser.finish();
  return decoder->finish();
}

}  // namespace kda::llm
