#include "proc/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "proc/signals.h"
#include "proc/unique_fd.h"

extern char** environ;

namespace kda::proc {

namespace stdfs = std::filesystem;

std::string ExitInfo::describe() const {
  if (timed_out) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "timed out after %.2f s", wall_seconds);
    return buf;
  }
  if (signal != 0) return "killed by " + signal_name(signal);
  return "exit " + std::to_string(exit_code);
}

namespace {

// One captured stream: keeps the first `cap` bytes and counts the rest.
struct Capture {
  UniqueFd fd;
  std::string data;
  size_t dropped = 0;
  size_t cap = 0;
  bool open = false;

  void append(const char* p, size_t n) {
    size_t room = data.size() < cap ? cap - data.size() : 0;
    size_t take = std::min(room, n);
    data.append(p, take);
    dropped += n - take;
  }
  // Reads once; returns false on EOF or a hard error (the stream is then closed).
  bool read_some() {
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n > 0) {
        append(buf, static_cast<size_t>(n));
        return true;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      fd.reset();
      open = false;
      return false;
    }
  }
  std::string take() {
    std::string out = std::move(data);
    if (dropped > 0) out += "\n[truncated " + std::to_string(dropped) + " bytes]\n";
    data.clear();
    dropped = 0;
    return out;
  }
};

std::optional<std::string> env_lookup(const std::vector<std::string>& env, std::string_view key) {
  for (const auto& kv : env) {
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=')
      return kv.substr(key.size() + 1);
  }
  return std::nullopt;
}

bool is_executable_file(const stdfs::path& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

// Stages reported from the child through the error pipe.
enum SpawnStage : int32_t { kStageDup = 1, kStageChdir, kStagePreExec, kStageExec };

const char* stage_name(int32_t stage) {
  switch (stage) {
    case kStageDup: return "setting up file descriptors";
    case kStageChdir: return "changing directory";
    case kStagePreExec: return "pre_exec hook";
    case kStageExec: return "exec";
    default: return "spawn";
  }
}

// Async-signal-safe: report (stage, errno) to the parent and exit.
[[noreturn]] void child_fail(int err_fd, int32_t stage) {
  int32_t msg[2] = {stage, errno};
  ssize_t ignored = ::write(err_fd, msg, sizeof msg);
  (void)ignored;
  ::_exit(127);
}

// Marks every fd >= `from` close-on-exec. close_range(2) when the kernel has it, a loop otherwise.
void cloexec_from(int from) {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, static_cast<unsigned>(from), ~0U, 4U /* CLOSE_RANGE_CLOEXEC */) == 0) return;
#endif
  struct rlimit rl;
  long max_fd = 65536;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    max_fd = std::min<long>(static_cast<long>(rl.rlim_cur), 1 << 20);
  for (long fd = from; fd < max_fd; ++fd) ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
}

int pidfd_open_or_minus1(pid_t pid) {
#ifdef SYS_pidfd_open
  long fd = ::syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) {
    ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
    return static_cast<int>(fd);
  }
#endif
  return -1;
}

// The lowest fd above every mapping's target (and at least 10) that the child may park fds at
// before it moves them into place; a mapping to a standard stream or mapped twice is bad input.
Result<int> first_free_fd(const std::vector<FdMapping>& fds) {
  int max_target = 2;
  for (size_t i = 0; i < fds.size(); ++i) {
    const auto& m = fds[i];
    if (m.child_fd < 3 || m.parent_fd < 0)
      return Status::bad_input("spawn: fd mapping " + std::to_string(m.parent_fd) + " -> " +
                               std::to_string(m.child_fd) + " is invalid (child fd must be >= 3)");
    for (size_t j = 0; j < i; ++j)
      if (fds[j].child_fd == m.child_fd)
        return Status::bad_input("spawn: child fd " + std::to_string(m.child_fd) + " mapped twice");
    max_target = std::max(max_target, m.child_fd);
  }
  return std::max(max_target + 1, 10);
}

// The child's report of a failure before exec (stage, errno) from its close-on-exec status pipe:
// true with msg filled when one came; end of file means exec succeeded.
bool read_exec_failure(int fd, int32_t msg[2]) {
  size_t got = 0;
  while (got < 2 * sizeof(int32_t)) {
    ssize_t n = ::read(fd, reinterpret_cast<char*>(msg) + got, 2 * sizeof(int32_t) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  return got == 2 * sizeof(int32_t);
}

}  // namespace

struct Child::State {
  pid_t pid = -1;
  bool reaped = false;
  ExitInfo info;
  std::chrono::steady_clock::time_point start;
  UniqueFd pidfd;
  UniqueFd stdout_pipe;
  UniqueFd stderr_pipe;

  Capture out;
  Capture err;
  std::thread drainer;
  UniqueFd wake_read;
  UniqueFd wake_write;
  std::mutex mu;
  std::condition_variable cv;
  bool drain_done = false;

  void drain_loop() {
    for (;;) {
      pollfd pfds[3];
      int n = 0;
      int out_i = -1, err_i = -1;
      if (out.open) {
        out_i = n;
        pfds[n++] = {out.fd.get(), POLLIN, 0};
      }
      if (err.open) {
        err_i = n;
        pfds[n++] = {err.fd.get(), POLLIN, 0};
      }
      if (n == 0) break;
      int wake_i = n;
      pfds[n++] = {wake_read.get(), POLLIN, 0};
      int r = ::poll(pfds, static_cast<nfds_t>(n), -1);
      if (r < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (pfds[wake_i].revents != 0) {
        // Told to stop (a stray that escaped the group holds the pipe): take what is buffered.
        for (Capture* c : {&out, &err}) {
          if (!c->open) continue;
          ::fcntl(c->fd.get(), F_SETFL, ::fcntl(c->fd.get(), F_GETFL) | O_NONBLOCK);
          for (int i = 0; i < 1024 && c->open; ++i) {
            size_t before = c->data.size() + c->dropped;
            if (!c->read_some() || c->data.size() + c->dropped == before) break;
          }
          c->fd.reset();
          c->open = false;
        }
        break;
      }
      if (out_i >= 0 && pfds[out_i].revents != 0) out.read_some();
      if (err_i >= 0 && pfds[err_i].revents != 0) err.read_some();
    }
    std::lock_guard<std::mutex> lock(mu);
    drain_done = true;
    cv.notify_all();
  }

  // After the child is reaped: wait briefly for EOF on the captured pipes, then stop the drainer.
  void finish_capture() {
    if (!drainer.joinable()) return;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::seconds(2), [&] { return drain_done; });
    }
    char b = 1;
    ssize_t ignored = ::write(wake_write.get(), &b, 1);
    (void)ignored;
    drainer.join();
  }
};

Child::Child(std::unique_ptr<State> state) : s_(std::move(state)) {}
Child::Child(Child&&) noexcept = default;
Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    if (s_ && s_->pid > 0 && !s_->reaped) {
      kill_group(SIGKILL);
      wait(Deadline::never());
    }
    s_ = std::move(other.s_);
  }
  return *this;
}

Child::~Child() {
  if (!s_) return;
  if (s_->pid > 0 && !s_->reaped) {
    kill_group(SIGKILL);
    wait(Deadline::never());
  }
  s_->finish_capture();
}

pid_t Child::pid() const { return s_ ? s_->pid : -1; }
int Child::stdout_fd() const { return s_ ? s_->stdout_pipe.get() : -1; }
int Child::stderr_fd() const { return s_ ? s_->stderr_pipe.get() : -1; }
bool Child::exited() const { return !s_ || s_->reaped; }

void Child::kill_group(int sig) {
  if (!s_ || s_->pid <= 0 || s_->reaped) return;
  // The group id is the child's pid; it cannot be reused while the child is unreaped.
  if (::kill(-s_->pid, sig) != 0) ::kill(s_->pid, sig);
}

std::optional<ExitInfo> Child::wait(Deadline deadline) {
  if (!s_ || s_->pid <= 0) return std::nullopt;
  if (s_->reaped) return s_->info;
  for (;;) {
    // Has it exited? (WNOWAIT: keep the zombie so its pid, and so the group id, stay reserved.)
    siginfo_t si;
    std::memset(&si, 0, sizeof si);
    int r = ::waitid(P_PID, static_cast<id_t>(s_->pid), &si, WEXITED | WNOHANG | WNOWAIT);
    if (r < 0 && errno == EINTR) continue;
    bool gone = (r < 0) || si.si_pid == s_->pid;
    if (gone) break;
    if (deadline.expired()) return std::nullopt;
    if (s_->pidfd.valid()) {
      pollfd p{s_->pidfd.get(), POLLIN, 0};
      int pr = ::poll(&p, 1, deadline.poll_timeout_ms());
      if (pr < 0 && errno != EINTR) s_->pidfd.reset();  // fall back to polling
    } else {
      int ms = deadline.poll_timeout_ms();
      int step = (ms < 0 || ms > 5) ? 5 : ms;
      std::this_thread::sleep_for(std::chrono::milliseconds(step));
    }
  }
  // Strays in its group (background grandchildren) die with it.
  ::kill(-s_->pid, SIGKILL);
  int wstatus = 0;
  struct rusage ru;
  std::memset(&ru, 0, sizeof ru);
  pid_t got;
  do {
    got = ::wait4(s_->pid, &wstatus, 0, &ru);
  } while (got < 0 && errno == EINTR);
  auto& info = s_->info;
  info.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - s_->start).count();
  if (got == s_->pid) {
    if (WIFEXITED(wstatus)) {
      info.exit_code = WEXITSTATUS(wstatus);
    } else if (WIFSIGNALED(wstatus)) {
      info.signal = WTERMSIG(wstatus);
    }
    info.peak_rss_kb = ru.ru_maxrss;
  }
  s_->reaped = true;
  s_->pidfd.reset();
  s_->finish_capture();
  return info;
}

ExitInfo Child::wait_or_kill(Deadline deadline) {
  if (auto r = wait(deadline)) return *r;
  kill_group(SIGKILL);
  ExitInfo info = wait(Deadline::never()).value_or(ExitInfo{});
  info.timed_out = true;
  s_->info.timed_out = true;
  return info;
}

std::string Child::take_stdout() { return s_ && s_->reaped ? s_->out.take() : std::string(); }
std::string Child::take_stderr() { return s_ && s_->reaped ? s_->err.take() : std::string(); }

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

Result<stdfs::path> find_program(const std::string& name, const std::optional<std::vector<std::string>>& env) {
  if (name.empty()) return Status::bad_input("empty program name");
  if (name.find('/') != std::string::npos) {
    if (!is_executable_file(name)) return Status::not_found("program '" + name + "' not found or not executable");
    return stdfs::path(name);
  }
  std::string path_var;
  if (env) {
    path_var = env_lookup(*env, "PATH").value_or("/usr/local/bin:/usr/bin:/bin");
  } else {
    const char* p = std::getenv("PATH");
    path_var = p != nullptr ? p : "/usr/local/bin:/usr/bin:/bin";
  }
  size_t pos = 0;
  while (pos <= path_var.size()) {
    size_t end = path_var.find(':', pos);
    if (end == std::string::npos) end = path_var.size();
    std::string dir = path_var.substr(pos, end - pos);
    if (dir.empty()) dir = ".";
    stdfs::path candidate = stdfs::path(dir) / name;
    if (is_executable_file(candidate)) return candidate;
    pos = end + 1;
  }
  return Status::not_found("program '" + name + "' not found on PATH");
}

namespace {

// Hands the read ends of the child's piped or captured stdout and stderr to its state; true when
// one is captured (a drainer thread then reads it).
bool wire_outputs(Child::State& st, const ChildOptions& options, Pipe& out_pipe, Pipe& err_pipe) {
  if (options.stdout_mode == Stdio::kPipe) st.stdout_pipe = std::move(out_pipe.read);
  if (options.stderr_mode == Stdio::kPipe) st.stderr_pipe = std::move(err_pipe.read);
  bool capture = false;
  if (options.stdout_mode == Stdio::kCapture) {
    st.out.fd = std::move(out_pipe.read);
    st.out.open = true;
    st.out.cap = options.output_cap;
    capture = true;
  }
  if (options.stderr_mode == Stdio::kCapture) {
    st.err.fd = std::move(err_pipe.read);
    st.err.open = true;
    st.err.cap = options.output_cap;
    capture = true;
  }
  return capture;
}

}  // namespace

Result<Child> Child::spawn(ChildOptions options) {
  if (options.argv.empty()) return Status::bad_input("spawn: empty argv");
  KDA_ASSIGN_OR_RETURN(stdfs::path program, find_program(options.argv[0], options.env));

  KDA_ASSIGN_OR_RETURN(const int hi, first_free_fd(options.fds));

  // Everything the child touches is prepared before fork: it may only make raw syscalls.
  std::string program_str = program.string();
  std::vector<char*> argv;
  for (auto& a : options.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (options.env) {
    for (auto& e : *options.env) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  std::string cwd = options.cwd ? options.cwd->string() : std::string();

  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull.valid()) return Status::io(std::string("open /dev/null: ") + std::strerror(errno));
  auto state = std::make_unique<State>();
  Pipe out_pipe, err_pipe;
  auto needs_pipe = [](Stdio m) { return m == Stdio::kPipe || m == Stdio::kCapture; };
  if (needs_pipe(options.stdout_mode)) {
    KDA_ASSIGN_OR_RETURN(out_pipe, make_pipe());
  }
  if (needs_pipe(options.stderr_mode)) {
    KDA_ASSIGN_OR_RETURN(err_pipe, make_pipe());
  }
  KDA_ASSIGN_OR_RETURN(Pipe status_pipe, make_pipe());

  auto stdio_source = [&](Stdio mode, const Pipe& p, int self) {
    switch (mode) {
      case Stdio::kNull: return devnull.get();
      case Stdio::kInherit: return self;
      default: return p.write.get();
    }
  };
  const int src_out = stdio_source(options.stdout_mode, out_pipe, 1);
  const int src_err = stdio_source(options.stderr_mode, err_pipe, 2);
  std::vector<int> moved(options.fds.size(), -1);
  const auto& fds = options.fds;
  const auto& pre_exec = options.pre_exec;
  const bool inherit_env = !options.env.has_value();

  state->start = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid < 0) return Status::io(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // ---- child: async-signal-safe calls only from here to exec ----
    ::setpgid(0, 0);
    int report = ::fcntl(status_pipe.write.get(), F_DUPFD_CLOEXEC, hi);
    if (report < 0) ::_exit(127);
    // Move every source fd above all targets first, so no dup2 below clobbers a later source.
    int null_hi = ::fcntl(devnull.get(), F_DUPFD_CLOEXEC, hi);
    int out_hi = ::fcntl(src_out, F_DUPFD_CLOEXEC, hi);
    int err_hi = ::fcntl(src_err, F_DUPFD_CLOEXEC, hi);
    if (null_hi < 0 || out_hi < 0 || err_hi < 0) child_fail(report, kStageDup);
    for (size_t i = 0; i < fds.size(); ++i) {
      moved[i] = ::fcntl(fds[i].parent_fd, F_DUPFD_CLOEXEC, hi);
      if (moved[i] < 0) child_fail(report, kStageDup);
    }
    if (::dup2(null_hi, 0) < 0 || ::dup2(out_hi, 1) < 0 || ::dup2(err_hi, 2) < 0) child_fail(report, kStageDup);
    cloexec_from(3);
    for (size_t i = 0; i < fds.size(); ++i)
      if (::dup2(moved[i], fds[i].child_fd) < 0) child_fail(report, kStageDup);
    // Default signal dispositions and an empty mask (ignored signals survive exec otherwise).
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig == SIGKILL || sig == SIGSTOP) continue;
      ::sigaction(sig, &dfl, nullptr);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) child_fail(report, kStageChdir);
    if (pre_exec) {
      int e = pre_exec();
      if (e != 0) {
        errno = e;
        child_fail(report, kStagePreExec);
      }
    }
    ::execve(program_str.c_str(), argv.data(), inherit_env ? environ : envp.data());
    child_fail(report, kStageExec);
  }

  // ---- parent ----
  ::setpgid(pid, pid);  // also done by the child; whichever runs first wins, both are fine
  state->pid = pid;
  status_pipe.write.reset();
  out_pipe.write.reset();
  err_pipe.write.reset();
  int32_t msg[2] = {0, 0};
  if (read_exec_failure(status_pipe.read.get(), msg)) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    state->reaped = true;
    std::string what = std::string(stage_name(msg[0])) + ": " + std::strerror(msg[1]);
    if (msg[0] == kStageChdir) what = "cannot change directory to " + cwd + ": " + std::strerror(msg[1]);
    return Status::io("spawning " + program_str + ": " + what);
  }

  state->pidfd.reset(pidfd_open_or_minus1(pid));
  if (wire_outputs(*state, options, out_pipe, err_pipe)) {
    auto wake = make_pipe();
    if (!wake.ok()) {
      Child doomed(std::move(state));  // its destructor kills and reaps
      return wake.status();
    }
    state->wake_read = std::move(wake->read);
    state->wake_write = std::move(wake->write);
    State* raw = state.get();
    state->drainer = std::thread([raw] { raw->drain_loop(); });
  }
  return Child(std::move(state));
}

Result<RunResult> run(const RunOptions& options) {
  ChildOptions co;
  co.argv = options.argv;
  co.cwd = options.cwd;
  co.env = options.env;
  co.output_cap = options.output_cap;
  co.pre_exec = options.pre_exec;
  KDA_ASSIGN_OR_RETURN(Child child, Child::spawn(std::move(co)));
  RunResult result;
  result.exit = child.wait_or_kill(Deadline::after_seconds(options.timeout_seconds));
  result.stdout_text = child.take_stdout();
  result.stderr_text = child.take_stderr();
  return result;
}

}  // namespace kda::proc
