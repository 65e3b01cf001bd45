#include "sandbox/seccomp.h"

#ifdef KDA_HAVE_SECCOMP
#include <sched.h>
#include <seccomp.h>

#include <cerrno>
#include <cstring>
#endif

namespace kda::sandbox {

#ifdef KDA_HAVE_SECCOMP

bool seccomp_available() { return true; }

Status apply_seccomp(const SeccompPolicy& policy) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return Status::io("seccomp_init failed");
  int rc = 0;
  auto kill = [&](int nr) {
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, nr, 0);
  };
  kill(SCMP_SYS(ptrace));
  kill(SCMP_SYS(process_vm_readv));
  kill(SCMP_SYS(process_vm_writev));
  if (!policy.allow_processes) {
    kill(SCMP_SYS(fork));
    kill(SCMP_SYS(vfork));
    kill(SCMP_SYS(execve));
    kill(SCMP_SYS(execveat));
  }
  // clone without CLONE_THREAD creates a process.
  if (rc == 0 && !policy.allow_processes)
    rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(clone), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, static_cast<scmp_datum_t>(CLONE_THREAD), 0));
  if (rc == 0 && !policy.allow_threads)
    rc = seccomp_rule_add(
        ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(clone), 1,
        SCMP_A0(SCMP_CMP_MASKED_EQ, static_cast<scmp_datum_t>(CLONE_THREAD), static_cast<scmp_datum_t>(CLONE_THREAD)));
  if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc == 0 && !policy.allow_sockets) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 0);
  if (rc == 0) rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc != 0) return Status::io(std::string("seccomp: ") + std::strerror(-rc));
  return {};
}

#else

bool seccomp_available() { return false; }
Status apply_seccomp(const SeccompPolicy&) { return Status::io("kda was built without libseccomp"); }

#endif

}  // namespace kda::sandbox
