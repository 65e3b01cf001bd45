#include "util/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

namespace kda::fs {

Result<std::string> read_file(const stdfs::path& path) {
  std::error_code ec;
  if (!stdfs::exists(path, ec)) return Status::not_found(path.string() + ": no such file");
  if (stdfs::is_directory(path, ec)) return Status::bad_input(path.string() + ": is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io(path.string() + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::io(path.string() + ": read error");
  return ss.str();
}

Status write_file_atomic(const stdfs::path& path, std::string_view content) {
  const stdfs::path dir = path.has_parent_path() ? path.parent_path() : stdfs::path(".");
  std::string tmpl = (dir / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return Status::io(path.string() + ": cannot create temporary file: " + std::strerror(errno));
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmpl.c_str());
      return Status::io(path.string() + ": write failed: " + std::strerror(err));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::fchmod(fd, 0644);
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmpl.c_str());
    return Status::io(path.string() + ": fsync/close failed: " + std::strerror(errno));
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    return Status::io(path.string() + ": rename failed: " + std::strerror(err));
  }
  return {};
}

Status ensure_dir(const stdfs::path& dir) {
  std::error_code ec;
  stdfs::create_directories(dir, ec);
  if (ec) return Status::io(dir.string() + ": cannot create directory: " + ec.message());
  return {};
}

Result<stdfs::path> make_temp_dir(const stdfs::path& parent, std::string_view prefix) {
  KDA_RETURN_IF_ERROR(ensure_dir(parent));
  std::string tmpl = (parent / (std::string(prefix) + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    return Status::io(parent.string() + ": cannot create temporary directory: " + std::strerror(errno));
  return stdfs::path(tmpl);
}

namespace {
stdfs::path xdg_dir(const char* override_env, const char* xdg_var, const char* home_suffix) {
  if (override_env != nullptr) {
    if (const char* v = std::getenv(override_env); v != nullptr && *v != '\0') return v;
  }
  if (const char* v = std::getenv(xdg_var); v != nullptr && *v != '\0') return stdfs::path(v) / "kda";
  const char* home = std::getenv("HOME");
  return stdfs::path(home != nullptr ? home : "/tmp") / home_suffix / "kda";
}
}  // namespace

stdfs::path user_data_dir(const char* override_env) { return xdg_dir(override_env, "XDG_DATA_HOME", ".local/share"); }

stdfs::path user_cache_dir(const char* override_env) { return xdg_dir(override_env, "XDG_CACHE_HOME", ".cache"); }

stdfs::path lexically_clean(const stdfs::path& p) {
  stdfs::path n = p.lexically_normal();
  if (!n.has_filename() && n.has_relative_path()) n = n.parent_path();
  return n;
}

bool is_within(const stdfs::path& p, const stdfs::path& root) {
  auto pi = p.begin();
  for (auto ri = root.begin(); ri != root.end(); ++ri, ++pi) {
    if (ri->empty()) continue;
    if (pi == p.end() || *pi != *ri) return false;
  }
  return true;
}

}  // namespace kda::fs
