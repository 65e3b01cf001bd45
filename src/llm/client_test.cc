#include "llm/client.h"

#include <gtest/gtest.h>

#include "llm/testing_streams.h"

namespace kda::llm {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// A fake clock: sleeping advances it. uniform() is fixed, so jittered delays are exact.
struct FakeTime {
  std::chrono::system_clock::time_point t = std::chrono::system_clock::from_time_t(784111777);  // 06 Nov 1994 08:49:37
  std::vector<std::chrono::milliseconds> sleeps;
  double u = 0.5;
  RetryEnv env() {
    return {[this] { return t; },
            [this](std::chrono::milliseconds d) {
              sleeps.push_back(d);
              t += d;
            },
            [this] { return u; }};
  }
};

struct Harness {
  std::shared_ptr<FakeTransport> transport = std::make_shared<FakeTransport>();
  FakeTime time;
  std::vector<AttemptInfo> attempts;
  ClientOptions options;

  explicit Harness(ProviderKind kind = ProviderKind::kAnthropic) {
    options.kind = kind;
    options.endpoint = {"http://127.0.0.1:1", "k", "max_tokens"};
    options.retry.max_attempts = 4;
    options.retry.initial_backoff = 1000ms;
    options.retry.max_backoff = 8000ms;
    options.retry.max_retry_after = 60'000ms;
  }
  Result<Response> send(const std::string& model = "claude-sonnet-4-5",
                        std::optional<std::chrono::system_clock::time_point> deadline = std::nullopt) {
    Client c(options, transport, time.env());
    Request r;
    r.model = model;
    r.messages.push_back({MessageRole::kUser, {ContentBlock::make_text("hi")}});
    auto out = c.send(
        r, [this](const AttemptInfo& a) { attempts.push_back(a); }, deadline);
    last_cost_known = c.last_cost_known();
    return out;
  }
  void ok_reply() { transport->push_body(200, testing::anthropic_stream("done", {}), 9); }
  bool last_cost_known = false;
};

const std::string kRateLimitBody = R"({"type":"error","error":{"type":"rate_limit_error","message":"slow down"}})";

TEST(Backoff, FullJitterDoublesAndCaps) {
  RetryPolicy p;
  p.initial_backoff = 1000ms;
  p.max_backoff = 5000ms;
  EXPECT_EQ(backoff_delay(p, 1, 1.0), 1000ms);
  EXPECT_EQ(backoff_delay(p, 2, 1.0), 2000ms);
  EXPECT_EQ(backoff_delay(p, 3, 0.5), 2000ms);
  EXPECT_EQ(backoff_delay(p, 10, 1.0), 5000ms);
  EXPECT_EQ(backoff_delay(p, 4, 0.0), 0ms);
}

TEST(RetryAfter, SecondsAndHttpDate) {
  auto now = std::chrono::system_clock::from_time_t(784111777);
  EXPECT_EQ(parse_retry_after("120", now), 120'000ms);
  EXPECT_EQ(parse_retry_after(" 3 ", now), 3000ms);
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now), 30'000ms);
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now), 0ms);  // in the past
  EXPECT_FALSE(parse_retry_after("soon", now).has_value());
  EXPECT_FALSE(parse_retry_after("-5", now).has_value());
  EXPECT_FALSE(parse_retry_after("", now).has_value());
}

TEST(RetryableStatus, Classes) {
  for (int s : {408, 409, 429, 500, 502, 503, 504, 529}) EXPECT_TRUE(retryable_status(s)) << s;
  for (int s : {400, 401, 403, 404, 413, 422}) EXPECT_FALSE(retryable_status(s)) << s;
}

TEST(Client, RateLimitHonoursRetryAfterSeconds) {
  Harness h;
  h.transport->push_body(429, kRateLimitBody, 10, {{"retry-after", "7"}});
  h.ok_reply();
  auto r = h.send();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->blocks[0].text, "done");
  EXPECT_EQ(r->usage.requests, 2);
  ASSERT_EQ(h.time.sleeps.size(), 1u);
  EXPECT_EQ(h.time.sleeps[0], 7000ms);
  ASSERT_EQ(h.attempts.size(), 2u);
  EXPECT_EQ(h.attempts[0].http_status, 429);
  EXPECT_TRUE(h.attempts[0].will_retry);
  EXPECT_TRUE(h.attempts[0].retry_after);
  EXPECT_NE(h.attempts[0].error.find("slow down"), std::string::npos) << h.attempts[0].error;
  EXPECT_TRUE(h.attempts[1].ok);
}

TEST(Client, RetryAfterHttpDateAndCap) {
  Harness h;
  h.transport->push_body(503, "overloaded", 100, {{"retry-after", "Sun, 06 Nov 1994 08:50:07 GMT"}});
  h.transport->push_body(429, kRateLimitBody, 100, {{"retry-after", "86400"}});
  h.ok_reply();
  auto r = h.send();
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(h.time.sleeps.size(), 2u);
  EXPECT_EQ(h.time.sleeps[0], 30'000ms);
  EXPECT_EQ(h.time.sleeps[1], 60'000ms);  // capped at max_retry_after
}

TEST(Client, ServerErrorsRetriedWithJitteredBackoff) {
  Harness h;
  h.transport->push_body(500, "{}");
  h.transport->push_body(502, "bad gateway");
  h.ok_reply();
  auto r = h.send();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->usage.requests, 3);
  ASSERT_EQ(h.time.sleeps.size(), 2u);
  EXPECT_EQ(h.time.sleeps[0], 500ms);   // 0.5 * 1000
  EXPECT_EQ(h.time.sleeps[1], 1000ms);  // 0.5 * 2000
  // The same request body every attempt.
  auto reqs = h.transport->requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].body, reqs[2].body);
}

TEST(Client, CutStreamRetriedNeverPartialSuccess) {
  for (TransportError how : {TransportError::kNone, TransportError::kNetwork}) {
    Harness h;
    std::string full = testing::anthropic_stream("a long answer", {{"t1", "write_file", json{{"path", "x"}}}});
    FakeTransport::Reply cut;
    cut.status = 200;
    cut.chunks = {full.substr(0, full.size() / 2)};
    cut.error = how;
    cut.error_message = "connection reset";
    h.transport->push(cut);
    h.ok_reply();
    auto r = h.send();
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->blocks.size(), 1u);
    EXPECT_EQ(r->blocks[0].text, "done");  // nothing of the cut attempt leaks in
    ASSERT_EQ(h.attempts.size(), 2u);
    EXPECT_FALSE(h.attempts[0].ok);
    EXPECT_TRUE(h.attempts[0].will_retry);
  }
}

TEST(Client, MalformedJsonRetried) {
  Harness h(ProviderKind::kOpenAiChat);
  h.transport->push_body(200, "data: {\"choices\": [tru\n\n");
  h.transport->push_body(200, testing::chat_stream("fine", {}));
  auto r = h.send("gpt-5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->blocks[0].text, "fine");
  ASSERT_EQ(h.attempts.size(), 2u);
  EXPECT_NE(h.attempts[0].error.find("malformed"), std::string::npos);
}

TEST(Client, ConnectErrorAndTimeoutRetried) {
  Harness h;
  FakeTransport::Reply refused;
  refused.status = 0;
  refused.error = TransportError::kConnect;
  FakeTransport::Reply timeout;
  timeout.status = 0;
  timeout.error = TransportError::kTimeout;
  h.transport->push(refused);
  h.transport->push(timeout);
  h.ok_reply();
  auto r = h.send();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->usage.requests, 3);
}

TEST(Client, BadRequestNotRetried) {
  for (int status : {400, 401, 403, 404}) {
    Harness h;
    h.transport->push_body(status, R"({"error":{"type":"invalid_request_error","message":"max_tokens: too large"}})");
    h.ok_reply();
    auto r = h.send();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput);
    EXPECT_NE(r.status().message().find("max_tokens: too large"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(std::to_string(status)), std::string::npos);
    EXPECT_EQ(h.transport->requests().size(), 1u);
    EXPECT_TRUE(h.time.sleeps.empty());
    ASSERT_EQ(h.attempts.size(), 1u);
    EXPECT_FALSE(h.attempts[0].will_retry);
  }
}

TEST(Client, ConflictAndRequestTimeoutRetried) {
  Harness h;
  h.transport->push_body(408, "");
  h.transport->push_body(409, "");
  h.ok_reply();
  EXPECT_TRUE(h.send().ok());
}

TEST(Client, TlsOrUrlErrorNotRetried) {
  Harness h;
  FakeTransport::Reply bad;
  bad.status = 0;
  bad.error = TransportError::kOther;
  bad.error_message = "SSL certificate problem";
  h.transport->push(bad);
  h.ok_reply();
  auto r = h.send();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(h.transport->requests().size(), 1u);
}

TEST(Client, AttemptsBounded) {
  Harness h;
  for (int i = 0; i < 10; ++i) h.transport->push_body(500, "down");
  auto r = h.send();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(h.transport->requests().size(), 4u);  // max_attempts
  EXPECT_EQ(h.time.sleeps.size(), 3u);
  EXPECT_NE(r.status().message().find("after 4 attempt(s)"), std::string::npos) << r.status().message();
  EXPECT_FALSE(h.attempts.back().will_retry);
}

TEST(Client, DeadlineStopsRetries) {
  Harness h;
  h.transport->push_body(429, kRateLimitBody, 10, {{"retry-after", "30"}});
  h.ok_reply();
  auto r = h.send("claude-sonnet-4-5", h.time.t + 10s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(h.transport->requests().size(), 1u);
  EXPECT_TRUE(h.time.sleeps.empty());
}

TEST(Client, DeadlineBoundsRequestTimeout) {
  Harness h;
  h.options.timeouts.total = 600'000ms;
  h.ok_reply();
  ASSERT_TRUE(h.send("claude-sonnet-4-5", h.time.t + 20s).ok());
  EXPECT_EQ(h.transport->requests()[0].timeouts.total, 20'000ms);
}

TEST(Client, UsageAndCost) {
  Harness h;
  h.ok_reply();  // input 10, output 5, cache read 3, cache write 2
  auto r = h.send("claude-sonnet-4-5-20250929");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->usage.input_tokens, 10);
  EXPECT_EQ(r->usage.output_tokens, 5);
  EXPECT_EQ(r->usage.cache_read_tokens, 3);
  EXPECT_EQ(r->usage.cache_write_tokens, 2);
  EXPECT_DOUBLE_EQ(r->usage.cost_usd, (10 * 3 + 5 * 15 + 3 * 0.3 + 2 * 3.75) / 1e6);
  EXPECT_TRUE(h.last_cost_known);

  Harness u;
  u.ok_reply();
  auto r2 = u.send("my-local-model");
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->usage.cost_usd, 0);
  EXPECT_FALSE(u.last_cost_known);
}

TEST(Client, RequestIdFromHeader) {
  Harness h;
  h.transport->push_body(200, testing::anthropic_stream("x", {}), 50, {{"request-id", "req_abc"}});
  auto r = h.send();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->request_id, "req_abc");
}

}  // namespace
}  // namespace kda::llm
