// HTTP for the LLM clients: one POST with a streamed response body. The real implementation is
// libcurl (curl_transport.h); FakeTransport serves scripted replies to unit tests.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kda::llm {

struct HttpTimeouts {
  std::chrono::milliseconds connect{10'000};
  std::chrono::milliseconds total{600'000};  // whole request, body included
  std::chrono::seconds stall{120};           // abort when no byte arrives for this long
};

struct HttpRequest {
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  HttpTimeouts timeouts;
};

// Why a request produced no complete HTTP exchange.
enum class TransportError {
  kNone,
  kConnect,  // could not resolve/connect (retryable)
  kTimeout,  // connect, total or low-speed timeout (retryable)
  kNetwork,  // connection reset, body cut mid-transfer (retryable)
  kAborted,  // the body callback asked to stop
  kOther,    // TLS/certificate, bad URL, unsupported protocol (not retried)
};
const char* transport_error_name(TransportError e);

struct HttpResponse {
  int status = 0;                              // 0 when no status line arrived
  std::map<std::string, std::string> headers;  // names lower-cased; last value wins
  TransportError error = TransportError::kNone;
  std::string error_message;
};

// Receives body bytes as they arrive, with the HTTP status of the response they belong to;
// returning false aborts the transfer (kAborted).
using BodySink = std::function<bool(std::string_view chunk, int status)>;

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  virtual HttpResponse post(const HttpRequest& request, const BodySink& on_body) = 0;
};

// libcurl transport (TLS for https). nullptr when kda was built without libcurl.
std::unique_ptr<HttpTransport> make_curl_transport();

// Scripted replies, served in order; records every request. Thread-safe.
class FakeTransport final : public HttpTransport {
 public:
  struct Reply {
    int status = 200;
    std::map<std::string, std::string> headers;
    std::vector<std::string> chunks;               // body, delivered chunk by chunk
    TransportError error = TransportError::kNone;  // reported after the chunks (e.g. kNetwork = cut)
    std::string error_message;
  };
  void push(Reply reply);
  // One reply whose body is `body` cut into chunks of `chunk_size` bytes.
  void push_body(int status, const std::string& body, size_t chunk_size = 7,
                 std::map<std::string, std::string> headers = {});
  HttpResponse post(const HttpRequest& request, const BodySink& on_body) override;
  std::vector<HttpRequest> requests() const;
  size_t pending() const;

 private:
  mutable std::mutex mu_;
  std::deque<Reply> replies_;
  std::vector<HttpRequest> requests_;
};

}  // namespace kda::llm
