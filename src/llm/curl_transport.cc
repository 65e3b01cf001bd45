// libcurl implementation of HttpTransport. One easy handle per request (no shared state between
// threads besides curl_global_init, done once); no redirects, HTTP(S) only, no signals.
#include "llm/http_transport.h"
#include "util/strings.h"

#ifdef KDA_HAVE_CURL
#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <mutex>
#endif

namespace kda::llm {

#ifdef KDA_HAVE_CURL
namespace {

using SteadyClock = std::chrono::steady_clock;

struct TransferState {
  CURL* curl = nullptr;
  const BodySink* sink = nullptr;
  HttpResponse* response = nullptr;
  bool aborted = false;
  SteadyClock::time_point last_byte = SteadyClock::now();
  std::chrono::milliseconds stall{0};
  bool stalled = false;
};

// Called by curl about once a second: a transfer with no byte for `stall` is a read timeout.
// (CURLOPT_LOW_SPEED_* averages over a window, so a burst then silence would pass for seconds.)
int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* st = static_cast<TransferState*>(user);
  if (st->stall.count() > 0 && SteadyClock::now() - st->last_byte > st->stall) {
    st->stalled = true;
    return 1;
  }
  return 0;
}

size_t on_write(char* data, size_t size, size_t nmemb, void* user) {
  auto* st = static_cast<TransferState*>(user);
  size_t n = size * nmemb;
  st->last_byte = SteadyClock::now();
  long status = 0;
  curl_easy_getinfo(st->curl, CURLINFO_RESPONSE_CODE, &status);
  if (!(*st->sink)(std::string_view(data, n), static_cast<int>(status))) {
    st->aborted = true;
    return 0;  // makes curl fail with CURLE_WRITE_ERROR
  }
  return n;
}

size_t on_header(char* data, size_t size, size_t nmemb, void* user) {
  auto* st = static_cast<TransferState*>(user);
  size_t n = size * nmemb;
  st->last_byte = SteadyClock::now();
  std::string line(data, n);
  if (line.rfind("HTTP/", 0) == 0) {
    st->response->headers.clear();  // a new response (after 100 Continue or similar)
    return n;
  }
  auto colon = line.find(':');
  if (colon == std::string::npos) return n;
  std::string name = line.substr(0, colon);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  st->response->headers[util::trimmed(name)] = util::trimmed(line.substr(colon + 1));
  return n;
}

TransportError classify(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT: return TransportError::kConnect;
    case CURLE_OPERATION_TIMEDOUT: return TransportError::kTimeout;
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return TransportError::kNetwork;
    default: return TransportError::kOther;
  }
}

class CurlTransport final : public HttpTransport {
 public:
  HttpResponse post(const HttpRequest& request, const BodySink& on_body) override {
    HttpResponse response;
    CURL* curl = curl_easy_init();
    if (curl == nullptr) {
      response.error = TransportError::kOther;
      response.error_message = "curl_easy_init failed";
      return response;
    }
    TransferState st{curl, &on_body, &response, false};
    curl_slist* headers = nullptr;
    for (const auto& [k, v] : request.headers) headers = curl_slist_append(headers, (k + ": " + v).c_str());
    headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
    char error_buf[CURL_ERROR_SIZE] = {0};

    curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &st);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &st);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buf);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.timeouts.connect.count()));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeouts.total.count()));
    st.stall = std::chrono::duration_cast<std::chrono::milliseconds>(request.timeouts.stall);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &st);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);

    CURLcode code = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    response.status = static_cast<int>(status);
    if (st.stalled) {
      response.error = TransportError::kTimeout;
      response.error_message = "no data for " + std::to_string(st.stall.count() / 1000) + " s (stall timeout)";
    } else if (st.aborted) {
      response.error = TransportError::kAborted;
      response.error_message = "aborted by the body callback";
    } else if (code != CURLE_OK) {
      response.error = classify(code);
      response.error_message = error_buf[0] != '\0' ? error_buf : curl_easy_strerror(code);
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return response;
  }
};

}  // namespace

std::unique_ptr<HttpTransport> make_curl_transport() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] { ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; });
  if (!ok) return nullptr;
  return std::make_unique<CurlTransport>();
}

#else

std::unique_ptr<HttpTransport> make_curl_transport() { return nullptr; }

#endif

}  // namespace kda::llm
