#include "exec/dispatcher.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

namespace kda::exec {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// What the dispatcher knows of one server.
struct Server {
  ServerSpec spec;
  std::unique_ptr<httplib::Client> http;
  std::string instance;  // from its last good /health; empty until then
  size_t devices = 0;    // its healthy workers
  bool accepting = false;
  bool up = false;
  int failures = 0;     // failed health checks in a row
  std::string refused;  // DispatchOptions::admit's reason, for the instance last asked
  Clock::time_point next_health{};
  std::map<std::string, int> in_flight;  // task id -> attempt

  bool has_room() const { return up && accepting && in_flight.size() < devices; }
  double load() const { return devices ? static_cast<double>(in_flight.size()) / static_cast<double>(devices) : 1e9; }
};

// A server's reason in FastAPI's body ({"detail": ...}), else the body itself, shortened.
std::string detail_of(const httplib::Result& r) {
  if (!r) return httplib::to_string(r.error());
  auto j = json::parse(r->body, nullptr, false);
  if (j.is_object() && j.contains("detail"))
    return j["detail"].is_string() ? j["detail"].get<std::string>() : j["detail"].dump();
  return r->body.substr(0, 300);
}

// An HTTP client of `spec` (its token sent): 2 s to connect, `timeout_s` per request.
std::unique_ptr<httplib::Client> client_for(const ServerSpec& spec, double timeout_s) {
  auto http = std::make_unique<httplib::Client>(spec.url);
  http->set_connection_timeout(2, 0);
  const auto t = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(timeout_s));
  http->set_read_timeout(t);
  http->set_write_timeout(t);
  if (!spec.token.empty()) http->set_bearer_token_auth(spec.token);
  return http;
}

class Dispatcher {
 public:
  Dispatcher(TaskQueue& q, const std::vector<ServerSpec>& specs, const DispatchOptions& o) : q_(q), o_(o) {
    for (const auto& spec : specs) add(spec);
  }

  Status run() {
    KDA_ASSIGN_OR_RETURN(size_t recovered, q_.recover());
    if (recovered) say(fmt::format("{} task(s) an earlier dispatcher left running are queued again", recovered));
    auto last_up = Clock::now();
    while (true) {
      if (o_.cancelled && o_.cancelled->load()) return Status::failed("cancelled; the queue keeps the tasks");
      KDA_RETURN_IF_ERROR(health_phase());
      KDA_RETURN_IF_ERROR(all_refused());
      KDA_RETURN_IF_ERROR(poll_phase());
      KDA_RETURN_IF_ERROR(dispatch_phase());
      KDA_ASSIGN_OR_RETURN(QueueCounts c, q_.counts());
      report(c);
      if (c.queued == 0 && c.running == 0) return {};
      if (std::any_of(servers_.begin(), servers_.end(), [](const Server& s) { return s.up; })) last_up = Clock::now();
      if (std::chrono::duration<double>(Clock::now() - last_up).count() > o_.give_up_after_s)
        return Status::failed(
            fmt::format("no server was up for {:.0f} s; {} task(s) queued and {} running stay in "
                        "the queue",
                        o_.give_up_after_s, c.queued, c.running));
      std::this_thread::sleep_for(std::chrono::duration<double>(o_.poll_interval_s));
    }
  }

 private:
  void add(const ServerSpec& spec) {
    Server s;
    s.spec = spec;
    s.http = client_for(spec, o_.request_timeout_s);
    servers_.push_back(std::move(s));
  }

  void say(const std::string& line) {
    if (o_.log) o_.log(line);
  }

  // Gives back every task in flight on `s` (its attempt charged).
  Status requeue_all(Server& s, const std::string& reason) {
    for (const auto& [id, attempt] : s.in_flight) KDA_RETURN_IF_ERROR(requeue(id, attempt, reason, true));
    s.in_flight.clear();
    return {};
  }

  Status requeue(const std::string& id, int attempt, const std::string& reason, bool charge) {
    KDA_ASSIGN_OR_RETURN(auto state, q_.requeue(id, attempt, reason, o_.max_attempts, charge));
    if (state && charge)
      say(fmt::format("task {} {} ({}; attempt {} of {})", id, *state == TaskState::kFailed ? "failed" : "queued again",
                      reason, attempt, o_.max_attempts));
    return {};
  }

  Status health_phase() {
    const auto now = Clock::now();
    if (o_.discover && now >= next_discover_) {
      next_discover_ =
          now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.health_interval_s));
      for (const auto& spec : o_.discover())
        if (std::none_of(servers_.begin(), servers_.end(), [&](const Server& s) { return s.spec.url == spec.url; })) {
          say(spec.url + " joined the pool");
          add(spec);
        }
    }
    for (auto& s : servers_) {
      if (now < s.next_health) continue;
      s.next_health =
          now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.health_interval_s));
      auto r = s.http->Get("/health");
      auto j = r && r->status == 200 ? json::parse(r->body, nullptr, false) : json();
      if (!j.is_object() || !j.contains("instance_id")) {
        const std::string why = r ? fmt::format("/health answered {}", r->status) : httplib::to_string(r.error());
        if (++s.failures >= o_.down_after && s.up) {
          s.up = false;
          say(fmt::format("{} is down ({} failed health checks: {})", s.spec.url, s.failures, why));
          KDA_RETURN_IF_ERROR(requeue_all(s, s.spec.url + " went down"));
        }
        continue;
      }
      const std::string instance = j.value("instance_id", std::string());
      if (o_.admit && (s.instance.empty() || instance != s.instance) && !admitted(s, instance)) {
        if (s.up) {  // it was serving and now judges another pack: its tasks go back
          s.up = false;
          KDA_RETURN_IF_ERROR(requeue_all(s, s.spec.url + " was refused: " + s.refused));
        }
        continue;
      }
      if (!s.refused.empty()) continue;
      if (!s.instance.empty() && instance != s.instance) {
        say(fmt::format("{} restarted (instance {} -> {})", s.spec.url, s.instance, instance));
        KDA_RETURN_IF_ERROR(requeue_all(s, s.spec.url + " restarted"));
      }
      if (!s.up)
        say(fmt::format("{} is up ({} device(s), instance {})", s.spec.url, j.value("healthy_workers", 0), instance));
      s.instance = instance;
      s.failures = 0;
      s.up = true;
      s.devices = static_cast<size_t>(std::max(0, j.value("healthy_workers", 0)));
      s.accepting = j.value("accepting", true);
    }
    return {};
  }

  // Asks DispatchOptions::admit about `s` (whose instance is now `instance`); false when refused.
  bool admitted(Server& s, const std::string& instance) {
    const std::string why = o_.admit(s.spec);
    if (why.empty()) {
      if (!s.refused.empty()) say(fmt::format("{} is admitted now (instance {})", s.spec.url, instance));
      s.refused.clear();
      return true;
    }
    if (why != s.refused) say(fmt::format("{} gets no tasks: {}", s.spec.url, why));
    s.refused = why;
    s.instance = instance;  // asked again only when this changes
    return false;
  }

  // kFailed when every server is refused by admit and no other may join.
  Status all_refused() const {
    if (o_.discover || servers_.empty()) return {};
    std::string why;
    for (const auto& s : servers_) {
      if (s.refused.empty()) return {};
      why += fmt::format("\n  {}: {}", s.spec.url, s.refused);
    }
    return Status::failed("no server may take these tasks:" + why);
  }

  Status poll_phase() {
    for (auto& s : servers_) {
      if (!s.up) continue;
      for (auto it = s.in_flight.begin(); it != s.in_flight.end();) {
        const auto& [id, attempt] = *it;
        auto r = s.http->Get("/tasks/" + id + "?timeout=0");
        bool gone = false;
        if (r && r->status == 404) {
          KDA_RETURN_IF_ERROR(requeue(id, attempt, s.spec.url + " does not know the task (404)", true));
          gone = true;
        } else if (r && r->status == 200) {
          auto j = json::parse(r->body, nullptr, false);
          const std::string status = j.is_object() ? j.value("status", std::string()) : "";
          if (status == "completed") {
            KDA_RETURN_IF_ERROR(q_.complete(id, attempt, j).status());
            gone = true;
          } else if (status == "failed") {
            KDA_RETURN_IF_ERROR(
                q_.fail(id, attempt, j.value("error", std::string("failed on ") + s.spec.url)).status());
            say(fmt::format("task {} failed on {}: {}", id, s.spec.url, j.value("error", std::string())));
            gone = true;
          }
        }
        it = gone ? s.in_flight.erase(it) : std::next(it);
      }
    }
    return {};
  }

  Server* least_loaded() {
    Server* best = nullptr;
    for (auto& s : servers_)
      if (s.has_room() && (!best || s.load() < best->load())) best = &s;
    return best;
  }

  Status dispatch_phase() {
    while (Server* s = least_loaded()) {
      KDA_ASSIGN_OR_RETURN(auto task, q_.claim(s->spec.url, s->instance));
      if (!task) return {};
      json body = task->body;
      body["task_id"] = task->id;
      auto r = s->http->Post("/evaluate", body.dump(), "application/json");
      if (r && r->status == 200) {
        s->in_flight.emplace(task->id, task->attempt);
      } else if (r && r->status == 503) {
        KDA_RETURN_IF_ERROR(requeue(task->id, task->attempt, s->spec.url + " is draining (503)", false));
        s->accepting = false;
      } else if (r && r->status >= 400 && r->status < 500) {
        const std::string why = fmt::format("{} refused it ({}): {}", s->spec.url, r->status, detail_of(r));
        KDA_RETURN_IF_ERROR(q_.fail(task->id, task->attempt, why).status());
        say("task " + task->id + " failed: " + why);
      } else {
        // Not delivered, or the server broke while taking it: charged, and the server checked now.
        KDA_RETURN_IF_ERROR(requeue(task->id, task->attempt,
                                    fmt::format("submitting to {} failed: {}", s->spec.url,
                                                r ? fmt::format("HTTP {}", r->status) : httplib::to_string(r.error())),
                                    true));
        s->accepting = false;
        s->next_health = Clock::now();
      }
    }
    return {};
  }

  void report(const QueueCounts& c) {
    Progress p;
    p.servers = servers_.size();
    p.tasks = c;
    for (const auto& s : servers_) {
      if (!s.up) continue;
      ++p.servers_up;
      p.devices += s.devices;
      p.busy += s.in_flight.size();
    }
    const auto key = std::make_tuple(p.servers_up, p.devices, p.busy, c.queued, c.running, c.done, c.failed, c.retries);
    if (o_.progress && key != last_) o_.progress(p);
    last_ = key;
  }

  TaskQueue& q_;
  const DispatchOptions& o_;
  Clock::time_point next_discover_{};
  std::vector<Server> servers_;
  std::tuple<size_t, size_t, size_t, size_t, size_t, size_t, size_t, size_t> last_{~size_t{0}, 0, 0, 0, 0, 0, 0, 0};
};

}  // namespace

Result<json> get_json(const ServerSpec& server, const std::string& path, double timeout_s) {
  auto r = client_for(server, timeout_s)->Get(path);
  if (!r) return Status::failed(fmt::format("GET {}{}: {}", server.url, path, httplib::to_string(r.error())));
  if (r->status == 404) return Status::not_found(fmt::format("GET {}{}: 404: {}", server.url, path, detail_of(r)));
  if (r->status != 200)
    return Status::failed(fmt::format("GET {}{}: HTTP {}: {}", server.url, path, r->status, detail_of(r)));
  auto j = json::parse(r->body, nullptr, false);
  if (j.is_discarded()) return Status::failed(fmt::format("GET {}{}: the answer is not JSON", server.url, path));
  return j;
}

Status dispatch(TaskQueue& queue, const std::vector<ServerSpec>& servers, const DispatchOptions& options) {
  if (servers.empty()) return Status::bad_input("no server to dispatch to");
  Dispatcher d(queue, servers, options);
  return d.run();
}

}  // namespace kda::exec
