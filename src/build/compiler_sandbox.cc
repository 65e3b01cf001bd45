#include "build/compiler_sandbox.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#if __has_include(<linux/landlock.h>)
#include <linux/landlock.h>
#define KDA_HAVE_LANDLOCK_HEADER 1
#endif

namespace kda::build {

namespace stdfs = std::filesystem;

namespace {

#if defined(KDA_HAVE_LANDLOCK_HEADER) && defined(SYS_landlock_create_ruleset)
constexpr uint64_t kReadFile = LANDLOCK_ACCESS_FS_READ_FILE;
constexpr uint64_t kReadDir = LANDLOCK_ACCESS_FS_READ_DIR;

int query_abi() {
  long v = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v < 0 ? 0 : static_cast<int>(v);
}
#else
int query_abi() { return 0; }
#endif

}  // namespace

CompilerSandbox CompilerSandbox::prepare(const std::vector<stdfs::path>& read_roots) {
  CompilerSandbox s;
  s.abi_ = query_abi();
  if (s.abi_ <= 0) return s;
  for (const auto& r : read_roots) {
    int fd = ::open(r.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      continue;
    }
    s.roots_.push_back({fd, S_ISDIR(st.st_mode)});
  }
  return s;
}

CompilerSandbox::CompilerSandbox(CompilerSandbox&& o) noexcept : roots_(std::move(o.roots_)), abi_(o.abi_) {
  o.roots_.clear();
}

CompilerSandbox& CompilerSandbox::operator=(CompilerSandbox&& o) noexcept {
  if (this != &o) {
    for (const auto& r : roots_) ::close(r.fd);
    roots_ = std::move(o.roots_);
    o.roots_.clear();
    abi_ = o.abi_;
  }
  return *this;
}

CompilerSandbox::~CompilerSandbox() {
  for (const auto& r : roots_) ::close(r.fd);
}

int CompilerSandbox::apply() const noexcept {
#if defined(KDA_HAVE_LANDLOCK_HEADER) && defined(SYS_landlock_create_ruleset)
  if (abi_ <= 0) return 0;
  struct landlock_ruleset_attr attr = {};
  attr.handled_access_fs = kReadFile | kReadDir;
  long ruleset = ::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (ruleset < 0) return errno;
  for (const auto& r : roots_) {
    struct landlock_path_beneath_attr pb = {};
    pb.allowed_access = r.is_dir ? (kReadFile | kReadDir) : kReadFile;
    pb.parent_fd = r.fd;
    if (::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) != 0) {
      int e = errno;
      ::close(static_cast<int>(ruleset));
      return e;
    }
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) {
    int e = errno;
    ::close(static_cast<int>(ruleset));
    return e;
  }
  ::close(static_cast<int>(ruleset));
#endif
  return 0;
}

std::string CompilerSandbox::describe() const {
  if (abi_ <= 0) return "unavailable (no Landlock): compiler reads not confined";
  return "landlock ABI " + std::to_string(abi_) + ": compiler reads limited to " + std::to_string(roots_.size()) +
         " roots";
}

std::vector<stdfs::path> system_read_roots(const stdfs::path& compiler) {
  std::vector<stdfs::path> roots = {"/usr",  "/lib", "/lib32", "/lib64", "/libx32", "/bin",
                                    "/sbin", "/etc", "/opt",   "/proc",  "/sys",    "/dev"};
  std::error_code ec;
  for (const auto& p : {stdfs::path(compiler), stdfs::canonical(compiler, ec)}) {
    if (p.empty()) continue;
    stdfs::path prefix = p.parent_path().parent_path();
    if (!prefix.empty() && prefix != "/") roots.push_back(prefix);
  }
  return roots;
}

}  // namespace kda::build
