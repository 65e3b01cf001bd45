#include "sandbox/landlock.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

namespace kda::sandbox {

namespace {

// Landlock UAPI (include/uapi/linux/landlock.h). Spelled out here because Debian 12's kernel
// headers predate ABI 4-6; the numbers are the kernel's stable interface.
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};
struct __attribute__((packed)) PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
};
struct NetPortAttr {
  uint64_t allowed_access;
  uint64_t port;
};

constexpr uint32_t kCreateRulesetVersion = 1u << 0;
constexpr int kRulePathBeneath = 1;
constexpr int kRuleNetPort = 2;

constexpr uint64_t kFsExecute = 1ull << 0, kFsWriteFile = 1ull << 1, kFsReadFile = 1ull << 2, kFsReadDir = 1ull << 3,
                   kFsRemoveDir = 1ull << 4, kFsRemoveFile = 1ull << 5, kFsMakeChar = 1ull << 6, kFsMakeDir = 1ull << 7,
                   kFsMakeReg = 1ull << 8, kFsMakeSock = 1ull << 9, kFsMakeFifo = 1ull << 10, kFsMakeBlock = 1ull << 11,
                   kFsMakeSym = 1ull << 12, kFsRefer = 1ull << 13, kFsTruncate = 1ull << 14, kFsIoctlDev = 1ull << 15;
constexpr uint64_t kNetBindTcp = 1ull << 0, kNetConnectTcp = 1ull << 1;
constexpr uint64_t kScopeAbstractUnix = 1ull << 0, kScopeSignal = 1ull << 1;

uint64_t fs_access_for_abi(int abi) {
  uint64_t a = kFsExecute | kFsWriteFile | kFsReadFile | kFsReadDir | kFsRemoveDir | kFsRemoveFile | kFsMakeChar |
               kFsMakeDir | kFsMakeReg | kFsMakeSock | kFsMakeFifo | kFsMakeBlock | kFsMakeSym;
  if (abi >= 2) a |= kFsRefer;
  if (abi >= 3) a |= kFsTruncate;
  if (abi >= 5) a |= kFsIoctlDev;
  return a;
}

long create_ruleset(const RulesetAttr* attr, size_t size, uint32_t flags) {
  return ::syscall(SYS_landlock_create_ruleset, attr, size, flags);
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

int landlock_abi() {
  long v = create_ruleset(nullptr, 0, kCreateRulesetVersion);
  return v < 0 ? 0 : static_cast<int>(v);
}

PreparedLandlock::PreparedLandlock(PreparedLandlock&& other) noexcept
    : ruleset_fd_(other.ruleset_fd_), report_(std::move(other.report_)) {
  other.ruleset_fd_ = -1;
}

PreparedLandlock& PreparedLandlock::operator=(PreparedLandlock&& other) noexcept {
  if (this != &other) {
    if (ruleset_fd_ >= 0) ::close(ruleset_fd_);
    ruleset_fd_ = other.ruleset_fd_;
    report_ = std::move(other.report_);
    other.ruleset_fd_ = -1;
  }
  return *this;
}

PreparedLandlock::~PreparedLandlock() {
  if (ruleset_fd_ >= 0) ::close(ruleset_fd_);
}

int PreparedLandlock::restrict_self() const noexcept {
  if (ruleset_fd_ < 0) return EBADF;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (::syscall(SYS_landlock_restrict_self, ruleset_fd_, 0) != 0) return errno;
  return 0;
}

Result<PreparedLandlock> prepare_landlock(const LandlockPolicy& policy) {
  PreparedLandlock prepared;
  LandlockReport& report = prepared.report_;
  report.abi = landlock_abi();
  if (report.abi <= 0) return Status::io("Landlock is not available on this kernel");

  const uint64_t all_fs = fs_access_for_abi(report.abi);
  RulesetAttr attr{};
  attr.handled_access_fs = all_fs;
  size_t attr_size = sizeof(uint64_t);  // ABI 1-3 know only handled_access_fs
  if (report.abi >= 4 && policy.deny_tcp) {
    attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
    attr_size = 2 * sizeof(uint64_t);
    report.network = true;
  }
  if (report.abi >= 6 && (policy.scope_signals || policy.scope_abstract_unix)) {
    attr.scoped = (policy.scope_signals ? kScopeSignal : 0) | (policy.scope_abstract_unix ? kScopeAbstractUnix : 0);
    attr_size = sizeof(RulesetAttr);
    report.scoped = true;
  }
  // The kernel creates the ruleset fd with O_CLOEXEC.
  prepared.ruleset_fd_ = static_cast<int>(create_ruleset(&attr, attr_size, 0));
  if (prepared.ruleset_fd_ < 0) return Status::io(std::string("landlock_create_ruleset: ") + std::strerror(errno));

  const uint64_t read_only = kFsExecute | kFsReadFile | kFsReadDir;
  const uint64_t device = kFsReadFile | kFsWriteFile | (report.abi >= 5 ? kFsIoctlDev : 0);
  auto add_paths = [&](const std::vector<std::filesystem::path>& paths, uint64_t access) -> Status {
    for (const auto& p : paths) {
      int fd = ::open(p.c_str(), O_PATH | O_CLOEXEC);
      if (fd < 0) {
        report.skipped_paths.push_back(p.string());
        continue;
      }
      Fd holder(fd);
      struct stat st {};
      if (::fstat(fd, &st) != 0) return Status::io("fstat " + p.string() + ": " + std::strerror(errno));
      uint64_t allowed = access & all_fs;
      // Directory-only rights may not be granted on a file.
      if (!S_ISDIR(st.st_mode)) allowed &= kFsExecute | kFsWriteFile | kFsReadFile | kFsTruncate | kFsIoctlDev;
      PathBeneathAttr rule{allowed, fd};
      if (::syscall(SYS_landlock_add_rule, prepared.ruleset_fd_, kRulePathBeneath, &rule, 0) != 0)
        return Status::io("landlock_add_rule " + p.string() + ": " + std::strerror(errno));
    }
    return {};
  };
  KDA_RETURN_IF_ERROR(add_paths(policy.read_only, read_only));
  KDA_RETURN_IF_ERROR(add_paths(policy.read_write, all_fs));
  KDA_RETURN_IF_ERROR(add_paths(policy.devices, device));
  if (report.network) {
    for (int port : policy.allowed_tcp_connect_ports) {
      NetPortAttr rule{kNetConnectTcp, static_cast<uint64_t>(port)};
      if (::syscall(SYS_landlock_add_rule, prepared.ruleset_fd_, kRuleNetPort, &rule, 0) != 0)
        return Status::io("landlock_add_rule port " + std::to_string(port) + ": " + std::strerror(errno));
    }
  }
  report.filesystem = true;
  return prepared;
}

Result<LandlockReport> apply_landlock(const LandlockPolicy& policy) {
  KDA_ASSIGN_OR_RETURN(PreparedLandlock prepared, prepare_landlock(policy));
  if (int err = prepared.restrict_self(); err != 0)
    return Status::io(std::string("landlock_restrict_self: ") + std::strerror(err));
  return prepared.report();
}

}  // namespace kda::sandbox
