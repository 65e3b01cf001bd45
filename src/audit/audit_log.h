// The run's audit log: append-only JSON lines, each record carrying the sha256 of the previous
// record's line, so an edit, a deletion, a truncation or a reordering breaks the chain.
// Record: {"seq":N,"time":"RFC3339","type":"tool_call","actor":"writer","data":{...},"prev":"<hex>","hash":"<hex>"}
// where hash = sha256 of the line's canonical JSON without "hash", and prev = the previous hash
// (64 zeros for seq 0). Every line is written with one write() and fsync()ed before append returns.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace kda::audit {

class AuditLog {
 public:
  // Opens (creating if absent) `path`; an existing log is verified and appended to. A log with
  // problems is refused (kFailed, naming the line), except a torn last line (an append cut short
  // by a crash, no trailing newline): that partial record is cut off and a "recovery" record
  // carrying its length and sha256 is appended first, so the cut is itself on the chain.
  // Appends are serialised across processes (flock) and threads; records appended through another
  // AuditLog on the same file are checked and chained onto.
  static Result<AuditLog> open(const std::filesystem::path& path);

  // type: "state", "tool_call", "file_write", "command", "evaluation", "verdict", "agent_event",
  // "budget", "violation"...; actor: "kda", "writer", "reviewer", "verifier".
  Status append(const std::string& type, const std::string& actor, const nlohmann::json& data);

  uint64_t size() const;  // records so far
  const std::string& last_hash() const;
  const std::filesystem::path& path() const;

  AuditLog(AuditLog&&) noexcept;
  AuditLog& operator=(AuditLog&&) noexcept;
  ~AuditLog();

 private:
  AuditLog() = default;
  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t seq_ = 0;
  std::string last_hash_;
  uint64_t end_offset_ = 0;  // file size after our last append (or open)
  std::unique_ptr<std::mutex> mu_ = std::make_unique<std::mutex>();
  Status sync_tail_locked();
};

// 64 zeros: the "prev" of record 0 and the head of an empty log.
inline constexpr const char* kGenesisHash = "0000000000000000000000000000000000000000000000000000000000000000";

struct VerifyProblem {
  uint64_t line = 0;    // 1-based
  std::string message;  // "hash mismatch (record edited)", "prev does not chain (record deleted or reordered)"...
};

struct VerifyResult {
  uint64_t records = 0;
  std::string head;        // hash of the last record (kGenesisHash for an empty log)
  uint64_t head_line = 0;  // line whose hash is expected_head (0: none given or not found)
  bool torn_tail = false;  // the file ends in a partial line (no trailing newline)
  std::vector<VerifyProblem> problems;
  bool ok() const { return problems.empty(); }
};

// Checks every record. `expected_head` (e.g. recorded in the run state) also catches truncation
// of trailing records; empty skips that check. The expected head must be the hash of some record
// of the chain; records after it are fine (appended after the state was saved, e.g. before a
// crash), a log that no longer contains it was truncated or rewritten.
// Errors (kNotFound/kIo) only when the file cannot be read; tampering is in problems.
Result<VerifyResult> verify(const std::filesystem::path& path, const std::string& expected_head = "");

}  // namespace kda::audit
