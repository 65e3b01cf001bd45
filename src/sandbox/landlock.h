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
  bool deny_tcp = true;              // no TCP bind/connect (Landlock ABI >= 4)
  std::vector<int> allowed_tcp_connect_ports;  // exceptions to deny_tcp (e.g. a loopback LLM endpoint)
  bool scope_signals = true;         // no signals to processes outside the domain (ABI >= 6)
  bool scope_abstract_unix = true;   // no abstract unix sockets outside the domain (ABI >= 6)
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
Result<LandlockReport> apply_landlock(const LandlockPolicy& policy);

}  // namespace kda::sandbox
