// The server's tasks: idempotent submission (a task id reused with a different request is a
// conflict), a FIFO queue the device workers take from, lifecycle pending -> running -> completed |
// failed, and waits for long-polls. In memory only: a restarted server has a new instance id, and the
// client or dispatcher that submitted a task resubmits it (docs/scale.md).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace kda::serve {

enum class TaskState { kPending, kRunning, kCompleted, kFailed };
const char* task_state_name(TaskState s);  // pending | running | completed | failed

// kda's extension of FlashInfer-Bench's /evaluate (a request's optional "kda_timing" object): the
// timing of this one evaluation, over the server's own (--num-trials, --warmup-runs, --iterations),
// and whether the pack's baseline (or another solution) is timed beside it. `kda tune --on` sends it for each rung; a FIB
// client never does, and gets the server's timing.
struct TaskTiming {
  std::optional<int> trials, warmup, iterations;
  std::optional<bool> baseline;
  // A solution timed beside this one in the pack's baseline's place (a head-to-head; FlashInfer-Bench
  // Solution JSON, sources inline), or null.
  nlohmann::json baseline_solution;
  nlohmann::json to_json() const;  // only the fields that are set
};

struct Task {
  std::string id;
  std::string digest;      // of the request (solution and workload selection): idempotency
  std::string definition;  // solution.definition
  std::string solution;    // the normalized solution name
  nlohmann::json solution_json;
  std::optional<std::vector<std::string>> workload_uuids;  // nullopt: every visible workload
  TaskTiming timing;
  TaskState state = TaskState::kPending;
  std::optional<nlohmann::json> traces;                   // array, once completed
  std::optional<std::string> error;                       // once failed
  std::string device;                                     // the worker that ran it
  double submitted_s = 0, started_s = 0, finished_s = 0;  // Unix seconds

  // FlashInfer-Bench's TaskResponse: task_id, status, definition, solution, traces, error.
  nlohmann::json response() const;
};

struct TaskCounts {
  size_t queued = 0;   // pending
  size_t running = 0;  // running
  size_t done = 0;     // completed or failed
};

class TaskStore {
 public:
  enum class Submitted { kCreated, kSame, kConflict, kClosed };
  // Queues `t` (its id must be set). kSame: a task with this id and digest exists (nothing queued);
  // kConflict: one with this id and another digest; kClosed: draining or shutting down.
  Submitted submit(Task t);

  // The task's response; nullopt when unknown. Waits up to `wait` for it to finish.
  std::optional<nlohmann::json> response(const std::string& id, std::chrono::duration<double> wait);
  // Responses in the order of `ids` (duplicates repeated); nullopt naming the first unknown id.
  // Waits up to `wait` for all of them to finish.
  std::variant<std::vector<nlohmann::json>, std::string> responses(const std::vector<std::string>& ids,
                                                                   std::chrono::duration<double> wait);

  // Workers: the next pending task, now running on `device`; nullopt once closed.
  std::optional<Task> next(const std::string& device);
  void complete(const std::string& id, nlohmann::json traces);
  void fail(const std::string& id, std::string error);

  void drain();  // no new tasks; queued and running ones finish
  void close();  // no new tasks; pending ones fail ("server shut down"); next() returns nullopt
  bool accepting() const;
  bool closed() const;
  TaskCounts counts() const;

 private:
  bool finished_locked(const std::string& id) const;

  mutable std::mutex mu_;
  std::condition_variable queued_cv_;  // a task was queued, or the store closed
  std::condition_variable done_cv_;    // a task finished
  std::map<std::string, Task> tasks_;
  std::deque<std::string> queue_;
  bool draining_ = false;
  bool closed_ = false;
};

}  // namespace kda::serve
