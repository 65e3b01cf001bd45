// The dispatcher: takes the queue's tasks to `kda serve` instances (or any server with
// FlashInfer-Bench's server API) and brings their results back into the queue.
//
// Each cycle has three phases, in this order:
//   health   - GET /health of each server that is due: its instance id, its healthy workers (the
//              devices it may be given tasks for) and whether it accepts; a server that fails
//              `down_after` checks in a row is down and its tasks are requeued; one whose instance id
//              changed (restarted) has its tasks requeued at once.
//   poll     - GET /tasks/{id}?timeout=0 for every task in flight: completed -> done (counted by the
//              attempt that holds it, so never twice), failed -> failed, 404 -> requeued.
//   dispatch - while tasks are queued: the least-loaded server that is up, accepting and has a free
//              device (at most one task in flight per healthy device) gets the oldest; 503 puts it
//              back without charging an attempt (backpressure) and stops that server until its next
//              health check; any other 4xx fails the task with the server's reason.
// Requeues that charge an attempt stop at `max_attempts` (the task then fails, saying why).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec/queue.h"
#include "util/status.h"

namespace kda::exec {

struct ServerSpec {
  std::string url;    // http://host:port
  std::string token;  // bearer token; empty: none
};

struct Progress {
  size_t servers = 0, servers_up = 0;
  size_t devices = 0, busy = 0;  // healthy devices of the servers that are up, and tasks in flight on them
  QueueCounts tasks;
};

struct DispatchOptions {
  int max_attempts = 3;
  double poll_interval_s = 0.1;
  double health_interval_s = 1.0;
  int down_after = 3;                             // failed health checks in a row
  double give_up_after_s = 120;                   // no server up for this long: stop (the queue keeps the tasks)
  double request_timeout_s = 30;                  // one HTTP request
  std::function<void(const Progress&)> progress;  // after every cycle that changed something
  std::function<void(const std::string&)> log;    // servers up and down, requeues, failures
  const std::atomic<bool>* cancelled = nullptr;   // polled each cycle
  // Asked of each server when it first answers /health and again when its instance id changes: ""
  // admits it, anything else is why it may not have tasks (it judges another pack than the one the
  // client sealed, say). A refused server is logged once and given nothing; when every server known
  // is refused and none may join (no `discover`), dispatch stops with kFailed naming each reason.
  std::function<std::string(const ServerSpec&)> admit;
  // Servers that may have appeared since (a directory of address files that a requeued Slurm job
  // writes again): asked before each health phase; a URL not yet known joins the pool.
  std::function<std::vector<ServerSpec>()> discover;
};

// GET `path` of `server` (its token sent): the JSON body of a 200, else kNotFound (404) or kFailed
// with the server's reason. For clients' own checks (DispatchOptions::admit).
Result<nlohmann::json> get_json(const ServerSpec& server, const std::string& path, double timeout_s = 30);

// Runs until no task is queued or running. kFailed when no server was up for give_up_after_s or
// `cancelled` turned true (the tasks stay in the queue, resumable); kIo on a queue error.
Status dispatch(TaskQueue& queue, const std::vector<ServerSpec>& servers, const DispatchOptions& options);

}  // namespace kda::exec
