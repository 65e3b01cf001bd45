// The real libcurl transport against a tiny HTTP server on 127.0.0.1:0 run by the test itself.
// Every wait is bounded (poll timeouts), so a broken transport fails the test instead of hanging.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "llm/client.h"
#include "llm/http_transport.h"
#include "llm/testing_streams.h"

namespace kda::llm {
namespace {

using namespace std::chrono_literals;

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

std::string chunk(const std::string& data) {
  char hex[32];
  snprintf(hex, sizeof hex, "%zx\r\n", data.size());
  return hex + data + "\r\n";
}

// Serves one scripted handler per connection, in order.
class LoopbackServer {
 public:
  using Handler = std::function<void(int fd)>;
  explicit LoopbackServer(std::vector<Handler> handlers) : handlers_(std::move(handlers)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listen_fd_, 8), 0);
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~LoopbackServer() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  void serve() {
    for (auto& handler : handlers_) {
      int fd = -1;
      auto until = std::chrono::steady_clock::now() + 20s;
      while (!stop_ && fd < 0 && std::chrono::steady_clock::now() < until) {
        pollfd p{listen_fd_, POLLIN, 0};
        if (::poll(&p, 1, 100) == 1) fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      }
      if (fd < 0) return;
      std::string req = read_request(fd);
      {
        std::lock_guard lock(mu_);
        requests_.push_back(req);
      }
      handler(fd);
      ::close(fd);
    }
  }

  static std::string read_request(int fd) {
    std::string data;
    size_t need = std::string::npos;
    auto until = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < until) {
      if (need == std::string::npos) {
        auto end = data.find("\r\n\r\n");
        if (end != std::string::npos) {
          size_t length = 0;
          auto cl = data.find("ontent-Length:");
          if (cl == std::string::npos) cl = data.find("ontent-length:");
          if (cl != std::string::npos && cl < end) length = std::stoul(data.substr(cl + 14));
          need = end + 4 + length;
        }
      }
      if (need != std::string::npos && data.size() >= need) break;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) != 1) continue;
      char buf[4096];
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      data.append(buf, static_cast<size_t>(n));
    }
    return data;
  }

  std::vector<Handler> handlers_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::string> requests_;
};

const char* kSseHeaders =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
    "request-id: req_loop\r\nConnection: close\r\n\r\n";

// A full Anthropic stream, sent as several chunks with small pauses between them.
LoopbackServer::Handler good_stream(const std::string& text) {
  return [text](int fd) {
    std::string body = testing::anthropic_stream(text, {{"t1", "read_file", nlohmann::json{{"path", "a"}}}});
    write_all(fd, kSseHeaders);
    for (size_t i = 0; i < body.size(); i += 97) {
      write_all(fd, chunk(body.substr(i, 97)));
      if (i % 3 == 0) std::this_thread::sleep_for(1ms);
    }
    write_all(fd, "0\r\n\r\n");
  };
}

ClientOptions options_for(const LoopbackServer& server) {
  ClientOptions o;
  o.kind = ProviderKind::kAnthropic;
  o.endpoint = {server.url(), "sk-loop", ""};
  o.timeouts.connect = 5000ms;
  o.timeouts.total = 20'000ms;
  o.timeouts.stall = 2s;
  o.retry.max_attempts = 3;
  o.retry.initial_backoff = 10ms;
  o.retry.max_backoff = 20ms;
  return o;
}

Request hello() {
  Request r;
  r.model = "claude-sonnet-4-5";
  r.messages.push_back({MessageRole::kUser, {ContentBlock::make_text("hello")}});
  return r;
}

#ifdef KDA_HAVE_CURL

TEST(CurlTransport, StreamsAnswerOverLoopback) {
  LoopbackServer server({good_stream("Hello from loopback")});
  std::shared_ptr<HttpTransport> t = make_curl_transport();
  ASSERT_NE(t, nullptr);
  Client client(options_for(server), t);
  auto r = client.send(hello());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->blocks[0].text, "Hello from loopback");
  EXPECT_EQ(r->blocks[1].input, (nlohmann::json{{"path", "a"}}));
  EXPECT_EQ(r->request_id, "req_loop");
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].rfind("POST /v1/messages HTTP/1.1\r\n", 0), 0u) << reqs[0];
  EXPECT_NE(reqs[0].find("x-api-key: sk-loop"), std::string::npos);
  EXPECT_NE(reqs[0].find("anthropic-version: 2023-06-01"), std::string::npos);
  EXPECT_NE(reqs[0].find("\"stream\":true"), std::string::npos);
}

TEST(CurlTransport, RateLimitThenCutStreamThenSuccess) {
  LoopbackServer server({
      [](int fd) {
        write_all(fd,
                  "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0\r\nContent-Type: application/json\r\n"
                  "Content-Length: 48\r\nConnection: close\r\n\r\n"
                  "{\"error\":{\"type\":\"rate_limit\",\"message\":\"wait\"}}");
      },
      [](int fd) {  // cut mid-chunk: the transport sees a broken chunked body
        std::string body = testing::anthropic_stream("never seen", {});
        write_all(fd, kSseHeaders);
        write_all(fd, "400\r\n" + body.substr(0, 200));
      },
      good_stream("third time"),
  });
  std::vector<AttemptInfo> attempts;
  Client client(options_for(server), make_curl_transport());
  auto r = client.send(hello(), [&](const AttemptInfo& a) { attempts.push_back(a); });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->blocks[0].text, "third time");
  ASSERT_EQ(attempts.size(), 3u);
  EXPECT_EQ(attempts[0].http_status, 429);
  EXPECT_TRUE(attempts[0].retry_after);
  EXPECT_EQ(attempts[1].http_status, 200);
  EXPECT_FALSE(attempts[1].ok);
  EXPECT_NE(attempts[1].error.find("network"), std::string::npos) << attempts[1].error;
  EXPECT_EQ(r->usage.requests, 3);
}

TEST(CurlTransport, StopsReadingAtTheFinalEvent) {
  LoopbackServer server({[](int fd) {
    write_all(fd, kSseHeaders);
    write_all(fd, chunk(testing::anthropic_stream("quick", {})));
    std::this_thread::sleep_for(3s);  // holds the connection open, no terminating chunk
  }});
  ClientOptions o = options_for(server);
  o.timeouts.stall = 10s;
  Client client(o, make_curl_transport());
  auto start = std::chrono::steady_clock::now();
  auto r = client.send(hello());
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->blocks[0].text, "quick");
  EXPECT_EQ(r->usage.requests, 1);
  EXPECT_LT(took, 2s);
}

TEST(CurlTransport, StalledStreamTimesOut) {
  LoopbackServer server({[](int fd) {
    write_all(fd, kSseHeaders);
    std::this_thread::sleep_for(4s);  // no byte for longer than stall (2 s)
  }});
  auto t = make_curl_transport();
  HttpRequest req;
  req.url = server.url() + "/v1/messages";
  req.body = "{}";
  req.timeouts.stall = 2s;
  req.timeouts.total = 20'000ms;
  auto start = std::chrono::steady_clock::now();
  HttpResponse resp = t->post(req, [](std::string_view, int) { return true; });
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(resp.error, TransportError::kTimeout) << resp.error_message;
  EXPECT_LT(took, 4s);
}

TEST(CurlTransport, RefusedConnectionIsConnectError) {
  int port;
  {
    LoopbackServer server({});
    port = server.port();
  }  // closed: nothing listens there now
  auto t = make_curl_transport();
  HttpRequest req;
  req.url = "http://127.0.0.1:" + std::to_string(port) + "/v1/messages";
  req.timeouts.connect = 2000ms;
  HttpResponse resp = t->post(req, [](std::string_view, int) { return true; });
  EXPECT_EQ(resp.error, TransportError::kConnect) << resp.error_message;
  EXPECT_EQ(resp.status, 0);
}

TEST(CurlTransport, OnlyHttpSchemes) {
  auto t = make_curl_transport();
  HttpRequest req;
  req.url = "file:///etc/passwd";
  bool got_body = false;
  HttpResponse resp = t->post(req, [&](std::string_view, int) {
    got_body = true;
    return true;
  });
  EXPECT_EQ(resp.error, TransportError::kOther);
  EXPECT_FALSE(got_body);
}

#else

TEST(CurlTransport, AbsentWithoutLibcurl) { EXPECT_EQ(make_curl_transport(), nullptr); }

#endif

}  // namespace
}  // namespace kda::llm
