// One LLM request with kda's retries: encode with the wire format, POST through the transport,
// decode the SSE stream, and retry on 429 / 408 / 409 / 5xx, connect and read timeouts, network
// errors, streams cut before their final event and malformed stream JSON. Retry-After is honoured
// (capped); other 4xx fail at once. A cut stream is never returned as a partial success.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "llm/http_transport.h"
#include "llm/message.h"
#include "llm/price_table.h"
#include "llm/retry.h"
#include "llm/wire_format.h"
#include "util/status.h"

namespace kda::llm {

// One attempt, as the loop audits it.
struct AttemptInfo {
  int attempt = 1;      // 1-based
  int http_status = 0;  // 0: no response (connect error, timeout)
  bool ok = false;      // this attempt produced the response
  std::string error;    // why it failed ("" when ok)
  bool will_retry = false;
  std::chrono::milliseconds delay{0};  // sleep before the next attempt
  bool retry_after = false;            // delay came from a Retry-After header
  std::string request_id;
};
using AttemptCallback = std::function<void(const AttemptInfo&)>;

struct ClientOptions {
  ProviderKind kind = ProviderKind::kAnthropic;
  Endpoint endpoint;
  HttpTimeouts timeouts;
  RetryPolicy retry;
  PriceTable prices = PriceTable::defaults();
};

class Client {
 public:
  Client(ClientOptions options, std::shared_ptr<HttpTransport> transport, RetryEnv env = real_retry_env());

  // On success the response's usage has requests = attempts made and cost_usd from the price
  // table (cost_known says whether the model was priced). `deadline` bounds attempts and sleeps.
  Result<Response> send(const Request& request, const AttemptCallback& on_attempt = {},
                        std::optional<std::chrono::system_clock::time_point> deadline = std::nullopt);

  // Attempts made by the last send(), successful or not.
  int last_attempts() const { return last_attempts_; }
  bool last_cost_known() const { return last_cost_known_; }
  const ClientOptions& options() const { return options_; }

 private:
  ClientOptions options_;
  std::shared_ptr<HttpTransport> transport_;
  RetryEnv env_;
  std::unique_ptr<WireFormat> format_;
  int last_attempts_ = 0;
  bool last_cost_known_ = false;
};

}  // namespace kda::llm
