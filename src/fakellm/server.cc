#include "fakellm/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "fakellm/conversation.h"
#include "fakellm/http.h"
#include "fakellm/resolve.h"
#include "fakellm/scenario.h"
#include "fakellm/wire.h"
#include "util/fs.h"

namespace kda::fakellm {

using nlohmann::json;

namespace {

constexpr const char* kNoScenarioText = "fake-llm: no scenario matches this request";
constexpr const char* kNoToolsText = "fake-llm: ok";

bool secret_header(const std::string& name) {
  return name == "authorization" || name == "x-api-key" || name == "api-key" || name == "cookie" ||
         name == "proxy-authorization" || name.find("key") != std::string::npos ||
         name.find("token") != std::string::npos || name.find("secret") != std::string::npos;
}

std::optional<Format> route(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (p == "/v1/messages" || p == "/messages") return Format::kAnthropic;
  if (p == "/v1/chat/completions" || p == "/chat/completions") return Format::kChat;
  if (p == "/v1/responses" || p == "/responses") return Format::kResponses;
  return std::nullopt;
}

// What one request gets, decided before anything is written.
struct Plan {
  int status = 200;
  int retry_after = -1;
  std::string cut;  // "", "after_start", "before_response"
  bool malformed = false;
  int delay_ms = 0;
  std::string fault;  // for the log
  json body;          // non-streaming body or error body
  std::vector<SseEvent> events;
  int first_delta = 0;
  bool stream = false;
};

// What the faults that fire on this attempt do to the reply: the longest delay, the first status,
// a cut (before the response wins), a malformed body; and the one fault the log names.
Plan fault_plan(const std::vector<Fault>& faults, int attempt) {
  Plan plan;
  for (const Fault& f : faults) {
    if (!f.fires(attempt)) continue;
    switch (f.kind) {
      case Fault::Kind::kDelay: plan.delay_ms = std::max(plan.delay_ms, f.delay_ms); break;
      case Fault::Kind::kStatus:
        if (plan.status == 200) {
          plan.status = f.status;
          plan.retry_after = f.retry_after;
        }
        break;
      case Fault::Kind::kCut:
        if (plan.cut != "before_response") plan.cut = f.cut;
        break;
      case Fault::Kind::kMalformed: plan.malformed = true; break;
    }
  }
  if (plan.cut == "before_response")
    plan.fault = "cut:before_response";
  else if (plan.status != 200)
    plan.fault = "status:" + std::to_string(plan.status);
  else if (!plan.cut.empty())
    plan.fault = "cut:" + plan.cut;
  else if (plan.malformed)
    plan.fault = "malformed";
  return plan;
}

// The scenario's step as a reply: its text (workdir and last result substituted) and its tool
// calls resolved against the tools the request offers; *error says why a call did not resolve
// (then the reply is that message alone).
Reply scripted_reply(const Scenario* scenario, const Step& step, const Conversation& c, const std::string& workdir,
                     const std::string& last_result, std::string* error) {
  Reply reply;
  if (!scenario) {
    reply.text = kNoScenarioText;
  } else {
    if (step.text) reply.text = substitute(*step.text, workdir, last_result);
    if (!step.calls.empty() && c.tools.empty()) {
      reply.text = kNoToolsText;
    } else {
      for (const StepCall& sc : step.calls) {
        auto call = resolve_call(sc.tool, substitute_json(sc.input, workdir, last_result), c.tools, workdir);
        if (!call.ok()) {
          *error = call.status().message();
          reply.calls.clear();
          reply.text = "fake-llm: " + call.status().message();
          break;
        }
        reply.calls.push_back(std::move(call).value());
      }
    }
  }
  return reply;
}

// The reply as the request log records it: text and tool calls with their namespaced names.
json reply_log(const Reply& reply) {
  json log = {{"text", reply.text}, {"tool_calls", json::array()}};
  for (const ToolCall& tc : reply.calls) {
    json call = {{"name", tc.ns.empty() || tc.ns.back() == '_' ? tc.ns + tc.name : tc.ns + "__" + tc.name},
                 {"input", tc.input}};
    if (tc.search) call["search"] = true;
    log["tool_calls"].push_back(std::move(call));
  }
  return log;
}

// The request's headers for the log, with anything that looks like a credential redacted.
template <class Headers>
json redacted_headers(const Headers& headers) {
  json out = json::object();
  for (const auto& [k, v] : headers) out[k] = secret_header(k) ? std::string("<redacted>") : v;
  return out;
}

// The directory a scenario's paths are relative to: the request's own, the scenario's, the
// server's option, the script's, or none.
std::string chosen_workdir(const Conversation& c, const Scenario* scenario, const Options& options,
                           const Script& script) {
  if (c.workdir)
    return *c.workdir;
  else if (scenario && scenario->workdir)
    return *scenario->workdir;
  else if (options.workdir)
    return options.workdir->string();
  else if (script.workdir)
    return *script.workdir;
  return {};
}

// What the request asked, for the log: the model, streaming, its tools' names and the results it sent back.
void log_offered(const Conversation& c, json& entry) {
  entry["model"] = c.model;
  entry["stream"] = c.stream;
  json tool_names = json::array();
  for (const OfferedTool& t : c.tools) tool_names.push_back(t.name);
  entry["tools"] = tool_names;
  json results = json::array();
  for (const ToolResult& r : c.last_results)
    results.push_back({{"id", r.id}, {"text", r.text}, {"is_error", r.is_error}});
  entry["tool_results"] = results;
}

RenderContext render_context(const Conversation& c, int seqno, size_t request_bytes, const Script& script,
                             const Plan& plan) {
  RenderContext ctx;
  ctx.model = c.model.empty() ? "fake-model" : c.model;
  ctx.step = c.all_turns;
  ctx.seq = seqno;
  ctx.request_bytes = request_bytes;
  ctx.chunk_chars = script.chunk_chars;
  ctx.responses_full = script.responses_full;
  ctx.include_usage = c.include_usage;
  ctx.responses_created = !plan.cut.empty();
  return ctx;
}

}  // namespace

struct Server::Impl {
  Options options;
  Script script;
  int listen_fd = -1;
  int wake[2] = {-1, -1};
  int port = 0;
  std::thread accept_thread;
  std::atomic<bool> stopping{false};
  bool stopped = false;
  std::mutex stop_mu;

  struct Conn {
    int fd = -1;
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex conns_mu;
  std::list<Conn> conns;

  mutable std::mutex log_mu;
  std::vector<json> log;
  std::ofstream log_file;
  std::map<std::pair<std::string, int>, int> attempts;
  int seq = 0;

  void accept_loop();
  void reap(bool all);
  void serve(int fd);
  // Returns false when the connection must close.
  bool handle(HttpConnection& conn, const HttpRequest& req);
  void sleep_ms(int ms) const;
  void record(json entry);
};

void Server::Impl::sleep_ms(int ms) const {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!stopping && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, 10)));
  }
}

void Server::Impl::record(json entry) {
  std::lock_guard<std::mutex> lock(log_mu);
  if (log_file.is_open()) {
    log_file << entry.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
    log_file.flush();
  }
  log.push_back(std::move(entry));
}

void Server::Impl::accept_loop() {
  while (!stopping) {
    pollfd fds[2] = {{listen_fd, POLLIN, 0}, {wake[0], POLLIN, 0}};
    int r = ::poll(fds, 2, 500);
    reap(false);
    if (r < 0 && errno != EINTR) break;
    if (r <= 0 || stopping) continue;
    if (!(fds[0].revents & POLLIN)) continue;
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard<std::mutex> lock(conns_mu);
    Conn c;
    c.fd = fd;
    c.done = std::make_shared<std::atomic<bool>>(false);
    auto done = c.done;
    c.thread = std::thread([this, fd, done] {
      serve(fd);
      *done = true;
    });
    conns.push_back(std::move(c));
  }
}

// Joins finished connection threads (all of them when stopping) and closes their sockets. The
// fd is closed only here, after the join, so stop() never shuts down a reused descriptor.
void Server::Impl::reap(bool all) {
  std::list<Conn> finished;
  {
    std::lock_guard<std::mutex> lock(conns_mu);
    for (auto it = conns.begin(); it != conns.end();) {
      if (all || *it->done) {
        if (all) ::shutdown(it->fd, SHUT_RDWR);
        finished.splice(finished.end(), conns, it++);
      } else {
        ++it;
      }
    }
  }
  for (Conn& c : finished) {
    if (c.thread.joinable()) c.thread.join();
    ::close(c.fd);
  }
}

void Server::Impl::serve(int fd) {
  HttpConnection conn(fd);
  while (!stopping) {
    auto req = conn.read_request();
    if (!req.ok()) {
      if (req.status().kind() == ErrorKind::kBadInput) {
        std::string body =
            json{{"error", {{"message", req.status().message()}, {"type", "invalid_request_error"}}}}.dump();
        conn.write_all(response_head(400, {{"Content-Type", "application/json"},
                                           {"Content-Length", std::to_string(body.size())},
                                           {"Connection", "close"}}) +
                       body);
      }
      break;
    }
    if (!req->has_value()) break;
    if (!handle(conn, **req)) break;
  }
  ::shutdown(fd, SHUT_RDWR);
}

bool Server::Impl::handle(HttpConnection& conn, const HttpRequest& req) {
  json entry = {{"method", req.method}, {"path", req.target}, {"format", nullptr}, {"scenario", nullptr},
                {"step", nullptr},      {"attempt", nullptr}, {"fault", nullptr},  {"error", nullptr}};
  entry["headers"] = redacted_headers(req.headers);
  const bool keep = req.keep_alive;
  auto send_json = [&](int status, const json& body, std::vector<std::pair<std::string, std::string>> extra) {
    std::string text = body.dump(-1, ' ', false, json::error_handler_t::replace);
    extra.insert(extra.begin(),
                 {{"Content-Type", "application/json"}, {"Content-Length", std::to_string(text.size())}});
    extra.emplace_back("Connection", keep ? "keep-alive" : "close");
    return conn.write_all(response_head(status, extra) + text) && keep;
  };

  {
    std::lock_guard<std::mutex> lock(log_mu);
    entry["seq"] = ++seq;
  }
  const int seqno = entry["seq"];
  std::optional<Format> format = route(req.path);
  if (!format || req.method != "POST") {
    entry["status"] = 404;
    record(entry);
    return send_json(
        404,
        {{"error", {{"type", "not_found_error"}, {"message", "fake-llm: no route " + req.method + " " + req.path}}}},
        {});
  }
  entry["format"] = format_name(*format);
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (options.log_bodies) entry["body"] = body.is_discarded() ? json(req.body) : body;
  if (body.is_discarded() || !body.is_object()) {
    entry["status"] = 400;
    entry["error"] = "request body is not a JSON object";
    record(entry);
    return send_json(400, error_body(*format, 400, "fake-llm: request body is not a JSON object"), {});
  }

  // What the request says.
  Conversation c = read_conversation(*format, body);
  const Scenario* scenario = match_scenario(script, c.user_text);
  const int step_index = c.assistant_turns;
  const std::string workdir = chosen_workdir(c, scenario, options, script);
  std::string last_result = c.last_results.empty() ? "" : c.last_results.back().text;
  int attempt;
  {
    std::lock_guard<std::mutex> lock(log_mu);
    attempt = ++attempts[{scenario ? scenario->name : std::string(), step_index}];
  }
  entry["scenario"] = scenario ? json(scenario->name) : json(nullptr);
  entry["step"] = step_index;
  entry["attempt"] = attempt;
  entry["workdir"] = workdir.empty() ? json(nullptr) : json(workdir);
  log_offered(c, entry);

  // The reply.
  Step step;
  if (scenario) step = step_at(*scenario, step_index);
  std::string resolve_error;
  const Reply reply = scripted_reply(scenario, step, c, workdir, last_result, &resolve_error);
  if (!resolve_error.empty()) entry["error"] = resolve_error;
  entry["reply"] = reply_log(reply);

  // Faults: global, then the scenario's, then the step's.
  std::vector<Fault> faults = script.faults;
  if (scenario) {
    faults.insert(faults.end(), scenario->faults.begin(), scenario->faults.end());
    faults.insert(faults.end(), step.faults.begin(), step.faults.end());
  }
  const Plan plan = fault_plan(faults, attempt);
  entry["fault"] = plan.fault.empty() ? json(nullptr) : json(plan.fault);
  if (plan.delay_ms > 0) entry["delay_ms"] = plan.delay_ms;
  entry["status"] = plan.cut == "before_response" ? json(nullptr) : json(plan.status);
  record(entry);

  if (plan.cut == "before_response") return false;
  if (plan.status != 200) {
    std::vector<std::pair<std::string, std::string>> extra;
    if (plan.retry_after >= 0) extra.emplace_back("Retry-After", std::to_string(plan.retry_after));
    sleep_ms(plan.delay_ms);
    return send_json(plan.status,
                     error_body(*format, plan.status, "fake-llm: injected HTTP " + std::to_string(plan.status)), extra);
  }

  const RenderContext ctx = render_context(c, seqno, req.body.size(), script, plan);

  if (!c.stream) {
    std::string text = render_body(*format, reply, ctx).dump(-1, ' ', false, json::error_handler_t::replace);
    if (plan.malformed) text = text.substr(0, text.size() / 2);
    sleep_ms(plan.delay_ms);
    std::string head = response_head(200, {{"Content-Type", "application/json"},
                                           {"Content-Length", std::to_string(text.size())},
                                           {"Connection", keep ? "keep-alive" : "close"}});
    if (!plan.cut.empty()) {
      conn.write_all(head + text.substr(0, text.size() / 2));
      return false;
    }
    return conn.write_all(head + text) && keep;
  }

  int first_delta = 0;
  std::vector<SseEvent> events = render_stream(*format, reply, ctx, &first_delta);
  if (plan.malformed && first_delta < static_cast<int>(events.size())) {
    std::string& d = events[first_delta].data;
    d = d.substr(0, d.size() / 2) + "\x7f{";
  }
  if (!conn.write_all(response_head(200, {{"Content-Type", "text/event-stream"},
                                          {"Cache-Control", "no-cache"},
                                          {"Transfer-Encoding", "chunked"},
                                          {"Connection", keep ? "keep-alive" : "close"}}))) {
    return false;
  }
  for (size_t i = 0; i < events.size(); ++i) {
    if (i > 0) sleep_ms(plan.delay_ms);
    if (stopping) return false;
    if (!conn.write_chunk(sse_text(events[i]))) return false;
    if (i == 0 && !plan.cut.empty()) return false;  // cut after the start event: no final chunk
  }
  return conn.finish_chunks() && keep;
}

Result<std::unique_ptr<Server>> Server::start(Options options) {
  KDA_ASSIGN_OR_RETURN(Script script, parse_script(options.scenarios));
  auto impl = std::make_unique<Impl>();
  impl->script = std::move(script);
  if (options.log_path) {
    impl->log_file.open(*options.log_path, std::ios::app);
    if (!impl->log_file) return Status::io("cannot open the request log " + options.log_path->string());
  }
  impl->options = std::move(options);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::io(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(impl->options.port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 64) != 0) {
    Status s = Status::io("binding 127.0.0.1:" + std::to_string(impl->options.port) + ": " + std::strerror(errno));
    ::close(fd);
    return s;
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  impl->listen_fd = fd;
  impl->port = ntohs(addr.sin_port);
  if (::pipe2(impl->wake, O_CLOEXEC) != 0) {
    ::close(fd);
    return Status::io(std::string("pipe: ") + std::strerror(errno));
  }
  Impl* raw = impl.get();
  impl->accept_thread = std::thread([raw] { raw->accept_loop(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { stop(); }

int Server::port() const { return impl_->port; }

std::string Server::base_url() const { return "http://127.0.0.1:" + std::to_string(impl_->port); }

void Server::stop() {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->stopping = true;
  if (impl_->wake[1] >= 0) {
    char b = 1;
    (void)!::write(impl_->wake[1], &b, 1);
  }
  if (impl_->accept_thread.joinable()) impl_->accept_thread.join();
  impl_->reap(true);
  ::close(impl_->listen_fd);
  ::close(impl_->wake[0]);
  ::close(impl_->wake[1]);
}

std::vector<json> Server::log() const {
  std::lock_guard<std::mutex> lock(impl_->log_mu);
  return impl_->log;
}

Result<json> load_scenarios(const std::filesystem::path& path) {
  KDA_ASSIGN_OR_RETURN(std::string text, fs::read_file(path));
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::bad_input(path.string() + ": not valid JSON");
  return doc;
}

}  // namespace kda::fakellm
