// Read confinement for compiler processes: with Landlock, a compile can read only the toolchain,
// the system trees, the allowed include directories and its own staging directory. This closes
// what the include check cannot see, e.g. `asm(".incbin \"/path/to/task/file\"")`.
//
// Split in two so that the child does nothing unsafe after fork: prepare() (parent) opens an
// O_PATH descriptor per allowed root; apply() (child, before exec) makes raw syscalls only.
// Only reads are confined (READ_FILE, READ_DIR); writes and execution are left alone.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kda::build {

class CompilerSandbox {
 public:
  // Roots that do not exist are skipped. abi() == 0 when the kernel has no Landlock: apply() is
  // then a no-op and describe() says so.
  static CompilerSandbox prepare(const std::vector<std::filesystem::path>& read_roots);

  CompilerSandbox() = default;
  CompilerSandbox(CompilerSandbox&&) noexcept;
  CompilerSandbox& operator=(CompilerSandbox&&) noexcept;
  CompilerSandbox(const CompilerSandbox&) = delete;
  CompilerSandbox& operator=(const CompilerSandbox&) = delete;
  ~CompilerSandbox();

  // In the child: restrict reads. Returns 0 or an errno value. Async-signal-safe.
  int apply() const noexcept;
  int abi() const { return abi_; }
  // "landlock ABI 6: reads limited to 14 roots" / "unavailable (no Landlock): reads not confined".
  std::string describe() const;

 private:
  struct Root {
    int fd;
    bool is_dir;
  };
  std::vector<Root> roots_;
  int abi_ = 0;
};

// The roots every compile needs: system trees (/usr, /lib*, /bin, /sbin, /etc, /opt, /proc,
// /sys, /dev) and the toolchain's own prefix (two levels above the resolved compiler).
std::vector<std::filesystem::path> system_read_roots(const std::filesystem::path& compiler);

}  // namespace kda::build
