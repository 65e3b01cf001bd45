// Child processes: argv vectors (never a shell), own process group, stdin /dev/null, captured
// output with a cap, timeouts that SIGKILL the whole group, and no leaked file descriptors.
//
// Two levels:
//  - run(): spawn, capture, wait with a timeout, return everything (compilers, tools).
//  - Child: a handle for long-lived children that talk over extra pipes (the evaluator's
//    runners get fds 3 and 4), with wait(deadline), kill_group() and a pre_exec hook.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "proc/deadline.h"
#include "util/status.h"

namespace kda::proc {

// What a child's stdout or stderr is connected to.
enum class Stdio {
  kNull,     // /dev/null
  kInherit,  // the parent's own stream
  kPipe,     // a pipe the caller reads from (Child::stdout_fd()/stderr_fd())
  kCapture,  // drained by a background thread into a capped buffer (Child::take_stdout())
};

// Passes the parent's `parent_fd` to the child as `child_fd` (>= 3). The parent keeps its fd.
struct FdMapping {
  int parent_fd = -1;
  int child_fd = -1;
};

struct ChildOptions {
  std::vector<std::string> argv;  // argv[0] is looked up on PATH unless it contains a '/'
  std::optional<std::filesystem::path> cwd;
  // The child's complete environment as "KEY=VALUE" strings; nullopt inherits the parent's.
  // PATH lookup of argv[0] uses this environment's PATH when it has one.
  std::optional<std::vector<std::string>> env;
  Stdio stdout_mode = Stdio::kCapture;
  Stdio stderr_mode = Stdio::kCapture;
  // Per captured stream: the head is kept, the rest counted and replaced by "[truncated N bytes]".
  size_t output_cap = 1 << 20;
  std::vector<FdMapping> fds;
  // Runs in the child after fork, after fds/cwd/process group are set up, just before exec
  // (sandboxing: Landlock, seccomp, rlimits). Return 0 to continue or an errno value to abort
  // the spawn (spawn() then fails with that errno). The parent may be multithreaded, so the hook
  // must be async-signal-safe-minded: no malloc/new, no locks, no stdio, no exceptions; raw
  // syscalls on data prepared before spawn() are fine. Fds it opens without O_CLOEXEC leak
  // into the program.
  std::function<int()> pre_exec;
};

// How a child ended.
struct ExitInfo {
  int exit_code = -1;       // valid when signal == 0 and !timed_out
  int signal = 0;           // the terminating signal, 0 if it exited
  bool timed_out = false;   // killed by us because the deadline passed (signal is then SIGKILL)
  double wall_seconds = 0;  // spawn to reap
  int64_t peak_rss_kb = 0;  // ru_maxrss from wait4

  bool success() const { return !timed_out && signal == 0 && exit_code == 0; }
  // "exit 0", "exit 3", "killed by SIGSEGV", "timed out after 2.00 s".
  std::string describe() const;
};

class Child {
 public:
  // Fails with kNotFound if argv[0] is not found, kIo if fork/exec/cwd/pre_exec fails.
  static Result<Child> spawn(ChildOptions options);

  Child(Child&&) noexcept;
  Child& operator=(Child&&) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  // Kills the group with SIGKILL (if still running) and reaps: no zombies, no strays.
  ~Child();

  pid_t pid() const;
  // Read ends for Stdio::kPipe streams (owned by the Child), -1 otherwise.
  int stdout_fd() const;
  int stderr_fd() const;

  // Waits for the child to exit until `deadline`. Returns nullopt if it is still running at the
  // deadline (the child is left alone). On exit, every other member of its process group is
  // SIGKILLed before the child is reaped, so background grandchildren do not outlive it.
  std::optional<ExitInfo> wait(Deadline deadline = Deadline::never());
  // wait(deadline); if the deadline passes, SIGKILL the group, reap, and mark timed_out.
  ExitInfo wait_or_kill(Deadline deadline);
  // Sends `sig` to the child's whole process group (no-op once reaped).
  void kill_group(int sig = 9 /* SIGKILL */);
  bool exited() const;

  // Captured output (Stdio::kCapture), available once the child has exited; empty otherwise.
  std::string take_stdout();
  std::string take_stderr();

  struct State;

 private:
  explicit Child(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

struct RunOptions {
  std::vector<std::string> argv;
  std::optional<std::filesystem::path> cwd;
  std::optional<std::vector<std::string>> env;  // full environment; nullopt inherits
  double timeout_seconds = 0;                   // <= 0: no timeout
  size_t output_cap = 1 << 20;                  // per stream
  std::function<int()> pre_exec;                // as ChildOptions::pre_exec
};

struct RunResult {
  ExitInfo exit;
  std::string stdout_text;
  std::string stderr_text;
};

// Runs a program to completion (or timeout) with stdin from /dev/null and both streams captured.
// A non-zero exit, a signal or a timeout is a normal RunResult; only a failure to start is an error.
Result<RunResult> run(const RunOptions& options);

// The current process's environment as "KEY=VALUE" strings (to edit and pass as ChildOptions::env).
std::vector<std::string> current_environment();

// Resolves a program name like execvp would, using PATH from `env` (or the process's PATH).
Result<std::filesystem::path> find_program(const std::string& name,
                                           const std::optional<std::vector<std::string>>& env = std::nullopt);

}  // namespace kda::proc
