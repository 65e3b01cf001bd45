#include "audit/audit_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "util/sha256.h"

namespace kda::audit {

namespace stdfs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

constexpr const char* kFields[] = {"seq", "time", "type", "actor", "data", "prev", "hash"};

std::string errno_text(const char* what, const stdfs::path& p) {
  return fmt::format("{} {}: {}", what, p.string(), std::strerror(errno));
}

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string short_hash(const std::string& h) { return h.size() > 12 ? h.substr(0, 12) + "…" : h; }

std::string now_rfc3339() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms % 1000));
}

// The canonical text of a record without "hash": what the hash covers.
std::string canonical_text(uint64_t seq, const std::string& time, const std::string& type, const std::string& actor,
                           const ordered_json& data, const std::string& prev) {
  ordered_json rec = ordered_json::object();
  rec["seq"] = seq;
  rec["time"] = time;
  rec["type"] = type;
  rec["actor"] = actor;
  rec["data"] = data;
  rec["prev"] = prev;
  return rec.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

// Where the chain stands while lines are checked one by one.
struct Chain {
  uint64_t line = 0;  // lines seen so far
  uint64_t next_seq = 0;
  std::string prev = kGenesisHash;  // empty: unknown (after a malformed line)
  uint64_t records = 0;
  std::string head = kGenesisHash;
  std::string expected_head;
  uint64_t head_line = 0;
};

void check_line(std::string_view line, Chain& c, std::vector<VerifyProblem>& problems) {
  const uint64_t n = ++c.line;
  auto problem = [&](std::string m) { problems.push_back({n, std::move(m)}); };
  ++c.records;
  if (line.empty()) {
    problem("empty line (record removed or blanked)");
    c.prev.clear();
    ++c.next_seq;
    return;
  }
  ordered_json j = ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    problem("malformed JSON (not a record)");
    c.prev.clear();
    ++c.next_seq;
    return;
  }
  for (const char* f : kFields) {
    bool good = j.contains(f);
    if (good) {
      const auto& v = j[f];
      if (std::string_view(f) == "seq")
        good = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
      else if (std::string_view(f) == "prev" || std::string_view(f) == "hash")
        good = v.is_string() && is_hex64(v.get<std::string>());
      else if (std::string_view(f) != "data")
        good = v.is_string();
    }
    if (!good) {
      problem(fmt::format("missing or invalid field \"{}\"", f));
      c.prev.clear();
      ++c.next_seq;
      return;
    }
  }
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* f : kFields) known = known || key == f;
    if (!known) problem(fmt::format("unexpected field \"{}\" (record edited)", key));
  }
  const uint64_t seq = j["seq"].get<uint64_t>();
  const std::string prev = j["prev"].get<std::string>();
  const std::string hash = j["hash"].get<std::string>();
  const std::string canon = canonical_text(seq, j["time"].get<std::string>(), j["type"].get<std::string>(),
                                           j["actor"].get<std::string>(), j["data"], prev);
  if (sha256_hex(canon) != hash) problem("hash mismatch (record edited)");
  if (!c.prev.empty() && prev != c.prev)
    problem(n == 1 ? "prev is not the genesis hash (records removed from the start)"
                   : "prev does not chain to the previous line (record deleted, inserted or reordered)");
  if (seq != c.next_seq)
    problem(fmt::format("seq {}, expected {} (record deleted, inserted or reordered)", seq, c.next_seq));
  if (!c.expected_head.empty() && hash == c.expected_head) c.head_line = n;
  c.prev = hash;
  c.head = hash;
  c.next_seq = seq + 1;
}

// Checks the lines of `fd` from `offset` on. `valid_end` becomes the offset just past the last
// newline; bytes after it (a torn line) are reported in `torn_bytes`.
Status scan(int fd, const stdfs::path& path, uint64_t offset, Chain& c, std::vector<VerifyProblem>& problems,
            uint64_t& valid_end, uint64_t& torn_bytes) {
  std::string pending;
  std::string buf(1 << 20, '\0');
  valid_end = offset;
  uint64_t pos = offset;
  for (;;) {
    ssize_t got = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(pos));
    if (got < 0) {
      if (errno == EINTR) continue;
      return Status::io(errno_text("reading", path));
    }
    if (got == 0) break;
    std::string_view chunk(buf.data(), static_cast<size_t>(got));
    size_t start = 0;
    for (size_t nl = chunk.find('\n'); nl != std::string_view::npos; nl = chunk.find('\n', start)) {
      if (pending.empty()) {
        check_line(chunk.substr(start, nl - start), c, problems);
      } else {
        pending.append(chunk.substr(start, nl - start));
        check_line(pending, c, problems);
        pending.clear();
      }
      start = nl + 1;
      valid_end = pos + nl + 1;
    }
    pending.append(chunk.substr(start));
    pos += static_cast<uint64_t>(got);
  }
  torn_bytes = pending.size();
  return {};
}

Status write_all(int fd, const std::string& text, const stdfs::path& path) {
  // One write() per record; a short write (disk full, signal) is reported, never silently resumed.
  for (;;) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::io(errno_text("writing", path));
    if (static_cast<size_t>(n) != text.size())
      return Status::io(fmt::format("writing {}: short write ({} of {} bytes)", path.string(), n, text.size()));
    return {};
  }
}

class FileLock {
 public:
  explicit FileLock(int fd) : fd_(fd) {
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {}
  }
  ~FileLock() { ::flock(fd_, LOCK_UN); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

std::string first_problems(const stdfs::path& path, const std::vector<VerifyProblem>& problems) {
  std::string s;
  for (size_t i = 0; i < problems.size() && i < 3; ++i)
    s += fmt::format("{}{}:{}: {}", i ? "; " : "", path.string(), problems[i].line, problems[i].message);
  if (problems.size() > 3) s += fmt::format("; and {} more", problems.size() - 3);
  return s;
}

}  // namespace

Result<AuditLog> AuditLog::open(const stdfs::path& path) {
  std::error_code ec;
  const bool existed = stdfs::exists(path, ec);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Status::io(errno_text("opening audit log", path));
  AuditLog log;
  log.path_ = path;
  log.fd_ = fd;
  if (!existed) {
    // Make the new file's directory entry durable too.
    int dfd = ::open(path.parent_path().empty() ? "." : path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }
  std::string torn_sha;
  uint64_t torn_bytes = 0;
  {
    FileLock lock(fd);
    Chain c;
    std::vector<VerifyProblem> problems;
    uint64_t valid_end = 0;
    KDA_RETURN_IF_ERROR(scan(fd, path, 0, c, problems, valid_end, torn_bytes));
    if (!problems.empty()) return Status::failed("audit log does not verify: " + first_problems(path, problems));
    if (torn_bytes > 0) {
      std::string torn(torn_bytes, '\0');
      if (::pread(fd, torn.data(), torn.size(), static_cast<off_t>(valid_end)) != static_cast<ssize_t>(torn.size()))
        return Status::io(errno_text("reading torn tail of", path));
      torn_sha = sha256_hex(torn);
      if (::ftruncate(fd, static_cast<off_t>(valid_end)) != 0 || ::fsync(fd) != 0)
        return Status::io(errno_text("cutting torn tail of", path));
    }
    log.seq_ = c.next_seq;
    log.last_hash_ = c.head;
    log.end_offset_ = valid_end;
  }
  if (torn_bytes > 0) {
    KDA_RETURN_IF_ERROR(log.append("recovery", "kda",
                                   {{"reason", "torn last line cut off (append interrupted)"},
                                    {"torn_bytes", torn_bytes},
                                    {"torn_sha256", torn_sha},
                                    {"offset", log.end_offset_}}));
  }
  return log;
}

Status AuditLog::sync_tail_locked() {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return Status::io(errno_text("stat", path_));
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size == end_offset_) return {};
  if (size < end_offset_)
    return Status::failed(fmt::format("audit log {} shrank from {} to {} bytes while open (truncated)", path_.string(),
                                      end_offset_, size));
  // Someone else (another AuditLog on this file) appended: check their records chain onto ours.
  Chain c;
  c.line = seq_;
  c.next_seq = seq_;
  c.prev = last_hash_;
  c.head = last_hash_;
  std::vector<VerifyProblem> problems;
  uint64_t valid_end = 0, torn = 0;
  KDA_RETURN_IF_ERROR(scan(fd_, path_, end_offset_, c, problems, valid_end, torn));
  if (torn > 0) problems.push_back({c.line + 1, "torn last line (another writer's append was cut short)"});
  if (!problems.empty())
    return Status::failed("audit log changed while open and does not verify: " + first_problems(path_, problems));
  seq_ = c.next_seq;
  last_hash_ = c.head;
  end_offset_ = valid_end;
  return {};
}

Status AuditLog::append(const std::string& type, const std::string& actor, const json& data) {
  if (fd_ < 0 || !mu_) return Status::internal("append on a closed audit log");
  std::lock_guard<std::mutex> guard(*mu_);
  FileLock lock(fd_);
  KDA_RETURN_IF_ERROR(sync_tail_locked());
  const std::string canon = canonical_text(seq_, now_rfc3339(), type, actor, ordered_json(data), last_hash_);
  const std::string hash = sha256_hex(canon);
  std::string line = canon;
  line.pop_back();  // the closing brace
  line += ",\"hash\":\"" + hash + "\"}\n";
  if (Status s = write_all(fd_, line, path_); !s.ok()) {
    // Take back a partial line so the chain stays intact; if that fails, open() will cut it.
    if (::ftruncate(fd_, static_cast<off_t>(end_offset_)) != 0) {}
    return s;
  }
  if (::fsync(fd_) != 0) return Status::io(errno_text("fsync", path_));
  ++seq_;
  last_hash_ = hash;
  end_offset_ += line.size();
  return {};
}

uint64_t AuditLog::size() const { return seq_; }
const std::string& AuditLog::last_hash() const { return last_hash_; }
const stdfs::path& AuditLog::path() const { return path_; }

AuditLog::AuditLog(AuditLog&& o) noexcept
    : path_(std::move(o.path_)),
      fd_(std::exchange(o.fd_, -1)),
      seq_(o.seq_),
      last_hash_(std::move(o.last_hash_)),
      end_offset_(o.end_offset_),
      mu_(std::move(o.mu_)) {}

AuditLog& AuditLog::operator=(AuditLog&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    seq_ = o.seq_;
    last_hash_ = std::move(o.last_hash_);
    end_offset_ = o.end_offset_;
    mu_ = std::move(o.mu_);
  }
  return *this;
}

AuditLog::~AuditLog() {
  if (fd_ >= 0) ::close(fd_);
}

Result<VerifyResult> verify(const stdfs::path& path, const std::string& expected_head) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::not_found("audit log not found: " + path.string());
    return Status::io(errno_text("opening audit log", path));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::bad_input("not a regular file: " + path.string());
  }
  VerifyResult r;
  Chain c;
  c.expected_head = expected_head;
  uint64_t valid_end = 0, torn = 0;
  Status s = scan(fd, path, 0, c, r.problems, valid_end, torn);
  ::close(fd);
  KDA_RETURN_IF_ERROR(s);
  if (torn > 0) {
    r.torn_tail = true;
    r.problems.push_back(
        {c.line + 1,
         fmt::format("torn last line: {} bytes without a newline (an append cut short, or bytes added)", torn)});
  }
  r.records = c.records;
  r.head = c.head;
  r.head_line = c.head_line;
  if (!expected_head.empty() && c.head_line == 0) {
    r.problems.push_back(
        {c.line + 1, fmt::format("expected head {} is not in the log (records truncated or rewritten); "
                                 "log ends at {}",
                                 short_hash(expected_head), short_hash(c.head))});
  }
  return r;
}

}  // namespace kda::audit
