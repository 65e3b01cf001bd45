// OpenAI Responses API: POST {base}/responses (base includes /v1), Bearer auth, stream:true,
// store:false (kda resends the whole conversation each turn). Stream: output items arrive in
// response.output_item.done (message -> text, function_call -> tool_use); response.completed or
// response.incomplete ends the turn and carries usage; response.failed and error fail the attempt.
#pragma once

#include "llm/wire_format.h"

namespace kda::llm {

class OpenAiResponsesFormat final : public WireFormat {
 public:
  ProviderKind kind() const override { return ProviderKind::kOpenAiResponses; }
  std::string url(const Endpoint& endpoint) const override;
  nlohmann::json encode_body(const Request& request, const Endpoint& endpoint) const override;
  std::vector<std::pair<std::string, std::string>> headers(const Endpoint& endpoint) const override;
  std::unique_ptr<StreamDecoder> make_decoder() const override;
  std::string request_id_header() const override { return "x-request-id"; }
};

}  // namespace kda::llm
