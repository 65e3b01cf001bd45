// The evaluator's handle on one runner process (reference, baseline or candidate).
//
// Every call has a deadline; a runner that times out is killed (the whole process group), one that
// dies is reaped and its signal named. Either way the runner is retired and the caller gets a
// CallOutcome saying what happened; the evaluator itself never dies because a candidate did.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/arena.h"
#include "eval/protocol.h"
#include "proc/subprocess.h"
#include "util/status.h"

namespace kda::eval {

enum class RunnerRole { kReference, kBaseline, kCandidate };
const char* role_name(RunnerRole r);

struct RunnerOptions {
  std::filesystem::path runner_binary;  // kda-runner
  std::string backend = "host";         // host | cuda
  RunnerRole role = RunnerRole::kCandidate;
  bool sandbox = true;  // Landlock + seccomp before dlopen (candidate runners)
  double start_timeout_s = 30;
  // Programs the runner is started under, argv prefix (e.g. {"ncu", ...} or {"compute-sanitizer",
  // ...}; {"python3"} for a script runner). Empty: the runner binary is executed directly.
  std::vector<std::string> wrapper;
  // Extra NAME=value environment entries (a wrapping tool may need e.g. TMPDIR); never seeds.
  std::vector<std::string> extra_env;
  // Screening (eval::Screener): the runner may load further libraries from under this directory
  // (the build cache) after its first; its sandbox then reads the whole directory. Empty: one load.
  std::filesystem::path reload_root;
};

// What one request to a runner produced.
struct CallOutcome {
  enum class Kind { kOk, kFailed, kTimeout, kCrashed } kind = Kind::kOk;
  nlohmann::json reply;  // the runner's reply (kOk / kFailed)
  std::string message;   // why it failed / how it died ("killed by SIGSEGV")
  int signal = 0;
  double wall_s = 0;  // the evaluator's own clock around the request
  std::string log;    // the runner's captured stderr/stdout tail, on failure

  // The reply read as a kCall reply (protocol.h); a default one (not ok) when there is none or it
  // does not read as one.
  CallReply call_reply() const {
    auto r = reply.is_object() ? CallReply::from_json(reply) : Result<CallReply>(CallReply{});
    return r.ok() ? std::move(*r) : CallReply{};
  }
};

// The Python interpreter whose packages a Python solution imports: $KDA_PYTHON, else the first
// python3 on kda's PATH when it belongs to a virtual environment (pyvenv.cfg beside its bin/: torch
// and Triton often live in one), else "" (the embedded libpython's own prefix). The runners, whose
// PATH is /usr/bin:/bin, get it as KDA_PYTHON.
std::string python_interpreter();

class RunnerClient {
 public:
  RunnerClient() = default;
  RunnerClient(RunnerClient&& o) noexcept { *this = std::move(o); }
  RunnerClient& operator=(RunnerClient&& o) noexcept;
  ~RunnerClient();

  // Spawns the runner and waits for its hello (start_timeout_s).
  static Result<RunnerClient> start(const RunnerOptions& options);
  // The same in halves, so that several runners start at once: spawn() returns once the process
  // exists; await_hello() waits for its hello. A runner is usable only after await_hello() is ok.
  static Result<RunnerClient> spawn(const RunnerOptions& options);
  Status await_hello();

  // Loads the library (the runner sandboxes itself first when options.sandbox).
  CallOutcome load(const std::filesystem::path& library, const std::string& symbol, double timeout_s);
  // Sizes the arena, then tells the runner the layout.
  CallOutcome set_layout(const ArenaLayout& layout, double timeout_s);
  // The same two requests in halves, so that several runners work at once (CUDA context creation,
  // device allocations): send_*() writes the command and returns; receive() waits for its reply,
  // within the timeout given to send_*(). A failed send is reported by receive(). One request at a
  // time: a reply nobody received is read and dropped before the next request is sent.
  // returns_outputs: a Python entry function that returns the outputs; jit_dir: a JIT-compiling
  // one's writable directory (LoadRequest).
  void send_load(const std::filesystem::path& library, const std::string& symbol, double timeout_s,
                 bool returns_outputs = false, const std::filesystem::path& jit_dir = {},
                 const std::string& python_module = {});
  // A further library in the same process (runners started with reload_root, "reload" capability):
  // the entry point moves to it; earlier libraries stay mapped and are never called again.
  CallOutcome reload(const std::filesystem::path& library, const std::string& symbol, double timeout_s);
  void send_layout(const ArenaLayout& layout, double timeout_s);
  CallOutcome receive();
  CallOutcome call(const CallRequest& request, double timeout_s);
  // Device-side inputs (kPrepare; runners with the "device_inputs" capability).
  CallOutcome prepare(const PrepareRequest& request, double timeout_s);
  // The CUPTI summaries of the timed calls made since the last collect with "defer_records"
  // (kCollect; runners with the "deferred_records" capability).
  CallOutcome collect(double timeout_s);
  // Capabilities the runner announced in its hello ("device_inputs").
  bool has_capability(const std::string& name) const;

  SharedArena& arena() { return arena_; }
  bool alive() const { return child_.has_value() && !dead_; }
  pid_t pid() const;
  // Thread count of the runner process (/proc/<pid>/task), -1 when unknown.
  int thread_count() const;
  void stop();

 private:
  CallOutcome request(uint32_t type, const std::string& payload, double timeout_s);
  void send(uint32_t type, const std::string& payload, double timeout_s);
  CallOutcome death(CallOutcome::Kind kind, std::string message);

  RunnerOptions options_;
  std::optional<proc::Child> child_;
  int cmd_fd_ = -1;    // we write commands here
  int reply_fd_ = -1;  // we read replies here
  SharedArena arena_;
  std::vector<std::string> capabilities_;
  bool dead_ = false;
  // The request sent and not yet received: when it was sent, its timeout, and the outcome already
  // known when the send itself failed.
  struct Pending {
    std::chrono::steady_clock::time_point sent;
    double timeout_s = 0;
    std::optional<CallOutcome> failed;
  };
  std::optional<Pending> pending_;
};

}  // namespace kda::eval
