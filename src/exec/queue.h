// The dispatcher's durable task queue: one SQLite database in WAL mode (a reader such as `kda queue`
// may look while the dispatcher writes), so a dispatcher that dies loses nothing it was given.
//
// A task is an id and a request body (the JSON a server's POST /evaluate takes). Its life:
//   queued -> running (claimed for a server, attempt + 1) -> done | failed
//                  \-> queued again (requeued: the server died, restarted or forgot it)
// Ids are idempotent: the same id with the same body is one task, with another body a conflict.
// A result is counted only by the attempt that holds the task: complete() of an attempt that was
// requeued in the meantime changes nothing and says so, so no result is ever counted twice.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace kda::exec {

enum class TaskState { kQueued, kRunning, kDone, kFailed };
const char* task_state_name(TaskState s);  // queued | running | done | failed

struct QueuedTask {
  std::string id;
  nlohmann::json body;
  TaskState state = TaskState::kQueued;
  int attempt = 0;       // attempts made so far (the one running, once claimed)
  std::string server;    // where the last attempt ran
  std::string instance;  // that server's instance id when it took the task
  std::optional<nlohmann::json> result;
  std::string error;        // failed: why
  std::string last_reason;  // why it was last requeued
};

struct QueueCounts {
  size_t queued = 0, running = 0, done = 0, failed = 0;
  size_t retries = 0;  // requeues that cost an attempt
};

class TaskQueue {
 public:
  // Opens (creating) the queue file. kIo when it cannot be opened or is not a queue.
  static Result<std::unique_ptr<TaskQueue>> open(const std::filesystem::path& file);
  ~TaskQueue();

  enum class Enqueued { kCreated, kSame, kConflict };
  Result<Enqueued> enqueue(const std::string& id, const nlohmann::json& body);

  // The oldest queued task, now running for `server` (attempt + 1); nullopt when none is queued.
  Result<std::optional<QueuedTask>> claim(const std::string& server, const std::string& instance);
  // The result of `attempt`: true when it was counted, false when that attempt no longer holds the
  // task (requeued or finished by another attempt).
  Result<bool> complete(const std::string& id, int attempt, const nlohmann::json& result);
  Result<bool> fail(const std::string& id, int attempt, const std::string& error);
  // Gives `attempt` back: queued again, or failed once `max_attempts` attempts were made. With
  // charge = false (a server's backpressure, 503) the attempt is not counted. The state it ends in;
  // nullopt when that attempt no longer held the task.
  Result<std::optional<TaskState>> requeue(const std::string& id, int attempt, const std::string& reason,
                                           int max_attempts, bool charge = true);
  // Tasks an earlier dispatcher left running go back to the queue, their attempt not charged (their
  // ids are idempotent on the servers: resubmitted where they still run, they are joined, not rerun).
  Result<size_t> recover();

  Result<QueueCounts> counts();
  Result<std::vector<QueuedTask>> tasks();  // every task, in the order they were enqueued
  Result<std::optional<QueuedTask>> find(const std::string& id);

  struct Impl;

 private:
  explicit TaskQueue(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kda::exec
