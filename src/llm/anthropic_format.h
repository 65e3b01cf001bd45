// Anthropic Messages API: POST {base}/v1/messages with x-api-key and anthropic-version 2023-06-01,
// stream:true. Stream: message_start, content_block_start/delta/stop (text_delta,
// input_json_delta), message_delta (stop_reason, usage), message_stop; "error" events fail the
// attempt; ping and unknown events are ignored.
#pragma once

#include "llm/wire_format.h"

namespace kda::llm {

class AnthropicFormat final : public WireFormat {
 public:
  static constexpr const char* kVersion = "2023-06-01";
  ProviderKind kind() const override { return ProviderKind::kAnthropic; }
  std::string url(const Endpoint& endpoint) const override;
  nlohmann::json encode_body(const Request& request, const Endpoint& endpoint) const override;
  std::vector<std::pair<std::string, std::string>> headers(const Endpoint& endpoint) const override;
  std::unique_ptr<StreamDecoder> make_decoder() const override;
  std::string request_id_header() const override { return "request-id"; }
};

}  // namespace kda::llm
