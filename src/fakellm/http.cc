#include "fakellm/http.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "util/strings.h"

namespace kda::fakellm {
namespace {

constexpr size_t kMaxHeaderBytes = 256 * 1024;
constexpr size_t kMaxBodyBytes = 256 * 1024 * 1024;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return &v;
  }
  return nullptr;
}

bool HttpConnection::fill() {
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  char tmp[16384];
  for (;;) {
    ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n > 0) {
      buf_.append(tmp, static_cast<size_t>(n));
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

Result<std::string> HttpConnection::read_line() {
  for (;;) {
    size_t nl = buf_.find("\r\n", pos_);
    if (nl != std::string::npos) {
      std::string line = buf_.substr(pos_, nl - pos_);
      pos_ = nl + 2;
      return line;
    }
    if (buf_.size() - pos_ > kMaxHeaderBytes) return Status::bad_input("header line too long");
    if (!fill()) return Status::io("connection closed");
  }
}

Result<std::optional<HttpRequest>> HttpConnection::read_request() {
  // Skip stray CRLFs between requests; a clean close here is not an error.
  for (;;) {
    if (pos_ < buf_.size()) {
      if (buf_.compare(pos_, 2, "\r\n") == 0) {
        pos_ += 2;
        continue;
      }
      break;
    }
    if (!fill()) return std::optional<HttpRequest>();
  }
  HttpRequest req;
  KDA_ASSIGN_OR_RETURN(std::string line, read_line());
  size_t sp1 = line.find(' ');
  size_t sp2 = line.rfind(' ');
  if (sp1 == std::string::npos || sp2 == sp1) return Status::bad_input("bad request line");
  req.method = line.substr(0, sp1);
  req.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  req.version = line.substr(sp2 + 1);
  req.path = req.target.substr(0, req.target.find('?'));
  size_t header_bytes = 0;
  for (;;) {
    KDA_ASSIGN_OR_RETURN(std::string h, read_line());
    if (h.empty()) break;
    header_bytes += h.size();
    if (header_bytes > kMaxHeaderBytes) return Status::bad_input("headers too large");
    size_t colon = h.find(':');
    if (colon == std::string::npos) return Status::bad_input("bad header line");
    req.headers.emplace_back(lower(util::trimmed(h.substr(0, colon))), util::trimmed(h.substr(colon + 1)));
  }
  const std::string* conn = req.header("connection");
  std::string conn_l = conn ? lower(*conn) : "";
  req.keep_alive = req.version == "HTTP/1.0" ? conn_l.find("keep-alive") != std::string::npos
                                             : conn_l.find("close") == std::string::npos;
  const std::string* expect = req.header("expect");
  if (expect && lower(*expect) == "100-continue") {
    if (!write_all("HTTP/1.1 100 Continue\r\n\r\n")) return Status::io("connection closed");
  }
  const std::string* te = req.header("transfer-encoding");
  if (te && lower(*te).find("chunked") != std::string::npos) {
    for (;;) {
      KDA_ASSIGN_OR_RETURN(std::string size_line, read_line());
      char* end = nullptr;
      unsigned long size = std::strtoul(size_line.c_str(), &end, 16);
      if (end == size_line.c_str()) return Status::bad_input("bad chunk size");
      if (req.body.size() + size > kMaxBodyBytes) return Status::bad_input("body too large");
      if (size == 0) {
        for (;;) {  // trailers
          KDA_ASSIGN_OR_RETURN(std::string t, read_line());
          if (t.empty()) break;
        }
        break;
      }
      while (buf_.size() - pos_ < size + 2) {
        if (!fill()) return Status::io("connection closed in a chunk");
      }
      req.body.append(buf_, pos_, size);
      pos_ += size + 2;
    }
  } else if (const std::string* cl = req.header("content-length")) {
    char* end = nullptr;
    unsigned long long n = std::strtoull(cl->c_str(), &end, 10);
    if (end == cl->c_str() || n > kMaxBodyBytes) return Status::bad_input("bad content-length");
    while (buf_.size() - pos_ < n) {
      if (!fill()) return Status::io("connection closed in the body");
    }
    req.body = buf_.substr(pos_, n);
    pos_ += n;
  }
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  return std::optional<HttpRequest>(std::move(req));
}

bool HttpConnection::write_all(std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool HttpConnection::write_chunk(std::string_view data) {
  if (data.empty()) return true;
  char size[32];
  int len = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out(size, static_cast<size_t>(len));
  out.append(data);
  out += "\r\n";
  return write_all(out);
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 529: return "Overloaded";
    default: return status < 400 ? "OK" : status < 500 ? "Client Error" : "Server Error";
  }
}

std::string response_head(int status, const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  for (const auto& [k, v] : headers) out += k + ": " + v + "\r\n";
  return out + "\r\n";
}

}  // namespace kda::fakellm
