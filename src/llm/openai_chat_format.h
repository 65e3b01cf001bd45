// OpenAI chat completions: POST {base}/chat/completions (base includes /v1), Bearer auth,
// stream:true with stream_options.include_usage. Stream: chat.completion.chunk objects whose
// choices[0].delta carries content and tool_calls fragments (merged by index), a finish_reason,
// a final usage chunk, then "data: [DONE]". Also what vLLM, llama.cpp server and Ollama speak.
#pragma once

#include "llm/wire_format.h"

namespace kda::llm {

class OpenAiChatFormat final : public WireFormat {
 public:
  ProviderKind kind() const override { return ProviderKind::kOpenAiChat; }
  std::string url(const Endpoint& endpoint) const override;
  nlohmann::json encode_body(const Request& request, const Endpoint& endpoint) const override;
  std::vector<std::pair<std::string, std::string>> headers(const Endpoint& endpoint) const override;
  std::unique_ptr<StreamDecoder> make_decoder() const override;
  std::string request_id_header() const override { return "x-request-id"; }
};

// Shared by both OpenAI formats: "https://api.openai.com/v1" when base_url is empty.
std::string openai_base(const Endpoint& endpoint);
std::vector<std::pair<std::string, std::string>> openai_headers(const Endpoint& endpoint);

}  // namespace kda::llm
