#include "serve/server.h"

#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <httplib.h>

#include "task/json_reader.h"
#include "task/solution.h"
#include "util/clock.h"
#include "util/fs.h"
#include "util/random.h"
#include "util/sha256.h"
#include "util/strings.h"

namespace kda::serve {

namespace stdfs = std::filesystem;
using nlohmann::json;

bool is_loopback(const std::string& host) { return host == "localhost" || host == "::1" || host.starts_with("127."); }

namespace {

// The largest trials, warmup or iterations a request's kda_timing may ask for.
constexpr int64_t kMaxTimingCount = 100000;

// A task id names a directory: letters, digits, '.', '_' and '-', at most 128, not "." or "..".
bool valid_task_id(const std::string& id) {
  if (id.empty() || id.size() > 128 || id == "." || id == "..") return false;
  return id.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == std::string::npos;
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

// FastAPI's error body, which FlashInfer-Bench clients read: {"detail": "..."}.
void send_error(httplib::Response& res, int status, const std::string& detail) {
  send_json(res, status, {{"detail", detail}});
}

// The token: read from `file`, or created there.
Result<std::string> load_or_create_token(const stdfs::path& file) {
  std::error_code ec;
  if (stdfs::exists(file, ec)) {
    auto text = fs::read_file(file);
    if (!text.ok()) return text.status();
    std::string token = util::trimmed(*text);
    if (token.size() < 16)
      return Status::bad_input(fmt::format("--token-file {}: the token must be at least 16 characters", file.string()));
    return token;
  }
  std::string token = util::random_hex(32);
  if (Status st = fs::write_file_atomic(file, token + "\n"); !st.ok()) return st;
  ::chmod(file.c_str(), 0600);
  return token;
}

bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

struct Server::Impl {
  ServeOptions opt;
  Dataset data;
  std::string instance_id = util::random_hex(16);
  double started_at = util::unix_seconds();
  std::string token;  // "" = no auth
  httplib::Server http;
  int port = 0;
  TaskStore store;
  std::atomic<bool> cancelled{false};
  std::vector<std::thread> workers;
  std::mutex log_mu;

  void log(const std::string& line) {
    if (!opt.log) return;
    std::lock_guard lock(log_mu);
    opt.log(line);
  }
  json health() const;
  void routes();
  void evaluate(const httplib::Request& req, httplib::Response& res);
  void get_task(const httplib::Request& req, httplib::Response& res);
  void batch(const httplib::Request& req, httplib::Response& res);
  void shutdown_soon();
};

json Server::Impl::health() const {
  const TaskCounts c = store.counts();
  json workers_json = json::array();
  for (const auto& d : opt.devices) workers_json.push_back({{"device", d.name}, {"healthy", true}});
  const bool accepting = store.accepting();
  return {{"status", store.closed() ? "unavailable"
                     : accepting    ? "ok"
                                    : "draining"},
          {"instance_id", instance_id},
          {"dataset_id", data.id},
          {"started_at", started_at},
          {"accepting", accepting},
          {"workers", workers_json},
          {"healthy_workers", opt.devices.size()},
          {"total_workers", opt.devices.size()},
          {"queue_size", c.queued},
          {"active_tasks", c.queued + c.running},
          {"auth", token.empty() ? "none" : "bearer"},
          {"server", "kda"}};
}

void Server::Impl::evaluate(const httplib::Request& req, httplib::Response& res) {
  task::ojson body;
  try {
    body = task::ojson::parse(req.body);
  } catch (const nlohmann::json::parse_error& e) {
    return send_error(res, 400, fmt::format("the request body is not JSON: {}", e.what()));
  }
  Diagnostics diags;
  task::JsonReader r("request body", 0, diags);
  if (!r.expect_object(body, "")) return send_error(res, 400, diags.items().front().to_string());
  const task::ojson* sol_json = r.member(body, "", "solution", true);
  auto uuids = r.string_list(body, "", "workload_uuids", false);
  auto task_id = r.string(body, "", "task_id", false, true);
  // kda's extension: this evaluation's own timing (serve/tasks.h TaskTiming).
  std::optional<int64_t> trials, warmup, iterations;
  std::optional<bool> with_baseline;
  std::optional<task::Solution> baseline_solution;
  if (const task::ojson* kt = r.member(body, "", "kda_timing", false); kt && r.expect_object(*kt, "/kda_timing")) {
    trials = r.integer(*kt, "/kda_timing", "trials", false);
    warmup = r.integer(*kt, "/kda_timing", "warmup", false);
    iterations = r.integer(*kt, "/kda_timing", "iterations", false);
    with_baseline = r.boolean(*kt, "/kda_timing", "baseline", false);
    if (const task::ojson* bs = r.member(*kt, "/kda_timing", "baseline_solution", false); bs && !bs->is_null())
      baseline_solution = task::solution_from_json(*bs, "request body: /kda_timing/baseline_solution", diags);
  }
  std::optional<task::Solution> sol;
  if (sol_json) sol = task::solution_from_json(*sol_json, "request body: /solution", diags);
  if (!diags.empty()) {
    std::string detail;
    for (const auto& d : diags.items()) detail += (detail.empty() ? "" : "; ") + d.to_string();
    return send_error(res, 400, detail);
  }
  TaskTiming timing;
  timing.baseline = with_baseline;
  if (baseline_solution) {
    if (baseline_solution->definition != sol->definition)
      return send_error(res, 400,
                        fmt::format("kda_timing.baseline_solution: its definition '{}' is not the solution's '{}'",
                                    baseline_solution->definition, sol->definition));
    timing.baseline_solution = baseline_solution->to_json();
  }
  for (auto [name, value, least, field] :
       {std::tuple{"trials", trials, 1, &timing.trials}, std::tuple{"warmup", warmup, 0, &timing.warmup},
        std::tuple{"iterations", iterations, 1, &timing.iterations}}) {
    if (!value) continue;
    if (*value < least || *value > kMaxTimingCount)
      return send_error(res, 400,
                        fmt::format("kda_timing.{}: {} is not in {}..{}", name, *value, least, kMaxTimingCount));
    *field = static_cast<int>(*value);
  }
  if (task_id && !valid_task_id(*task_id))
    return send_error(res, 400, "task_id: letters, digits, '.', '_' and '-' only, at most 128 characters");
  if (!data.find(sol->definition)) {
    std::vector<std::string> names;
    for (const auto& [n, e] : data.entries) names.push_back(n);
    return send_error(res, 400,
                      fmt::format("solution.definition '{}' does not exist here (served: {})", sol->definition,
                                  util::join(names, ", ")));
  }
  Task t;
  t.id = task_id ? *task_id : util::random_hex(16);
  t.definition = sol->definition;
  const std::string original_name = sol->name;
  sol->name = fmt::format("{}_{}", original_name, solution_hash(*sol).substr(0, 8));
  t.solution = sol->name;
  t.solution_json = sol->to_json();
  t.workload_uuids = uuids;
  t.timing = timing;
  t.digest = sha256_hex(json{
      {"solution", t.solution_json},
      {"name", original_name},
      {"workload_uuids", uuids ? json(*uuids) : json(nullptr)},
      {"kda_timing",
       timing.to_json()}}.dump());
  switch (store.submit(t)) {
    case TaskStore::Submitted::kConflict:
      return send_error(res, 409, fmt::format("task_id '{}' already exists with a different request", t.id));
    case TaskStore::Submitted::kClosed: return send_error(res, 503, "the server is draining: it takes no new tasks");
    case TaskStore::Submitted::kCreated:
      log(fmt::format("task {} queued: {} / {}", t.id, t.definition, t.solution));
      [[fallthrough]];
    case TaskStore::Submitted::kSame: break;
  }
  send_json(res, 200, {{"task_id", t.id}, {"normalized_solution_name", t.solution}});
}

namespace {

// A long-poll timeout: 0..3600 seconds (FlashInfer-Bench answers anything else with 422).
std::optional<double> poll_timeout(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(v >= 0 && v <= 3600)) return std::nullopt;
  return v;
}

}  // namespace

void Server::Impl::get_task(const httplib::Request& req, httplib::Response& res) {
  double wait = 0;
  if (req.has_param("timeout")) {
    auto t = poll_timeout(req.get_param_value("timeout"));
    if (!t) return send_error(res, 422, "timeout: a number of seconds in 0..3600");
    wait = *t;
  }
  auto r = store.response(req.matches[1], std::chrono::duration<double>(wait));
  if (!r) return send_error(res, 404, fmt::format("no task '{}'", std::string(req.matches[1])));
  send_json(res, 200, *r);
}

void Server::Impl::batch(const httplib::Request& req, httplib::Response& res) {
  const json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return send_error(res, 400, "the request body is not a JSON object");
  const json& ids = body.contains("task_ids") ? body["task_ids"] : json();
  if (!ids.is_array()) return send_error(res, 422, "task_ids: a list of task ids is required");
  std::vector<std::string> list;
  for (const auto& id : ids) {
    if (!id.is_string()) return send_error(res, 422, "task_ids: every item must be a string");
    list.push_back(id.get<std::string>());
  }
  double wait = 0;
  if (body.contains("timeout") && !body["timeout"].is_null()) {
    if (!body["timeout"].is_number()) return send_error(res, 422, "timeout: a number of seconds");
    wait = std::min(3600.0, std::max(0.0, body["timeout"].get<double>()));
  }
  auto r = store.responses(list, std::chrono::duration<double>(wait));
  if (auto* unknown = std::get_if<std::string>(&r)) return send_error(res, 404, fmt::format("no task '{}'", *unknown));
  send_json(res, 200, std::get<std::vector<json>>(r));
}

void Server::Impl::shutdown_soon() {
  store.close();
  cancelled = true;
  // The response goes out first; then the listener stops.
  std::thread([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    http.stop();
  }).detach();
}

void Server::Impl::routes() {
  http.Get("/definitions", [this](const httplib::Request&, httplib::Response& res) {
    json out = json::array();
    for (const auto& [name, e] : data.entries)
      out.push_back({{"name", name}, {"description", e.definition.value("description", json(nullptr))}});
    send_json(res, 200, out);
  });
  http.Get(R"(/definitions/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const Entry* e = data.find(req.matches[1]);
    if (!e) return send_error(res, 404, fmt::format("no definition '{}'", std::string(req.matches[1])));
    res.status = 200;
    res.set_content(e->definition.dump(), "application/json");
  });
  http.Get(R"(/definitions/([^/]+)/workloads)", [this](const httplib::Request& req, httplib::Response& res) {
    const Entry* e = data.find(req.matches[1]);
    if (!e) return send_error(res, 404, fmt::format("no definition '{}'", std::string(req.matches[1])));
    send_json(res, 200, e->workloads);
  });
  // kda's extension: the judged part of a kda pack's manifest ({digest, files}), for clients that
  // check a server judges the pack they sealed (cli::Pool).
  http.Get(R"(/definitions/([^/]+)/manifest)", [this](const httplib::Request& req, httplib::Response& res) {
    const Entry* e = data.find(req.matches[1]);
    if (!e) return send_error(res, 404, fmt::format("no definition '{}'", std::string(req.matches[1])));
    if (e->manifest.is_null())
      return send_error(res, 404,
                        fmt::format("'{}' comes from a FlashInfer-Bench dataset: no kda pack manifest", e->name));
    send_json(res, 200, e->manifest);
  });
  http.Get(R"(/workloads/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    auto [e, w] = data.find_workload(req.matches[1]);
    if (!w) return send_error(res, 404, fmt::format("no workload '{}'", std::string(req.matches[1])));
    send_json(res, 200, *w);
  });
  http.Post("/evaluate", [this](const httplib::Request& req, httplib::Response& res) { evaluate(req, res); });
  http.Get(R"(/tasks/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) { get_task(req, res); });
  http.Post("/tasks/batch", [this](const httplib::Request& req, httplib::Response& res) { batch(req, res); });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) { send_json(res, 200, health()); });
  http.Post("/drain", [this](const httplib::Request&, httplib::Response& res) {
    store.drain();
    const TaskCounts c = store.counts();
    log("draining: no new tasks");
    send_json(res, 200, {{"status", "draining"}, {"active_tasks", c.queued + c.running}, {"queue_size", c.queued}});
  });
  http.Post("/shutdown", [this](const httplib::Request&, httplib::Response& res) {
    log("shutting down (POST /shutdown)");
    send_json(res, 200, {{"status", "shutting_down"}});
    shutdown_soon();
  });
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  stop();
  for (auto& t : impl_->workers)
    if (t.joinable()) t.join();
}

int Server::port() const { return impl_->port; }
std::string Server::url() const {
  const std::string& h = impl_->opt.host;
  return fmt::format("http://{}:{}", h.find(':') != std::string::npos ? "[" + h + "]" : h, impl_->port);
}
const std::string& Server::instance_id() const { return impl_->instance_id; }

namespace {

// Every endpoint but /health needs the token when the server has one.
void guard_and_limits(Server::Impl& s, httplib::Server& http, size_t max_body) {
  http.new_task_queue = [] { return new httplib::ThreadPool(64); };  // long-polls hold a thread each
  http.set_payload_max_length(max_body);
  http.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    if (s.token.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    if (auth.starts_with("Bearer ") && same_secret(auth.substr(7), s.token))
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    send_error(res, 401, "this server needs 'Authorization: Bearer <token>' (the token in its --token-file)");
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler([max_body](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      send_error(res, 413, fmt::format("the request body is larger than this server's limit of {} bytes", max_body));
    else if (res.status == 404)
      send_error(res, 404, fmt::format("no endpoint {} {}", req.method, req.path));
    else
      send_error(res, res.status, fmt::format("HTTP {}", res.status));
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {}
    send_error(res, 500, "internal error: " + what);
  });
}

}  // namespace

Result<std::unique_ptr<Server>> Server::create(ServeOptions options, Dataset data) {
  if (options.devices.empty()) return Status::bad_input("--devices: names no device");
  auto impl = std::make_unique<Impl>();
  impl->opt = std::move(options);
  impl->data = std::move(data);
  ServeOptions& o = impl->opt;
  if (o.token_file) {
    auto token = load_or_create_token(*o.token_file);
    if (!token.ok()) return token.status();
    impl->token = *token;
  } else if (!is_loopback(o.host) && !o.no_auth) {
    return Status::bad_input(fmt::format(
        "--host {} is not loopback: give --token-file FILE (the bearer token, created there if missing) or --no-auth",
        o.host));
  }
  if (o.eval.work_dir.empty()) o.eval.work_dir = fs::user_cache_dir("KDA_CACHE_DIR") / "serve" / impl->instance_id;
  if (Status st = fs::ensure_dir(o.eval.work_dir); !st.ok()) return st;
  guard_and_limits(*impl, impl->http, o.max_body_bytes);
  impl->routes();
  impl->port =
      o.port == 0 ? impl->http.bind_to_any_port(o.host) : (impl->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (impl->port <= 0)
    return Status::io(fmt::format("cannot listen on {}:{} (in use, or no such address)", o.host, o.port));
  std::unique_ptr<Server> server(new Server(std::move(impl)));
  if (o.address_file) {
    const Impl& i = *server->impl_;
    json address = {{"url", server->url()},    {"host", o.host},
                    {"port", i.port},          {"instance_id", i.instance_id},
                    {"dataset_id", i.data.id}, {"auth", i.token.empty() ? "none" : "bearer"},
                    {"pid", ::getpid()}};
    // Where the token is, never the token itself: a dispatcher reading the address file reads it there.
    if (o.token_file) address["token_file"] = stdfs::absolute(*o.token_file).string();
    if (Status st = fs::write_file_atomic(*o.address_file, address.dump(2) + "\n"); !st.ok()) return st;
  }
  return server;
}

Status Server::run() {
  Impl& i = *impl_;
  for (const Device& d : i.opt.devices)
    i.workers.emplace_back(
        [&i, d] { run_worker(i.opt.eval, i.data, d, i.store, i.cancelled, [&i](const std::string& l) { i.log(l); }); });
  i.log(fmt::format("serving {} definition(s) of {} (dataset {}) on {} with {} worker(s), auth {}; instance {}",
                    i.data.entries.size(), i.data.root.string(), i.data.id.substr(0, 12), url(), i.opt.devices.size(),
                    i.token.empty() ? "none" : "bearer", i.instance_id));
  const bool ok = i.http.listen_after_bind();
  i.store.close();
  i.cancelled = true;
  for (auto& t : i.workers)
    if (t.joinable()) t.join();
  i.workers.clear();
  i.log("stopped");
  return ok ? Status::ok_status() : Status::io("the HTTP listener failed");
}

void Server::stop() {
  impl_->store.close();
  impl_->cancelled = true;
  impl_->http.stop();
}

}  // namespace kda::serve
