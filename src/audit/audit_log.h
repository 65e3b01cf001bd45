// The run's audit log: append-only JSON lines, each record carrying the sha256 of the previous
// record's line, so an edit, a deletion, a truncation or a reordering breaks the chain.
// Record: {"seq":N,"time":"RFC3339","type":"tool_call","actor":"writer","data":{...},"prev":"<hex>","hash":"<hex>"}
// where hash = sha256 of the line's canonical JSON without "hash", and prev = the previous hash
// (64 zeros for seq 0). Every line is written with one write() and fsync()ed before append returns.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace kda::audit {

class AuditLog {
 public:
  // Opens (creating if absent) `path`; an existing log is verified and appended to.
  static Result<AuditLog> open(const std::filesystem::path& path);

  // type: "state", "tool_call", "file_write", "command", "evaluation", "verdict", "agent_event",
  // "budget", "violation"...; actor: "kda", "writer", "reviewer", "verifier".
  Status append(const std::string& type, const std::string& actor, const nlohmann::json& data);

  uint64_t size() const;                   // records so far
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
};

struct VerifyProblem {
  uint64_t line = 0;          // 1-based
  std::string message;        // "hash mismatch (record edited)", "prev does not chain (record deleted or reordered)"...
};

struct VerifyResult {
  uint64_t records = 0;
  std::string head;           // hash of the last record
  std::vector<VerifyProblem> problems;
  bool ok() const { return problems.empty(); }
};

// Checks every record. `expected_head` (e.g. recorded in the run state) also catches truncation
// of trailing records; empty skips that check.
Result<VerifyResult> verify(const std::filesystem::path& path, const std::string& expected_head = "");

}  // namespace kda::audit
