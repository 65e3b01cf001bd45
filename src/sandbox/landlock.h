// Landlock: unprivileged, kernel-enforced filesystem, network and IPC restrictions for the calling
// process and everything it later executes. Used by the candidate runner (before it loads a
// candidate) and by agent processes (applied in the child before exec).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "util/status.h"

namespace kda::sandbox {

struct LandlockPolicy {
  std::vector<std::filesystem::path> read_only;   // read and execute files, list directories
  std::vector<std::filesystem::path> read_write;  // everything, including create/remove/truncate
  std::vector<std::filesystem::path> devices;     // read/write + ioctl (e.g. /dev/nvidia*)
  bool deny_tcp = true;                           // no TCP bind/connect (Landlock ABI >= 4)
  std::vector<int> allowed_tcp_connect_ports;     // exceptions to deny_tcp (e.g. a loopback LLM endpoint)
  bool scope_signals = true;                      // no signals to processes outside the domain (ABI >= 6)
  bool scope_abstract_unix = true;                // no abstract unix sockets outside the domain (ABI >= 6)
};

// The highest Landlock ABI this kernel supports; 0 when Landlock is unavailable.
int landlock_abi();

// What a policy would actually enforce on this kernel, for logs and `--explain`.
struct LandlockReport {
  int abi = 0;
  bool filesystem = false;
  bool network = false;
  bool scoped = false;
  std::vector<std::string> skipped_paths;  // paths that did not exist
};

// Restricts the calling process (sets no_new_privs). Paths that do not exist are skipped and
// reported. Fails (kIo) when Landlock is unavailable: callers decide whether that is fatal.
// Async-signal-safety: allocates; call it before exec in a freshly forked child only if the
// parent was single-threaded, or (as kda does) in a process it owns from the start.
// Implemented as prepare_landlock(policy) followed by restrict_self().
Result<LandlockReport> apply_landlock(const LandlockPolicy& policy);

// A Landlock ruleset built in the parent, to be enforced in a forked child before exec:
//
//   KDA_ASSIGN_OR_RETURN(auto ll, sandbox::prepare_landlock(policy));
//   opts.pre_exec = [&ll] { return ll.restrict_self(); };   // ll must outlive spawn()
//
// prepare_landlock() does everything that allocates (opens every path, creates the ruleset fd,
// adds all rules); restrict_self() makes two raw syscalls only (prctl(PR_SET_NO_NEW_PRIVS) and
// landlock_restrict_self), so it is safe in the fork child of a multithreaded parent. The ruleset
// fd is O_CLOEXEC and never reaches the exec'd program. One PreparedLandlock can restrict any
// number of children. Move-only; closes its fd on destruction.
class PreparedLandlock {
 public:
  PreparedLandlock() = default;  // empty: restrict_self() fails with EBADF (fails closed)
  PreparedLandlock(PreparedLandlock&& other) noexcept;
  PreparedLandlock& operator=(PreparedLandlock&& other) noexcept;
  PreparedLandlock(const PreparedLandlock&) = delete;
  PreparedLandlock& operator=(const PreparedLandlock&) = delete;
  ~PreparedLandlock();

  // Restricts the calling process (and what it later executes). Returns 0 or an errno value.
  // Async-signal-safe: no allocation, no locks.
  int restrict_self() const noexcept;

  // What the ruleset enforces (abi, filesystem/network/scoped, skipped paths).
  const LandlockReport& report() const { return report_; }
  bool valid() const { return ruleset_fd_ >= 0; }

 private:
  friend Result<PreparedLandlock> prepare_landlock(const LandlockPolicy& policy);
  int ruleset_fd_ = -1;
  LandlockReport report_;
};

// Builds the ruleset for `policy` in the calling process without restricting it. Paths that do
// not exist are skipped and reported. Fails (kIo) when Landlock is unavailable or a rule is refused.
Result<PreparedLandlock> prepare_landlock(const LandlockPolicy& policy);

}  // namespace kda::sandbox
