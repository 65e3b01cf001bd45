#include "exec/queue.h"

#include <chrono>

#include "sqlite/database.h"
#include "util/clock.h"
#include "util/sha256.h"

namespace kda::exec {

using nlohmann::json;
using sqlite::Database;
using sqlite::Statement;

namespace {

constexpr const char* kSchema = R"sql(
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
CREATE TABLE IF NOT EXISTS tasks (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  digest TEXT NOT NULL,
  body TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
  attempt INTEGER NOT NULL DEFAULT 0,
  server TEXT NOT NULL DEFAULT '',
  instance TEXT NOT NULL DEFAULT '',
  result TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '',
  last_reason TEXT NOT NULL DEFAULT '',
  retries INTEGER NOT NULL DEFAULT 0,
  updated REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_by_state ON tasks (state, seq);
)sql";

constexpr const char* kColumns = "id, body, state, attempt, server, instance, result, error, last_reason";

TaskState state_from(std::string_view s) {
  if (s == "running") return TaskState::kRunning;
  if (s == "done") return TaskState::kDone;
  if (s == "failed") return TaskState::kFailed;
  return TaskState::kQueued;
}

QueuedTask row_task(const Statement& st) {
  QueuedTask t;
  t.id = st.text_at(0);
  t.body = json::parse(st.view_at(1), nullptr, false);
  t.state = state_from(st.view_at(2));
  t.attempt = static_cast<int>(st.int_at(3));
  t.server = st.text_at(4);
  t.instance = st.text_at(5);
  if (std::string r = st.text_at(6); !r.empty()) t.result = json::parse(r, nullptr, false);
  t.error = st.text_at(7);
  t.last_reason = st.text_at(8);
  return t;
}

}  // namespace

const char* task_state_name(TaskState s) {
  switch (s) {
    case TaskState::kQueued: return "queued";
    case TaskState::kRunning: return "running";
    case TaskState::kDone: return "done";
    case TaskState::kFailed: return "failed";
  }
  return "queued";
}

struct TaskQueue::Impl {
  std::unique_ptr<Database> db;
  std::filesystem::path file;

  // One statement run to completion; the rows it changed.
  Result<int> change(Statement st) {
    KDA_RETURN_IF_ERROR(st.run());
    return db->changes();
  }
  Result<std::vector<QueuedTask>> select(const std::string& where, const std::string& arg = {}, int limit = -1) {
    KDA_ASSIGN_OR_RETURN(Statement st, db->prepare(std::string("SELECT ") + kColumns + " FROM tasks " + where +
                                                   " ORDER BY seq LIMIT " + std::to_string(limit)));
    if (!arg.empty()) st.bind(1, arg);
    std::vector<QueuedTask> out;
    while (true) {
      KDA_ASSIGN_OR_RETURN(bool row, st.step());
      if (!row) break;
      out.push_back(row_task(st));
    }
    st.reset();
    return out;
  }
};

TaskQueue::TaskQueue(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TaskQueue::~TaskQueue() = default;

Result<std::unique_ptr<TaskQueue>> TaskQueue::open(const std::filesystem::path& file) {
  auto impl = std::make_unique<Impl>();
  impl->file = file;
  KDA_ASSIGN_OR_RETURN(impl->db, Database::open(file));
  if (Status st = impl->db->exec(kSchema); !st.ok())
    return Status::io(file.string() + ": not a kda task queue (" + st.message() + ")");
  return std::unique_ptr<TaskQueue>(new TaskQueue(std::move(impl)));
}

Result<TaskQueue::Enqueued> TaskQueue::enqueue(const std::string& id, const json& body) {
  if (id.empty()) return Status::bad_input("a task needs an id");
  const std::string text = body.dump();
  const std::string digest = sha256_hex(text);
  KDA_ASSIGN_OR_RETURN(Statement ins,
                       impl_->db->prepare("INSERT OR IGNORE INTO tasks (id, digest, body, state, updated) "
                                          "VALUES (?1, ?2, ?3, 'queued', ?4)"));
  ins.bind(1, id).bind(2, digest).bind(3, text).bind(4, util::unix_seconds());
  KDA_ASSIGN_OR_RETURN(int added, impl_->change(std::move(ins)));
  if (added == 1) return Enqueued::kCreated;
  KDA_ASSIGN_OR_RETURN(Statement st, impl_->db->prepare("SELECT digest FROM tasks WHERE id = ?1"));
  st.bind(1, id);
  KDA_ASSIGN_OR_RETURN(bool row, st.step());
  const bool same = row && st.view_at(0) == digest;
  st.reset();
  return same ? Enqueued::kSame : Enqueued::kConflict;
}

Result<std::optional<QueuedTask>> TaskQueue::claim(const std::string& server, const std::string& instance) {
  KDA_RETURN_IF_ERROR(impl_->db->exec("BEGIN IMMEDIATE"));
  auto claimed = [&]() -> Result<std::optional<QueuedTask>> {
    KDA_ASSIGN_OR_RETURN(auto queued, impl_->select("WHERE state = 'queued'", {}, 1));
    if (queued.empty()) return std::optional<QueuedTask>();
    QueuedTask t = std::move(queued.front());
    KDA_ASSIGN_OR_RETURN(Statement up, impl_->db->prepare("UPDATE tasks SET state = 'running', attempt = attempt + 1, "
                                                          "server = ?2, instance = ?3, updated = ?4 WHERE id = ?1"));
    up.bind(1, t.id).bind(2, server).bind(3, instance).bind(4, util::unix_seconds());
    KDA_RETURN_IF_ERROR(impl_->change(std::move(up)).status());
    t.state = TaskState::kRunning;
    t.attempt += 1;
    t.server = server;
    t.instance = instance;
    return std::optional<QueuedTask>(std::move(t));
  }();
  KDA_RETURN_IF_ERROR(impl_->db->exec(claimed.ok() ? "COMMIT" : "ROLLBACK"));
  return claimed;
}

Result<bool> TaskQueue::complete(const std::string& id, int attempt, const json& result) {
  KDA_ASSIGN_OR_RETURN(Statement up, impl_->db->prepare("UPDATE tasks SET state = 'done', result = ?3, updated = ?4 "
                                                        "WHERE id = ?1 AND attempt = ?2 AND state = 'running'"));
  up.bind(1, id).bind_int(2, attempt).bind(3, result.dump()).bind(4, util::unix_seconds());
  KDA_ASSIGN_OR_RETURN(int n, impl_->change(std::move(up)));
  return n == 1;
}

Result<bool> TaskQueue::fail(const std::string& id, int attempt, const std::string& error) {
  KDA_ASSIGN_OR_RETURN(Statement up, impl_->db->prepare("UPDATE tasks SET state = 'failed', error = ?3, updated = ?4 "
                                                        "WHERE id = ?1 AND attempt = ?2 AND state = 'running'"));
  up.bind(1, id).bind_int(2, attempt).bind(3, error).bind(4, util::unix_seconds());
  KDA_ASSIGN_OR_RETURN(int n, impl_->change(std::move(up)));
  return n == 1;
}

Result<std::optional<TaskState>> TaskQueue::requeue(const std::string& id, int attempt, const std::string& reason,
                                                    int max_attempts, bool charge) {
  // Charged and out of attempts: failed. Otherwise queued again (an uncharged attempt is taken back).
  KDA_ASSIGN_OR_RETURN(Statement up,
                       impl_->db->prepare("UPDATE tasks SET "
                                          "state = CASE WHEN ?3 AND attempt >= ?4 THEN 'failed' ELSE 'queued' END, "
                                          "error = CASE WHEN ?3 AND attempt >= ?4 THEN 'gave up after ' || attempt || "
                                          "' attempt(s); the last: ' || ?5 ELSE error END, "
                                          "attempt = CASE WHEN ?3 THEN attempt ELSE attempt - 1 END, "
                                          "retries = retries + ?3, last_reason = ?5, updated = ?6 "
                                          "WHERE id = ?1 AND attempt = ?2 AND state = 'running'"));
  up.bind(1, id)
      .bind_int(2, attempt)
      .bind_int(3, charge ? 1 : 0)
      .bind_int(4, max_attempts)
      .bind(5, reason)
      .bind(6, util::unix_seconds());
  KDA_ASSIGN_OR_RETURN(int n, impl_->change(std::move(up)));
  if (n != 1) return std::optional<TaskState>();
  KDA_ASSIGN_OR_RETURN(auto t, find(id));
  return t ? std::optional<TaskState>(t->state) : std::optional<TaskState>();
}

Result<size_t> TaskQueue::recover() {
  KDA_ASSIGN_OR_RETURN(Statement up, impl_->db->prepare("UPDATE tasks SET state = 'queued', attempt = attempt - 1, "
                                                        "last_reason = 'the dispatcher restarted', updated = ?1 "
                                                        "WHERE state = 'running'"));
  up.bind(1, util::unix_seconds());
  KDA_ASSIGN_OR_RETURN(int n, impl_->change(std::move(up)));
  return static_cast<size_t>(n);
}

Result<QueueCounts> TaskQueue::counts() {
  KDA_ASSIGN_OR_RETURN(Statement st,
                       impl_->db->prepare("SELECT state, COUNT(*), SUM(retries) FROM tasks GROUP BY state"));
  QueueCounts c;
  while (true) {
    KDA_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) break;
    const auto n = static_cast<size_t>(st.int_at(1));
    c.retries += static_cast<size_t>(st.int_at(2));
    switch (state_from(st.view_at(0))) {
      case TaskState::kQueued: c.queued = n; break;
      case TaskState::kRunning: c.running = n; break;
      case TaskState::kDone: c.done = n; break;
      case TaskState::kFailed: c.failed = n; break;
    }
  }
  st.reset();
  return c;
}

Result<std::vector<QueuedTask>> TaskQueue::tasks() { return impl_->select(""); }

Result<std::optional<QueuedTask>> TaskQueue::find(const std::string& id) {
  KDA_ASSIGN_OR_RETURN(auto found, impl_->select("WHERE id = ?1", id));
  if (found.empty()) return std::optional<QueuedTask>();
  return std::optional<QueuedTask>(std::move(found.front()));
}

}  // namespace kda::exec
