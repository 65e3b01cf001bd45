// kda's own retry policy for LLM requests: exponential backoff with full jitter, Retry-After
// honoured (seconds or HTTP date) up to a cap. Clock, sleep and randomness are injectable.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string_view>

namespace kda::llm {

struct RetryPolicy {
  int max_attempts = 6;                                // attempts in all, the first included
  std::chrono::milliseconds initial_backoff{1000};     // cap of the first jittered delay
  std::chrono::milliseconds max_backoff{60'000};       // cap of any jittered delay
  std::chrono::milliseconds max_retry_after{300'000};  // a longer Retry-After is cut to this
};

struct RetryEnv {
  std::function<std::chrono::system_clock::time_point()> now;
  std::function<void(std::chrono::milliseconds)> sleep;
  std::function<double()> uniform;  // uniform in [0, 1)
};
RetryEnv real_retry_env();

// HTTP statuses worth another attempt: 408, 409, 429 and every 5xx.
bool retryable_status(int status);

// Full jitter: uniform(0, min(max_backoff, initial_backoff * 2^(failed_attempts - 1))).
std::chrono::milliseconds backoff_delay(const RetryPolicy& policy, int failed_attempts, double uniform);

// Retry-After as delta-seconds ("120") or an HTTP date ("Wed, 21 Oct 2015 07:28:00 GMT");
// nullopt when unparseable. A date in the past gives 0.
std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value,
                                                           std::chrono::system_clock::time_point now);

}  // namespace kda::llm
