#include "llm/client.h"

#include <algorithm>

#include "llm/json_util.h"

namespace kda::llm {

namespace {

constexpr size_t kErrorBodyCap = 16 * 1024;

// The provider's message from an error body ({"error":{"message":...}}), else the body itself.
std::string error_body_message(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object()) {
    const auto& e = detail::obj(j, "error");
    if (e.is_object() && !detail::str(e, "message").empty()) {
      std::string type = detail::str(e, "type");
      return (type.empty() ? "" : type + ": ") + detail::str(e, "message");
    }
    if (e.is_string()) return e.get<std::string>();
    if (!detail::str(j, "message").empty()) return detail::str(j, "message");
  }
  std::string s = body.substr(0, 300);
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

struct AttemptOutcome {
  Result<Response> response = Status::internal("no attempt");
  int status = 0;
  bool retryable = false;
  std::optional<std::chrono::milliseconds> retry_after;
  std::string request_id;
};

}  // namespace

Client::Client(ClientOptions options, std::shared_ptr<HttpTransport> transport, RetryEnv env)
    : options_(std::move(options)),
      transport_(std::move(transport)),
      env_(std::move(env)),
      format_(make_wire_format(options_.kind)) {
  RetryEnv real = real_retry_env();
  if (!env_.now) env_.now = real.now;
  if (!env_.sleep) env_.sleep = real.sleep;
  if (!env_.uniform) env_.uniform = real.uniform;
}

Result<Response> Client::send(const Request& request, const AttemptCallback& on_attempt,
                              std::optional<std::chrono::system_clock::time_point> deadline) {
  last_attempts_ = 0;
  last_cost_known_ = false;
  if (transport_ == nullptr) return Status::io("no HTTP transport (kda was built without libcurl)");
  HttpRequest http = format_->encode(request, options_.endpoint);
  const int max_attempts = std::max(1, options_.retry.max_attempts);
  std::string last_error;

  for (int attempt = 1; attempt <= max_attempts; ++attempt) {
    last_attempts_ = attempt;
    http.timeouts = options_.timeouts;
    if (deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - env_.now());
      if (left <= std::chrono::milliseconds(0)) {
        return Status::io("LLM request: session deadline passed after " + std::to_string(attempt - 1) + " attempt(s)" +
                          (last_error.empty() ? "" : "; last error: " + last_error));
      }
      http.timeouts.total = std::min(http.timeouts.total, left);
    }

    // --- one attempt ---
    AttemptOutcome out;
    SseParser parser;
    auto decoder = format_->make_decoder();
    Status decode_error;
    std::string error_body;
    HttpResponse resp = transport_->post(http, [&](std::string_view chunk, int status) {
      if (status < 200 || status >= 300) {
        if (error_body.size() < kErrorBodyCap) error_body.append(chunk.substr(0, kErrorBodyCap - error_body.size()));
        return true;
      }
      for (const auto& ev : parser.feed(chunk)) {
        if (decoder->complete()) break;
        decode_error = decoder->on_event(ev);
        if (!decode_error.ok()) return false;
      }
      // Stop reading at the final event: a server that then holds the connection open would
      // otherwise cost a stall timeout.
      return !decoder->complete();
    });
    out.status = resp.status;
    if (auto it = resp.headers.find(format_->request_id_header()); it != resp.headers.end()) {
      out.request_id = it->second;
    }
    if (auto it = resp.headers.find("retry-after"); it != resp.headers.end()) {
      out.retry_after = parse_retry_after(it->second, env_.now());
    }

    if (!decode_error.ok()) {
      out.response = decode_error;
      out.retryable = true;
    } else if (resp.error != TransportError::kNone &&
               !(resp.status >= 200 && resp.status < 300 && decoder->complete())) {
      // A transport error after the final event (e.g. a connection reset on close) is harmless.
      out.response =
          Status::io(std::string("HTTP ") + transport_error_name(resp.error) + " error: " + resp.error_message);
      out.retryable = resp.error != TransportError::kOther;
    } else if (resp.status < 200 || resp.status >= 300) {
      out.response = Status::bad_input("HTTP " + std::to_string(resp.status) + " from " + http.url + ": " +
                                       error_body_message(error_body));
      out.retryable = retryable_status(resp.status);
    } else {
      parser.finish();
      out.response = decoder->finish();
      out.retryable = !out.response.ok();  // a cut stream
    }

    AttemptInfo info;
    info.attempt = attempt;
    info.http_status = out.status;
    info.ok = out.response.ok();
    info.request_id = out.request_id;
    if (out.response.ok()) {
      Response r = std::move(out.response).value();
      if (!out.request_id.empty()) r.request_id = out.request_id;
      r.usage.requests = attempt;
      Cost cost = options_.prices.cost(request.model, r.usage);
      r.usage.cost_usd = cost.usd;
      last_cost_known_ = cost.known;
      if (on_attempt) on_attempt(info);
      return r;
    }
    last_error = out.response.status().message();
    info.error = last_error;
    info.will_retry = out.retryable && attempt < max_attempts;
    if (info.will_retry) {
      if (out.retry_after) {
        info.delay = std::min(*out.retry_after, options_.retry.max_retry_after);
        info.retry_after = true;
      } else {
        info.delay = backoff_delay(options_.retry, attempt, env_.uniform());
      }
      if (deadline && env_.now() + info.delay >= *deadline) info.will_retry = false;
    }
    if (on_attempt) on_attempt(info);
    if (!info.will_retry) {
      Status s = out.response.status();
      if (out.retryable) {
        return Status::io("LLM request failed after " + std::to_string(attempt) + " attempt(s): " + last_error);
      }
      return s;
    }
    env_.sleep(info.delay);
  }
  return Status::internal("unreachable: retry loop ended");
}

}  // namespace kda::llm
