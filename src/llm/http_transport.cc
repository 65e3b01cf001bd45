#include "llm/http_transport.h"

namespace kda::llm {

const char* transport_error_name(TransportError e) {
  switch (e) {
    case TransportError::kNone: return "none";
    case TransportError::kConnect: return "connect";
    case TransportError::kTimeout: return "timeout";
    case TransportError::kNetwork: return "network";
    case TransportError::kAborted: return "aborted";
    case TransportError::kOther: return "other";
  }
  return "other";
}

void FakeTransport::push(Reply reply) {
  std::lock_guard lock(mu_);
  replies_.push_back(std::move(reply));
}

void FakeTransport::push_body(int status, const std::string& body, size_t chunk_size,
                              std::map<std::string, std::string> headers) {
  Reply r;
  r.status = status;
  r.headers = std::move(headers);
  if (chunk_size == 0) chunk_size = body.size() + 1;
  for (size_t i = 0; i < body.size(); i += chunk_size) r.chunks.push_back(body.substr(i, chunk_size));
  push(std::move(r));
}

HttpResponse FakeTransport::post(const HttpRequest& request, const BodySink& on_body) {
  Reply reply;
  {
    std::lock_guard lock(mu_);
    requests_.push_back(request);
    if (replies_.empty()) {
      HttpResponse r;
      r.error = TransportError::kConnect;
      r.error_message = "fake transport: no scripted reply left";
      return r;
    }
    reply = std::move(replies_.front());
    replies_.pop_front();
  }
  HttpResponse out;
  out.status = reply.status;
  out.headers = reply.headers;
  for (const auto& c : reply.chunks) {
    if (!on_body(c, reply.status)) {
      out.error = TransportError::kAborted;
      out.error_message = "aborted by the body callback";
      return out;
    }
  }
  out.error = reply.error;
  out.error_message = reply.error_message;
  return out;
}

std::vector<HttpRequest> FakeTransport::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

size_t FakeTransport::pending() const {
  std::lock_guard lock(mu_);
  return replies_.size();
}

}  // namespace kda::llm
