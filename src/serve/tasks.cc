#include "serve/tasks.h"

#include <algorithm>

#include "util/clock.h"

namespace kda::serve {

nlohmann::json TaskTiming::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  if (trials) j["trials"] = *trials;
  if (warmup) j["warmup"] = *warmup;
  if (iterations) j["iterations"] = *iterations;
  if (baseline) j["baseline"] = *baseline;
  if (!baseline_solution.is_null()) j["baseline_solution"] = baseline_solution;
  return j;
}

namespace {

bool is_finished(TaskState s) { return s == TaskState::kCompleted || s == TaskState::kFailed; }

}  // namespace

const char* task_state_name(TaskState s) {
  switch (s) {
    case TaskState::kPending: return "pending";
    case TaskState::kRunning: return "running";
    case TaskState::kCompleted: return "completed";
    case TaskState::kFailed: return "failed";
  }
  return "unknown";
}

nlohmann::json Task::response() const {
  return {{"task_id", id},
          {"status", task_state_name(state)},
          {"definition", definition},
          {"solution", solution},
          {"traces", traces ? *traces : nlohmann::json(nullptr)},
          {"error", error ? nlohmann::json(*error) : nlohmann::json(nullptr)}};
}

TaskStore::Submitted TaskStore::submit(Task t) {
  std::lock_guard lock(mu_);
  if (auto it = tasks_.find(t.id); it != tasks_.end())
    return it->second.digest == t.digest ? Submitted::kSame : Submitted::kConflict;
  if (draining_ || closed_) return Submitted::kClosed;
  t.state = TaskState::kPending;
  t.submitted_s = util::unix_seconds();
  queue_.push_back(t.id);
  tasks_.emplace(t.id, std::move(t));
  queued_cv_.notify_one();
  return Submitted::kCreated;
}

bool TaskStore::finished_locked(const std::string& id) const {
  auto it = tasks_.find(id);
  return it == tasks_.end() || is_finished(it->second.state);
}

std::optional<nlohmann::json> TaskStore::response(const std::string& id, std::chrono::duration<double> wait) {
  std::unique_lock lock(mu_);
  if (!tasks_.count(id)) return std::nullopt;
  done_cv_.wait_for(lock, wait, [&] { return finished_locked(id); });
  return tasks_.at(id).response();
}

std::variant<std::vector<nlohmann::json>, std::string> TaskStore::responses(const std::vector<std::string>& ids,
                                                                            std::chrono::duration<double> wait) {
  std::unique_lock lock(mu_);
  for (const auto& id : ids)
    if (!tasks_.count(id)) return id;
  done_cv_.wait_for(lock, wait,
                    [&] { return std::all_of(ids.begin(), ids.end(), [&](auto& id) { return finished_locked(id); }); });
  std::vector<nlohmann::json> out;
  for (const auto& id : ids) out.push_back(tasks_.at(id).response());
  return out;
}

std::optional<Task> TaskStore::next(const std::string& device) {
  std::unique_lock lock(mu_);
  queued_cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
  if (closed_) return std::nullopt;
  Task& t = tasks_.at(queue_.front());
  queue_.pop_front();
  t.state = TaskState::kRunning;
  t.device = device;
  t.started_s = util::unix_seconds();
  return t;
}

void TaskStore::complete(const std::string& id, nlohmann::json traces) {
  std::lock_guard lock(mu_);
  Task& t = tasks_.at(id);
  if (is_finished(t.state)) return;
  t.state = TaskState::kCompleted;
  t.traces = std::move(traces);
  t.finished_s = util::unix_seconds();
  done_cv_.notify_all();
}

void TaskStore::fail(const std::string& id, std::string error) {
  std::lock_guard lock(mu_);
  Task& t = tasks_.at(id);
  if (is_finished(t.state)) return;
  t.state = TaskState::kFailed;
  t.error = std::move(error);
  t.finished_s = util::unix_seconds();
  done_cv_.notify_all();
}

void TaskStore::drain() {
  std::lock_guard lock(mu_);
  draining_ = true;
}

void TaskStore::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  for (const auto& id : queue_) {
    Task& t = tasks_.at(id);
    t.state = TaskState::kFailed;
    t.error = "the server shut down before this task ran";
    t.finished_s = util::unix_seconds();
  }
  queue_.clear();
  queued_cv_.notify_all();
  done_cv_.notify_all();
}

bool TaskStore::accepting() const {
  std::lock_guard lock(mu_);
  return !draining_ && !closed_;
}

bool TaskStore::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

TaskCounts TaskStore::counts() const {
  std::lock_guard lock(mu_);
  TaskCounts c;
  for (const auto& [id, t] : tasks_) {
    if (t.state == TaskState::kPending)
      ++c.queued;
    else if (t.state == TaskState::kRunning)
      ++c.running;
    else
      ++c.done;
  }
  return c;
}

}  // namespace kda::serve
