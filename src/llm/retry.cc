#include "llm/retry.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <thread>

namespace kda::llm {

RetryEnv real_retry_env() {
  RetryEnv env;
  env.now = [] { return std::chrono::system_clock::now(); };
  env.sleep = [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
  env.uniform = [] {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  };
  return env;
}

bool retryable_status(int status) { return status == 408 || status == 409 || status == 429 || status >= 500; }

std::chrono::milliseconds backoff_delay(const RetryPolicy& policy, int failed_attempts, double uniform) {
  double cap = static_cast<double>(policy.initial_backoff.count()) * std::pow(2.0, std::max(0, failed_attempts - 1));
  cap = std::min(cap, static_cast<double>(policy.max_backoff.count()));
  uniform = std::clamp(uniform, 0.0, 1.0);
  return std::chrono::milliseconds(static_cast<int64_t>(cap * uniform));
}

std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value,
                                                           std::chrono::system_clock::time_point now) {
  std::string v(value);
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.erase(v.begin());
  if (v.empty()) return std::nullopt;
  if (std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); })) {
    if (v.size() > 9) return std::chrono::milliseconds(int64_t{999'999'999} * 1000);
    return std::chrono::milliseconds(std::stoll(v) * 1000);
  }
  // IMF-fixdate, the form HTTP/1.1 senders must use: "Sun, 06 Nov 1994 08:49:37 GMT".
  std::tm tm{};
  const char* end = strptime(v.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  time_t when = timegm(&tm);
  auto at = std::chrono::system_clock::from_time_t(when);
  auto delta = std::chrono::duration_cast<std::chrono::milliseconds>(at - now);
  return std::max(delta, std::chrono::milliseconds(0));
}

}  // namespace kda::llm
