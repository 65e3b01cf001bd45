#include "eval/runner_client.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <utility>
#include <filesystem>

#include "eval/protocol.h"
#include "proc/frame.h"
#include "proc/signals.h"

namespace kda::eval {

const char* role_name(RunnerRole r) {
  switch (r) {
    case RunnerRole::kReference: return "reference";
    case RunnerRole::kBaseline: return "baseline";
    case RunnerRole::kCandidate: return "candidate";
  }
  return "?";
}

namespace {

// Environment for runners: only what the CUDA driver and the loader need, and the Python
// interpreter a Python solution runs in (python_interpreter). Nothing secret, no LD_PRELOAD /
// LD_AUDIT, no seeds.
std::vector<std::string> runner_environment() {
  std::vector<std::string> env{"PATH=/usr/bin:/bin", "LANG=C"};
  for (const char* keep : {"CUDA_VISIBLE_DEVICES", "HOME", "LD_LIBRARY_PATH", "TMPDIR"}) {
    if (const char* v = std::getenv(keep); v != nullptr) env.push_back(std::string(keep) + "=" + v);
  }
  if (const std::string python = python_interpreter(); !python.empty()) env.push_back("KDA_PYTHON=" + python);
  return env;
}

}  // namespace

std::string python_interpreter() {
  if (const char* p = std::getenv("KDA_PYTHON"); p != nullptr && *p != '\0') return p;
  auto python = proc::find_program("python3");
  std::error_code ec;
  if (!python.ok() || !std::filesystem::exists(python->parent_path().parent_path() / "pyvenv.cfg", ec)) return {};
  return std::filesystem::absolute(*python, ec).string();
}

RunnerClient::~RunnerClient() { stop(); }

RunnerClient& RunnerClient::operator=(RunnerClient&& o) noexcept {
  if (this != &o) {
    stop();
    options_ = std::move(o.options_);
    child_ = std::move(o.child_);
    o.child_.reset();
    cmd_fd_ = std::exchange(o.cmd_fd_, -1);
    reply_fd_ = std::exchange(o.reply_fd_, -1);
    arena_ = std::move(o.arena_);
    capabilities_ = std::move(o.capabilities_);
    dead_ = std::exchange(o.dead_, true);
    pending_ = std::exchange(o.pending_, std::nullopt);
  }
  return *this;
}

pid_t RunnerClient::pid() const { return child_ ? child_->pid() : -1; }

int RunnerClient::thread_count() const {
  if (!child_) return -1;
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(child_->pid()) + "/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return ec ? -1 : n;
}

void RunnerClient::stop() {
  pending_.reset();
  if (cmd_fd_ >= 0) {
    if (child_ && !dead_)
      (void)proc::write_frame(cmd_fd_, static_cast<uint32_t>(MsgType::kQuit), "{}", proc::Deadline::after_seconds(1));
    ::close(cmd_fd_);
    cmd_fd_ = -1;
  }
  if (reply_fd_ >= 0) {
    ::close(reply_fd_);
    reply_fd_ = -1;
  }
  if (child_) {
    child_->wait_or_kill(proc::Deadline::after_seconds(2));
    child_.reset();
  }
  dead_ = true;
}

Result<RunnerClient> RunnerClient::start(const RunnerOptions& options) {
  KDA_ASSIGN_OR_RETURN(RunnerClient c, spawn(options));
  KDA_RETURN_IF_ERROR(c.await_hello());
  return c;
}

Result<RunnerClient> RunnerClient::spawn(const RunnerOptions& options) {
  RunnerClient c;
  c.options_ = options;
  int to_child[2], from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0) return Status::io("pipe2 failed");
  auto arena = SharedArena::create(4096, std::string("kda-arena-") + role_name(options.role));
  if (!arena.ok()) return arena.status();
  c.arena_ = std::move(*arena);

  proc::ChildOptions co;
  co.argv = options.wrapper;
  for (std::string a : {options.runner_binary.string(), std::string("--backend"), options.backend,
                        std::string("--role"), std::string(role_name(options.role))})
    co.argv.push_back(std::move(a));
  // Under a tool (ncu, compute-sanitizer) the runner exits through its destructors and atexit
  // handlers, where the tool's injected library finishes its report.
  if (!options.wrapper.empty()) co.argv.push_back("--clean-exit");
  std::vector<std::string> env = runner_environment();
  env.insert(env.end(), options.extra_env.begin(), options.extra_env.end());
  co.env = std::move(env);
  co.stdout_mode = proc::Stdio::kCapture;
  co.stderr_mode = proc::Stdio::kCapture;
  co.output_cap = 64 << 10;
  co.fds = {{to_child[0], kRunnerCommandFd}, {from_child[1], kRunnerReplyFd}, {c.arena_.fd(), kRunnerArenaFd}};
  auto child = proc::Child::spawn(std::move(co));
  ::close(to_child[0]);
  ::close(from_child[1]);
  c.cmd_fd_ = to_child[1];
  c.reply_fd_ = from_child[0];
  if (!child.ok()) {
    ::close(c.cmd_fd_);
    ::close(c.reply_fd_);
    c.cmd_fd_ = c.reply_fd_ = -1;
    return child.status().with_context("starting " + options.runner_binary.string());
  }
  c.child_.emplace(std::move(*child));
  c.dead_ = true;  // until its hello
  return c;
}

Status RunnerClient::await_hello() {
  if (!child_) return Status::io("runner was not spawned");
  auto hello = proc::read_frame(reply_fd_, proc::Deadline::after_seconds(options_.start_timeout_s));
  if (!hello.ok() || hello.frame->type != static_cast<uint32_t>(MsgType::kHello)) {
    auto info = child_->wait_or_kill(proc::Deadline::after_seconds(1));
    return Status::io(std::string("runner did not start (") + info.describe() + "): " + child_->take_stderr());
  }
  auto said = Hello::from_json(nlohmann::json::parse(hello.frame->payload, nullptr, false));
  if (!said.ok()) {
    child_->kill_group();
    child_->wait_or_kill(proc::Deadline::after_seconds(1));
    return Status::io("runner's hello: " + said.status().message());
  }
  capabilities_ = std::move(said->capabilities);
  dead_ = false;
  return {};
}

CallOutcome RunnerClient::death(CallOutcome::Kind kind, std::string message) {
  CallOutcome o;
  o.kind = kind;
  o.message = std::move(message);
  if (child_) {
    if (kind == CallOutcome::Kind::kTimeout) child_->kill_group();
    auto info = child_->wait_or_kill(proc::Deadline::after_seconds(2));
    o.signal = info.signal;
    if (kind == CallOutcome::Kind::kCrashed) {
      if (info.signal != 0)
        o.message = "runner killed by " + proc::signal_name(info.signal);
      else
        o.message = "runner exited (" + info.describe() + ") during the call";
    }
    o.log = child_->take_stderr();
    std::string out = child_->take_stdout();
    if (!out.empty()) o.log += (o.log.empty() ? "" : "\n") + out;
  }
  dead_ = true;
  return o;
}

CallOutcome RunnerClient::request(uint32_t type, const std::string& payload, double timeout_s) {
  send(type, payload, timeout_s);
  return receive();
}

void RunnerClient::send(uint32_t type, const std::string& payload, double timeout_s) {
  // One request at a time: a reply nobody received is read (and dropped) first, so this request's
  // reply cannot be mistaken for it.
  if (pending_) (void)receive();
  pending_.emplace();
  pending_->sent = std::chrono::steady_clock::now();
  pending_->timeout_s = timeout_s;
  if (!alive()) {
    pending_->failed = CallOutcome{CallOutcome::Kind::kCrashed, {}, "runner is not running"};
    return;
  }
  if (Status st = proc::write_frame(cmd_fd_, type, payload, proc::Deadline::after_seconds(timeout_s)); !st.ok())
    pending_->failed = death(CallOutcome::Kind::kCrashed, st.message());
}

CallOutcome RunnerClient::receive() {
  if (!pending_) return {CallOutcome::Kind::kFailed, {}, "no request is waiting for a reply"};
  const Pending p = std::move(*pending_);
  pending_.reset();
  if (p.failed) return *p.failed;
  const double left = p.timeout_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - p.sent).count();
  auto r = proc::read_frame(reply_fd_, proc::Deadline::after_seconds(std::max(0.0, left)), 64 << 20);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - p.sent).count();
  if (!r.ok()) {
    auto o = death(
        r.error == proc::FrameError::kTimeout ? CallOutcome::Kind::kTimeout : CallOutcome::Kind::kCrashed,
        r.error == proc::FrameError::kTimeout ? "call exceeded " + std::to_string(p.timeout_s) + " s" : r.message);
    o.wall_s = wall;
    return o;
  }
  CallOutcome o;
  o.wall_s = wall;
  o.reply = nlohmann::json::parse(r.frame->payload, nullptr, false);
  if (o.reply.is_discarded() || !o.reply.is_object()) return death(CallOutcome::Kind::kCrashed, "malformed reply");
  if (!o.reply.value("ok", false)) {
    o.kind = CallOutcome::Kind::kFailed;
    o.message = o.reply.value("error", std::string("failed"));
  }
  return o;
}

CallOutcome RunnerClient::load(const std::filesystem::path& library, const std::string& symbol, double timeout_s) {
  send_load(library, symbol, timeout_s);
  return receive();
}

void RunnerClient::send_load(const std::filesystem::path& library, const std::string& symbol, double timeout_s,
                             bool returns_outputs, const std::filesystem::path& jit_dir,
                             const std::string& python_module) {
  LoadRequest req{
      .library = library.string(), .symbol = symbol, .returns_outputs = returns_outputs, .sandbox = options_.sandbox};
  if (!jit_dir.empty()) req.jit_dir = jit_dir.string();
  if (!python_module.empty()) req.python_module = python_module;
  if (!options_.reload_root.empty()) req.reload_root = options_.reload_root.string();
  send(static_cast<uint32_t>(MsgType::kLoad), req.to_json().dump(), timeout_s);
}

CallOutcome RunnerClient::reload(const std::filesystem::path& library, const std::string& symbol, double timeout_s) {
  const LoadRequest req{.library = library.string(), .symbol = symbol, .reload = true};
  return request(static_cast<uint32_t>(MsgType::kLoad), req.to_json().dump(), timeout_s);
}

CallOutcome RunnerClient::set_layout(const ArenaLayout& layout, double timeout_s) {
  send_layout(layout, timeout_s);
  return receive();
}

void RunnerClient::send_layout(const ArenaLayout& layout, double timeout_s) {
  // The memfd only grows: a layout that fits reuses its pages and the runner's mapping of them (and
  // on CUDA their page-locking), so a session that cycles through workloads maps once per new size.
  if (layout.size > arena_.size()) {
    if (Status st = arena_.resize(layout.size); !st.ok()) {
      pending_.emplace();
      pending_->failed = CallOutcome{CallOutcome::Kind::kFailed, {}, st.message()};
      return;
    }
  }
  send(static_cast<uint32_t>(MsgType::kLayout), layout.to_json().dump(), timeout_s);
}

CallOutcome RunnerClient::call(const CallRequest& req, double timeout_s) {
  return request(static_cast<uint32_t>(MsgType::kCall), req.to_json().dump(), timeout_s);
}

CallOutcome RunnerClient::prepare(const PrepareRequest& req, double timeout_s) {
  return request(static_cast<uint32_t>(MsgType::kPrepare), req.to_json().dump(), timeout_s);
}

CallOutcome RunnerClient::collect(double timeout_s) {
  return request(static_cast<uint32_t>(MsgType::kCollect), "{}", timeout_s);
}

bool RunnerClient::has_capability(const std::string& name) const {
  for (const auto& c : capabilities_)
    if (c == name) return true;
  return false;
}

}  // namespace kda::eval
