#include "agent/workspace_tools.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <utility>

#include <fmt/format.h>

#include "agent/tool_args.h"
#include "proc/subprocess.h"
#include "sandbox/landlock.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kda::agent {

namespace stdfs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxReadBytes = 16u << 20;     // read_file/edit_file refuse larger files
constexpr size_t kGrepMaxFileBytes = 4u << 20;  // grep skips larger files
constexpr size_t kGrepMaxTotalBytes = 64u << 20;
constexpr int kGrepMaxMatches = 200;
constexpr size_t kGrepMaxLineChars = 300;
constexpr int kListMaxEntries = 2000;
constexpr int kReadDefaultLines = 2000;

stdfs::path canonical_root(const stdfs::path& base, const stdfs::path& p) {
  std::error_code ec;
  stdfs::path full = p.is_absolute() ? p : base / p;
  stdfs::path c = stdfs::weakly_canonical(full, ec);
  return fs::lexically_clean(ec ? full : c);
}

// The tools' arguments, one declaration each: the schema and the reader come from them
// (agent/tool_args.h). Keys no declaration names are ignored, as they always were here.
const std::vector<ArgSpec>& list_files_args() {
  static const std::vector<ArgSpec> s = {
      string_arg("path", "directory, relative to the workspace (default: the workspace)"),
      string_arg("glob", "fnmatch pattern, e.g. \"*.cu\"")};
  return s;
}
const std::vector<ArgSpec>& read_file_args() {
  static const std::vector<ArgSpec> s = {string_arg("path", "file, relative to the workspace").required(),
                                         integer_arg("offset", "first line to return, 1-based"),
                                         integer_arg("limit", "number of lines to return")};
  return s;
}
const std::vector<ArgSpec>& grep_args() {
  static const std::vector<ArgSpec> s = {string_arg("pattern", "what to search for").required(),
                                         string_arg("path", "file or directory (default: the workspace)"),
                                         boolean_arg("regex", "treat pattern as a regular expression (default true)"),
                                         boolean_arg("ignore_case", "case-insensitive match"),
                                         string_arg("glob", "only files matching this fnmatch pattern")};
  return s;
}
const std::vector<ArgSpec>& write_file_args() {
  static const std::vector<ArgSpec> s = {string_arg("path", "file, relative to the workspace").required(),
                                         string_arg("content", "the complete new content").required()};
  return s;
}
const std::vector<ArgSpec>& edit_file_args() {
  static const std::vector<ArgSpec> s = {string_arg("path", "file, relative to the workspace").required(),
                                         string_arg("old_string", "exact text to replace").required(),
                                         string_arg("new_string", "replacement text").required(),
                                         boolean_arg("replace_all", "replace every occurrence")};
  return s;
}
std::vector<ArgSpec> run_command_args(long long max_timeout_s) {
  return {string_arg("command", "the bash command line").required(),
          integer_arg("timeout_s", fmt::format("seconds before the command is killed (max {})", max_timeout_s))};
}

ToolOutcome error_outcome(std::string text, json data = json::object()) {
  return {std::move(text), true, std::move(data)};
}

bool looks_binary(std::string_view s) { return s.substr(0, 8192).find('\0') != std::string_view::npos; }

bool glob_match(const std::string& glob, const std::string& rel) {
  if (glob.empty()) return true;
  if (::fnmatch(glob.c_str(), rel.c_str(), 0) == 0) return true;
  std::string name = stdfs::path(rel).filename().string();
  return ::fnmatch(glob.c_str(), name.c_str(), 0) == 0;
}

std::vector<std::string> command_environment(const stdfs::path& scratch) {
  std::vector<std::string> env;
  const char* path = std::getenv("PATH");
  env.push_back(std::string("PATH=") + (path && *path ? path : "/usr/local/bin:/usr/bin:/bin"));
  for (const char* k : {"LANG", "LC_ALL", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES",
                        "NVIDIA_VISIBLE_DEVICES"}) {
    if (const char* v = std::getenv(k)) env.push_back(std::string(k) + "=" + v);
  }
  if (!scratch.empty()) {
    env.push_back("HOME=" + scratch.string());
    env.push_back("TMPDIR=" + scratch.string());
  }
  env.push_back("TERM=dumb");
  return env;
}

// sha256 of every regular file at or under `p` (a few levels, bounded), for change detection.
void snapshot(const stdfs::path& p, std::map<std::string, std::string>& out) {
  std::error_code ec;
  auto st = stdfs::symlink_status(p, ec);
  if (ec || !stdfs::exists(st)) {
    out[p.string()] = "absent";
    return;
  }
  if (stdfs::is_regular_file(st)) {
    auto h = sha256_file_hex(p);
    out[p.string()] = h.ok() ? *h : "unreadable";
    return;
  }
  if (!stdfs::is_directory(st)) {
    out[p.string()] = "special";
    return;
  }
  int n = 0;
  for (auto it = stdfs::recursive_directory_iterator(p, stdfs::directory_options::skip_permission_denied, ec);
       !ec && it != stdfs::recursive_directory_iterator() && n < 1000; it.increment(ec), ++n) {
    auto s = it->symlink_status(ec);
    if (stdfs::is_regular_file(s)) {
      auto h = sha256_file_hex(it->path());
      out[it->path().string()] = h.ok() ? *h : "unreadable";
    } else if (stdfs::is_symlink(s)) {
      out[it->path().string()] = "symlink:" + stdfs::read_symlink(it->path(), ec).string();
    }
  }
}

// A directory fd, closed on scope exit.
class DirFd {
 public:
  explicit DirFd(int fd = -1) : fd_(fd) {}
  DirFd(DirFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  DirFd& operator=(DirFd&& o) noexcept {
    if (this != &o) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  DirFd(const DirFd&) = delete;
  DirFd& operator=(const DirFd&) = delete;
  ~DirFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Opens the absolute directory `dir` one component at a time with O_NOFOLLOW, so that a symlink
// swapped in after the path check (e.g. by a background process) is refused, never followed.
// With `create`, missing directories are made on the way.
Result<DirFd> open_dir_nofollow(const stdfs::path& dir, bool create) {
  DirFd fd(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return Status::io(std::string("open /: ") + std::strerror(errno));
  for (const auto& part : dir.relative_path()) {
    if (part.empty() || part == ".") continue;
    int next = ::openat(fd.get(), part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT && create) {
      if (::mkdirat(fd.get(), part.c_str(), 0755) != 0 && errno != EEXIST)
        return Status::io(fmt::format("creating {}: {}", dir.string(), std::strerror(errno)));
      next = ::openat(fd.get(), part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (next < 0)
      return Status::io(
          fmt::format("{}: {} (not a plain directory, or it changed)", dir.string(), std::strerror(errno)));
    fd = DirFd(next);
  }
  return fd;
}

// Reads a regular file without following a symlink anywhere on its path.
Result<std::string> read_nofollow(const stdfs::path& file, size_t max_bytes) {
  KDA_ASSIGN_OR_RETURN(DirFd dir, open_dir_nofollow(file.parent_path(), false));
  DirFd f(::openat(dir.get(), file.filename().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (f.get() < 0) {
    if (errno == ENOENT) return Status::not_found(file.string() + ": no such file");
    return Status::io(fmt::format("{}: {}", file.string(), std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return Status::bad_input(file.string() + ": not a regular file");
  if (static_cast<size_t>(st.st_size) > max_bytes)
    return Status::bad_input(fmt::format("{} is too large ({} bytes)", file.string(), st.st_size));
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(f.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::io(fmt::format("reading {}: {}", file.string(), std::strerror(errno)));
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) return Status::bad_input(file.string() + " grew while being read");
  }
  return out;
}

// Replaces `file` atomically (temp file + fsync + rename in the same directory) without following
// a symlink anywhere on its path; keeps the permission bits of the file it replaces.
Status write_nofollow(const stdfs::path& file, std::string_view content) {
  KDA_ASSIGN_OR_RETURN(DirFd dir, open_dir_nofollow(file.parent_path(), true));
  const std::string name = file.filename().string();
  mode_t mode = 0644;
  struct stat st {};
  if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::bad_input(file.string() + " is a directory");
    mode = st.st_mode & 07777 & ~(S_ISUID | S_ISGID);
  }
  std::string tmp;
  DirFd f;
  for (int attempt = 0; attempt < 16 && f.get() < 0; ++attempt) {
    tmp = fmt::format(".{}.kda-tmp-{}-{}", name, ::getpid(), std::random_device{}());
    f = DirFd(::openat(dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (f.get() < 0 && errno != EEXIST) break;
  }
  if (f.get() < 0)
    return Status::io(fmt::format("creating a temporary file beside {}: {}", file.string(), std::strerror(errno)));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(f.get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = Status::io(fmt::format("writing {}: {}", file.string(), std::strerror(errno)));
      ::unlinkat(dir.get(), tmp.c_str(), 0);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  ::fchmod(f.get(), mode);
  if (::fsync(f.get()) != 0 || ::renameat(dir.get(), tmp.c_str(), dir.get(), name.c_str()) != 0) {
    Status s = Status::io(fmt::format("replacing {}: {}", file.string(), std::strerror(errno)));
    ::unlinkat(dir.get(), tmp.c_str(), 0);
    return s;
  }
  return {};
}

}  // namespace

WorkspaceTools::WorkspaceTools(WorkspaceToolsOptions options) : options_(std::move(options)) {
  std::error_code ec;
  root_ = canonical_root(stdfs::current_path(ec), options_.workspace);
  for (const auto& w : options_.writable) writable_.push_back(canonical_root(root_, w));
  for (const auto& r : options_.readable) readable_.push_back(canonical_root(root_, r));
  for (const auto& p : options_.protected_paths) protected_.push_back(canonical_root(root_, p));
  if (!options_.read_only) {
    auto scratch = fs::make_temp_dir(stdfs::temp_directory_path(ec), "kda-agent-scratch");
    if (scratch.ok()) scratch_ = *scratch;
  }
}

WorkspaceTools::~WorkspaceTools() {
  if (!scratch_.empty()) {
    std::error_code ec;
    stdfs::remove_all(scratch_, ec);
  }
}

std::string WorkspaceTools::display_path(const stdfs::path& resolved) const {
  if (fs::is_within(resolved, root_)) {
    auto rel = resolved.lexically_relative(root_);
    return rel.empty() || rel == "." ? "." : rel.string();
  }
  return resolved.string();
}

namespace {

Result<stdfs::path> resolve_path(const stdfs::path& root, const std::string& text) {
  if (text.empty()) return Status::bad_input("empty path");
  if (text.find('\0') != std::string::npos) return Status::bad_input("path contains a NUL byte");
  stdfs::path p(text);
  stdfs::path full = p.is_absolute() ? p : root / p;
  std::error_code ec;
  stdfs::path canon = stdfs::weakly_canonical(full, ec);
  if (ec) return Status::bad_input(fmt::format("cannot resolve {}: {}", text, ec.message()));
  canon = fs::lexically_clean(canon);
  // weakly_canonical resolved every symlink of the existing prefix; check each existing component
  // again so that a symlink swapped in meanwhile is caught rather than followed.
  stdfs::path prefix;
  for (const auto& part : canon) {
    prefix /= part;
    struct stat st {};
    if (::lstat(prefix.c_str(), &st) != 0) break;
    if (S_ISLNK(st.st_mode)) return Status::bad_input(fmt::format("{}: a path component changed into a symlink", text));
  }
  return canon;
}

}  // namespace

Result<stdfs::path> WorkspaceTools::resolve_for_read(const std::string& path) const {
  KDA_ASSIGN_OR_RETURN(stdfs::path p, resolve_path(root_, path));
  if (fs::is_within(p, root_)) return p;
  for (const auto& r : readable_)
    if (fs::is_within(p, r)) return p;
  for (const auto& w : writable_)
    if (fs::is_within(p, w)) return p;
  return Status::bad_input(
      fmt::format("{} is outside the workspace and the readable paths (resolves to {})", path, p.string()));
}

Result<stdfs::path> WorkspaceTools::resolve_for_write(const std::string& path) const {
  if (options_.read_only) return Status::bad_input("this session is read-only: no file may be written");
  KDA_ASSIGN_OR_RETURN(stdfs::path p, resolve_path(root_, path));
  // Git metadata is never the agent's to write: hooks and config there would run outside the sandbox
  // the next time kda (or anyone) runs git.
  for (const auto& part : p)
    if (part == ".git")
      return Status::bad_input(fmt::format("{} is inside a .git directory: it may not be written", path));
  for (const auto& prot : protected_)
    if (fs::is_within(p, prot)) return Status::bad_input(fmt::format("{} is protected: it may not be written", path));
  for (const auto& w : writable_)
    if (fs::is_within(p, w)) return p;
  std::string allowed;
  for (const auto& w : writable_) allowed += (allowed.empty() ? "" : ", ") + display_path(w);
  return Status::bad_input(fmt::format("{} is not writable (resolves to {}); writable: {}", path, display_path(p),
                                       allowed.empty() ? "nothing" : allowed));
}

std::vector<ToolSpec> WorkspaceTools::tools() const {
  std::vector<ToolSpec> v;
  v.push_back({"list_files",
               "List files under a directory of the workspace (recursive; directories end in '/', symlinks in "
               "'@'). Optional glob filters on the relative path or file name, e.g. \"*.cu\".",
               args_schema(list_files_args()), true});
  v.push_back({"read_file",
               "Read a text file. offset is the first line (1-based), limit the number of lines (default 2000).",
               args_schema(read_file_args()), true});
  v.push_back({"grep",
               "Search file contents. pattern is an ECMAScript regular expression, or a plain substring when "
               "regex is false. Prints path:line: text, at most 200 matches.",
               args_schema(grep_args()), true});
  if (options_.read_only) return v;
  v.push_back({"write_file", "Create or replace a file (only the writable solution files and scratch space).",
               args_schema(write_file_args()), false});
  v.push_back({"edit_file",
               "Replace old_string by new_string in a file. old_string must occur exactly once unless replace_all "
               "is true.",
               args_schema(edit_file_args()), false});
  v.push_back({"run_command",
               "Run a shell command (bash -c) in the workspace, sandboxed: writes only to the writable paths and "
               "$TMPDIR, no network. Returns the exit status and the (capped) output.",
               args_schema(run_command_args(options_.command_timeout.count())), false});
  return v;
}

ToolOutcome WorkspaceTools::call(const std::string& name, const json& arguments) {
  if (!arguments.is_object() && !arguments.is_null())
    return error_outcome(name + ": arguments must be a JSON object", {{"error", "bad_arguments"}});
  const json args = arguments.is_null() ? json::object() : arguments;
  if (name == "list_files") return list_files(args);
  if (name == "read_file") return read_file(args);
  if (name == "grep") return grep(args);
  const bool write_tool = name == "write_file" || name == "edit_file" || name == "run_command";
  if (write_tool && options_.read_only) {
    std::string path = args.contains("path") && args["path"].is_string() ? args["path"].get<std::string>() : "";
    return deny(name, path, name + " is not available in a read-only (reviewer) session");
  }
  if (name == "write_file") return write_file(args);
  if (name == "edit_file") return edit_file(args);
  if (name == "run_command") return run_command(args);
  return error_outcome("unknown tool: " + name, {{"error", "unknown_tool"}});
}

void WorkspaceTools::emit(AgentEvent event) {
  if (options_.on_event) options_.on_event(event);
}

ToolOutcome WorkspaceTools::deny(const std::string& tool, const std::string& path, const std::string& reason) {
  emit({"denied", false, {{"tool", tool}, {"path", path}, {"reason", reason}}});
  return error_outcome("denied: " + reason, {{"error", "denied"}, {"path", path}, {"reason", reason}});
}

std::string WorkspaceTools::cap(std::string text) const {
  if (text.size() <= options_.max_output_bytes) return text;
  size_t cut = text.size() - options_.max_output_bytes;
  text.resize(options_.max_output_bytes);
  text += fmt::format("\n[output truncated: {} more bytes]", cut);
  return text;
}

ToolOutcome WorkspaceTools::list_files(const json& args) {
  const ArgValues a(list_files_args(), args, UnknownArgs::kIgnore);
  if (auto bad = a.refusal("list_files")) return *bad;
  const std::string path = a.string("path").value_or(".");
  const std::string glob = a.string("glob").value_or("");
  auto dir = resolve_for_read(path);
  if (!dir.ok()) return deny("list_files", path, dir.status().message());
  std::error_code ec;
  if (!stdfs::is_directory(*dir, ec)) return error_outcome(fmt::format("list_files: {} is not a directory", path));
  std::vector<std::string> entries;
  bool truncated = false;
  auto it = stdfs::recursive_directory_iterator(*dir, stdfs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != stdfs::recursive_directory_iterator(); it.increment(ec)) {
    std::string rel = it->path().lexically_relative(*dir).string();
    auto st = it->symlink_status(ec);
    if (stdfs::is_directory(st) && it->path().filename() == ".git") it.disable_recursion_pending();
    if (!glob_match(glob, rel)) continue;
    if ((int)entries.size() >= kListMaxEntries) {
      truncated = true;
      break;
    }
    entries.push_back(rel + (stdfs::is_symlink(st) ? "@" : stdfs::is_directory(st) ? "/" : ""));
  }
  std::sort(entries.begin(), entries.end());
  std::string text;
  for (const auto& e : entries) text += e + "\n";
  if (entries.empty()) text = "(no entries)\n";
  if (truncated) text += fmt::format("[listing stopped at {} entries; narrow path or glob]\n", kListMaxEntries);
  return {cap(std::move(text)), false, {{"path", display_path(*dir)}, {"entries", entries.size()}}};
}

ToolOutcome WorkspaceTools::read_file(const json& args) {
  const ArgValues a(read_file_args(), args, UnknownArgs::kIgnore);
  if (auto bad = a.refusal("read_file")) return *bad;
  const std::string path = *a.string("path");
  const auto offset = a.integer("offset");
  const auto limit = a.integer("limit");
  auto file = resolve_for_read(path);
  if (!file.ok()) return deny("read_file", path, file.status().message());
  std::error_code ec;
  if (stdfs::is_directory(*file, ec)) return error_outcome(fmt::format("read_file: {} is a directory", path));
  auto size = stdfs::file_size(*file, ec);
  if (ec) return error_outcome(fmt::format("read_file: {}: {}", path, ec.message()));
  if (size > kMaxReadBytes) return error_outcome(fmt::format("read_file: {} is too large ({} bytes)", path, size));
  auto content = read_nofollow(*file, kMaxReadBytes);
  if (!content.ok()) return error_outcome("read_file: " + content.status().message());
  if (looks_binary(*content))
    return {fmt::format("{} is a binary file ({} bytes, sha256 {})", path, content->size(), sha256_hex(*content)),
            false,
            {{"path", display_path(*file)}, {"bytes", content->size()}, {"binary", true}}};
  const long long first = std::max(1LL, offset.value_or(1));
  const long long count = limit && *limit > 0 ? *limit : kReadDefaultLines;
  std::string out;
  long long line = 1, shown_last = 0;
  size_t pos = 0;
  while (pos < content->size()) {
    size_t nl = content->find('\n', pos);
    size_t end = nl == std::string::npos ? content->size() : nl + 1;
    if (line >= first && line < first + count) {
      out.append(*content, pos, end - pos);
      shown_last = line;
    }
    pos = end;
    ++line;
  }
  const long long total = line - 1;
  if (first > total && total > 0) return error_outcome(fmt::format("read_file: {} has only {} lines", path, total));
  if (shown_last < total)
    out += fmt::format("\n[{} has {} lines; showed {}-{}; pass offset={} for more]", path, total, first, shown_last,
                       shown_last + 1);
  return {cap(std::move(out)), false, {{"path", display_path(*file)}, {"lines", total}, {"bytes", content->size()}}};
}

ToolOutcome WorkspaceTools::grep(const json& args) {
  const ArgValues a(grep_args(), args, UnknownArgs::kIgnore);
  if (auto bad = a.refusal("grep")) return *bad;
  const std::string pattern = *a.string("pattern");
  const std::string path = a.string("path").value_or(".");
  const std::string glob = a.string("glob").value_or("");
  const bool use_regex = a.boolean("regex").value_or(true);
  const bool ignore_case = a.boolean("ignore_case").value_or(false);
  if (pattern.empty()) return error_outcome("grep: empty pattern");
  auto where = resolve_for_read(path);
  if (!where.ok()) return deny("grep", path, where.status().message());
  std::optional<std::regex> re;
  if (use_regex) {
    try {
      auto flags = std::regex::ECMAScript | (ignore_case ? std::regex::icase : std::regex::flag_type{});
      re.emplace(pattern, flags);
    } catch (const std::regex_error& e) {
      return error_outcome(fmt::format("grep: invalid regular expression: {}", e.what()), {{"error", "bad_regex"}});
    }
  }
  std::string needle = pattern;
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  if (!use_regex && ignore_case) needle = lower(needle);

  std::vector<stdfs::path> files;
  std::error_code ec;
  if (stdfs::is_regular_file(stdfs::symlink_status(*where, ec))) {
    files.push_back(*where);
  } else if (stdfs::is_directory(*where, ec)) {
    auto it = stdfs::recursive_directory_iterator(*where, stdfs::directory_options::skip_permission_denied, ec);
    for (; !ec && it != stdfs::recursive_directory_iterator(); it.increment(ec)) {
      auto st = it->symlink_status(ec);
      if (stdfs::is_directory(st) && it->path().filename() == ".git") it.disable_recursion_pending();
      if (!stdfs::is_regular_file(st)) continue;  // symlinks are not followed
      if (!glob_match(glob, it->path().lexically_relative(*where).string())) continue;
      files.push_back(it->path());
    }
    std::sort(files.begin(), files.end());
  } else {
    return error_outcome(fmt::format("grep: {} does not exist", path));
  }
  std::string out;
  int matches = 0;
  size_t scanned = 0;
  bool stopped = false;
  for (const auto& f : files) {
    auto size = stdfs::file_size(f, ec);
    if (ec || size > kGrepMaxFileBytes) continue;
    if (scanned + size > kGrepMaxTotalBytes) {
      stopped = true;
      break;
    }
    auto content = fs::read_file(f);
    if (!content.ok() || looks_binary(*content)) continue;
    scanned += content->size();
    std::string shown = display_path(f);
    size_t pos = 0;
    long long lineno = 0;
    while (pos <= content->size() && !stopped) {
      size_t nl = content->find('\n', pos);
      if (nl == std::string::npos) nl = content->size();
      ++lineno;
      std::string line = content->substr(pos, nl - pos);
      bool hit =
          re ? std::regex_search(line, *re) : (ignore_case ? lower(line) : line).find(needle) != std::string::npos;
      if (hit) {
        if (line.size() > kGrepMaxLineChars) line = line.substr(0, kGrepMaxLineChars) + "…";
        out += fmt::format("{}:{}: {}\n", shown, lineno, line);
        if (++matches >= kGrepMaxMatches) stopped = true;
      }
      if (nl == content->size()) break;
      pos = nl + 1;
    }
    if (stopped) break;
  }
  if (matches == 0) out = "(no matches)\n";
  if (stopped) out += "[search stopped early: too many matches or too much data; narrow pattern, path or glob]\n";
  return {cap(std::move(out)), false, {{"path", display_path(*where)}, {"matches", matches}, {"files", files.size()}}};
}

ToolOutcome WorkspaceTools::write_file(const json& args) {
  const ArgValues a(write_file_args(), args, UnknownArgs::kIgnore);
  if (auto bad = a.refusal("write_file")) return *bad;
  const std::string path = *a.string("path");
  const std::string content = *a.string("content");
  if (content.size() > kMaxReadBytes)
    return error_outcome(
        fmt::format("write_file: content too large ({} bytes, limit {})", content.size(), kMaxReadBytes));
  auto file = resolve_for_write(path);
  if (!file.ok()) return deny("write_file", path, file.status().message());
  std::error_code ec;
  if (stdfs::is_directory(*file, ec)) return error_outcome(fmt::format("write_file: {} is a directory", path));
  Status st = write_nofollow(*file, content);
  const std::string shown = display_path(*file);
  if (!st.ok()) {
    emit({"file_write", false, {{"path", shown}, {"error", st.message()}}});
    return error_outcome("write_file: " + st.message());
  }
  json detail = {{"path", shown}, {"sha256", sha256_hex(content)}, {"bytes", content.size()}};
  emit({"file_write", true, detail});
  return {fmt::format("wrote {} bytes to {}", content.size(), shown), false, detail};
}

ToolOutcome WorkspaceTools::edit_file(const json& args) {
  const ArgValues a(edit_file_args(), args, UnknownArgs::kIgnore);
  if (auto bad = a.refusal("edit_file")) return *bad;
  const std::string path = *a.string("path");
  const std::string old_string = *a.string("old_string");
  const std::string new_string = *a.string("new_string");
  const bool replace_all = a.boolean("replace_all").value_or(false);
  if (old_string.empty()) return error_outcome("edit_file: old_string is empty (use write_file to create a file)");
  if (old_string == new_string) return error_outcome("edit_file: old_string and new_string are identical");
  auto file = resolve_for_write(path);
  if (!file.ok()) return deny("edit_file", path, file.status().message());
  std::error_code ec;
  auto size = stdfs::file_size(*file, ec);
  if (ec) return error_outcome(fmt::format("edit_file: {}: {}", path, ec.message()));
  if (size > kMaxReadBytes) return error_outcome(fmt::format("edit_file: {} is too large ({} bytes)", path, size));
  auto content = read_nofollow(*file, kMaxReadBytes);
  if (!content.ok()) return error_outcome("edit_file: " + content.status().message());
  size_t count = 0;
  for (size_t pos = content->find(old_string); pos != std::string::npos;
       pos = content->find(old_string, pos + old_string.size()))
    ++count;
  if (count == 0) return error_outcome(fmt::format("edit_file: old_string not found in {}", path));
  if (count > 1 && !replace_all)
    return error_outcome(fmt::format(
        "edit_file: old_string occurs {} times in {}; add surrounding context to make it unique, or set replace_all",
        count, path));
  std::string updated;
  updated.reserve(content->size() + count * (new_string.size() + 1));
  size_t pos = 0;
  for (size_t hit = content->find(old_string); hit != std::string::npos; hit = content->find(old_string, pos)) {
    updated.append(*content, pos, hit - pos);
    updated += new_string;
    pos = hit + old_string.size();
  }
  updated.append(*content, pos, std::string::npos);
  Status st = write_nofollow(*file, updated);
  const std::string shown = display_path(*file);
  if (!st.ok()) {
    emit({"file_write", false, {{"path", shown}, {"error", st.message()}}});
    return error_outcome("edit_file: " + st.message());
  }
  json detail = {{"path", shown}, {"sha256", sha256_hex(updated)}, {"bytes", updated.size()}, {"replacements", count}};
  emit({"file_write", true, detail});
  return {fmt::format("replaced {} occurrence{} in {}", count, count == 1 ? "" : "s", shown), false, detail};
}

ToolOutcome WorkspaceTools::run_command(const json& args) {
  const ArgValues a(run_command_args(options_.command_timeout.count()), args, UnknownArgs::kIgnore);
  if (auto bad = a.refusal("run_command")) return *bad;
  const std::string command = *a.string("command");
  const auto timeout = a.integer("timeout_s");
  if (command.empty()) return error_outcome("run_command: empty command");
  const long long max_s = std::max<long long>(1, options_.command_timeout.count());
  const long long timeout_s = timeout && *timeout > 0 ? std::min(*timeout, max_s) : max_s;

  sandbox::LandlockPolicy policy;
  policy.read_only = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                      "/etc", "/opt", "/proc", "/sys", "/dev",   root_};
  for (const auto& r : readable_) policy.read_only.push_back(r);
  for (const auto& w : writable_) policy.read_write.push_back(w);
  if (!scratch_.empty()) policy.read_write.push_back(scratch_);
  policy.devices = {"/dev/null",    "/dev/zero",      "/dev/full",       "/dev/random",
                    "/dev/urandom", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"};
  for (int i = 0; i < 16; ++i) policy.devices.push_back("/dev/nvidia" + std::to_string(i));
  policy.deny_tcp = true;
  auto ll = sandbox::prepare_landlock(policy);
  if (!ll.ok()) {
    emit({"command", false, {{"command", command}, {"error", "sandbox unavailable: " + ll.status().message()}}});
    return error_outcome("run_command: refused, the sandbox is unavailable: " + ll.status().message(),
                         {{"error", "sandbox_unavailable"}});
  }

  // Landlock cannot carve a protected file out of a writable directory: detect changes instead.
  std::map<std::string, std::string> before, after;
  std::vector<stdfs::path> watched;
  for (const auto& prot : protected_)
    for (const auto& w : writable_)
      if (fs::is_within(prot, w)) {
        watched.push_back(prot);
        break;
      }
  for (const auto& p : watched) snapshot(p, before);

  proc::RunOptions ro;
  ro.argv = {"/bin/bash", "-c", command};
  ro.cwd = root_;
  ro.env = command_environment(scratch_);
  ro.timeout_seconds = static_cast<double>(timeout_s);
  ro.output_cap = options_.max_output_bytes;
  const sandbox::PreparedLandlock& prepared = *ll;
  ro.pre_exec = [&prepared] { return prepared.restrict_self(); };
  auto result = proc::run(ro);
  if (!result.ok()) {
    emit({"command", false, {{"command", command}, {"error", result.status().message()}}});
    return error_outcome("run_command: " + result.status().message());
  }
  for (const auto& p : watched) snapshot(p, after);
  std::vector<std::string> tampered;
  for (const auto& [k, v] : before)
    if (!after.count(k) || after[k] != v) tampered.push_back(k);
  for (const auto& [k, v] : after)
    if (!before.count(k)) tampered.push_back(k);

  const proc::ExitInfo& x = result->exit;
  json detail = {{"command", command},       {"exit", x.timed_out || x.signal != 0 ? json(nullptr) : json(x.exit_code)},
                 {"wall_s", x.wall_seconds}, {"timed_out", x.timed_out},
                 {"signal", x.signal},       {"network_confined", ll->report().network}};
  const bool ok = x.success() && tampered.empty();
  emit({"command", ok, detail});
  for (const auto& t : tampered)
    emit({"denied",
          false,
          {{"tool", "run_command"}, {"path", display_path(t)}, {"reason", "command changed a protected path"}}});
  std::string text = fmt::format("{} ({:.2f} s)\n", x.describe(), x.wall_seconds);
  text += result->stdout_text;
  if (!result->stderr_text.empty()) {
    if (!text.empty() && text.back() != '\n') text += "\n";
    text += "[stderr]\n" + result->stderr_text;
  }
  if (!tampered.empty()) {
    text += "\n[kda: the command changed protected paths, which is a violation:";
    for (const auto& t : tampered) text += " " + display_path(t);
    text += "]";
    detail["protected_changed"] = tampered;
  }
  return {cap(std::move(text)), !ok, detail};
}

}  // namespace kda::agent
