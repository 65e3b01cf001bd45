// seccomp-bpf for the candidate runner (libseccomp, optional at build time).
//
// Denies what no kernel candidate needs and what the threat catalogue names: ptrace and
// process_vm_* (reading/patching the harness), fork/vfork/exec (escaping the runner), clone without
// CLONE_THREAD (new processes). Those kill the process with SIGSYS, which the evaluator reports as a
// sandbox violation. socket() fails with EACCES. clone3 fails with ENOSYS so that glibc falls back to
// clone(2), whose flags the filter can inspect.
#pragma once

#include "util/status.h"

namespace kda::sandbox {

bool seccomp_available();

struct SeccompPolicy {
  bool allow_threads = true;  // clone(CLONE_THREAD); thread counts are checked by the evaluator
  bool allow_sockets = false;
  // fork/vfork/exec and clone of new processes: a JIT-compiling solution's runner starts its
  // compilers (ptxas, cc). What those may execute, read and write is Landlock's to limit; the
  // children inherit both.
  bool allow_processes = false;
};

Status apply_seccomp(const SeccompPolicy& policy);

}  // namespace kda::sandbox
