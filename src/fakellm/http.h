// Just enough HTTP/1.1 for the fake server: read one request at a time from a keep-alive
// connection (Content-Length or chunked bodies, Expect: 100-continue), write responses.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/status.h"

namespace kda::fakellm {

struct HttpRequest {
  std::string method;
  std::string target;                                        // path and query as sent
  std::string path;                                          // target without the query
  std::string version;                                       // "HTTP/1.1"
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, in order
  std::string body;
  bool keep_alive = true;

  const std::string* header(std::string_view name) const;  // lower-case name
};

class HttpConnection {
 public:
  explicit HttpConnection(int fd) : fd_(fd) {}
  // The next request; nullopt when the peer closed the connection cleanly between requests.
  // Errors: malformed request (kBadInput) or a broken socket (kIo).
  Result<std::optional<HttpRequest>> read_request();
  // false when the peer is gone.
  bool write_all(std::string_view data);
  // One chunk of a chunked body (empty data is skipped; use finish_chunks() to end the body).
  bool write_chunk(std::string_view data);
  bool finish_chunks() { return write_all("0\r\n\r\n"); }
  int fd() const { return fd_; }

 private:
  // Reads more bytes into buf_; false on EOF or error.
  bool fill();
  Result<std::string> read_line();  // without CRLF

  int fd_;
  std::string buf_;
  size_t pos_ = 0;
};

const char* reason_phrase(int status);

// "HTTP/1.1 <status> <reason>\r\n" + headers + "\r\n" (caller adds the body).
std::string response_head(int status, const std::vector<std::pair<std::string, std::string>>& headers);

}  // namespace kda::fakellm
