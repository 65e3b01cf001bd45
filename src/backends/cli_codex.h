// Codex (`codex exec --json`) as a kda agent backend.
//
// Each session: fresh HOME/CODEX_HOME/TMPDIR under a kda-owned directory, an environment built
// from scratch, a custom model provider from the config (base_url, env_key, wire_api "responses"),
// analytics and plugins off, kda's tools over MCP (-c mcp_servers.kda.command=<kda> ...), stdin
// /dev/null, and the whole CLI under Landlock.
//
// Codex's own sandbox (bubblewrap) needs to change mounts, which Landlock forbids to a confined
// process: nested under kda's Landlock it cannot start ("Failed to make / slave"), and its legacy
// Landlock mode refuses workspace-write. So with the OS sandbox on, kda runs Codex with
// `--sandbox danger-full-access` — every command still runs inside kda's Landlock domain, which
// is what enforces the write and network limits. With the OS sandbox off (tests of the CLI guards
// only), writers get `workspace-write` with /tmp and $TMPDIR excluded and reviewers `read-only`.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "agent/backend.h"
#include "backends/cli_common.h"

namespace kda::agent {

struct CodexConfig : CliAgentConfig {
  std::string provider_name = "kda";  // the model_providers table kda defines
  // Codex's sandbox mode; empty: chosen as described above.
  std::string sandbox_mode;
};

std::unique_ptr<Backend> make_codex_backend(CodexConfig config);

// The `--sandbox` value kda passes (see the header comment).
std::string codex_sandbox_mode(const CodexConfig& config, Role role, bool os_sandbox_active);

// Turns `codex exec --json` lines into AgentEvents, usage and the final text:
// command_execution -> "command" (ok: completed with exit 0), file_change -> "file_write" per
// path (ok: completed), mcp_tool_call -> "tool_call", agent_message -> "message" (the last one is
// the final text), error items and turn.failed -> "error".
class CodexStreamParser {
 public:
  explicit CodexStreamParser(EventSink* sink) : sink_(sink) {}
  void feed(std::string_view line);

  bool turn_completed() const { return turn_completed_; }
  bool failed() const { return failed_; }
  const std::string& error() const { return error_; }
  const std::string& final_text() const { return final_text_; }
  const Usage& usage() const { return usage_; }
  int turns() const { return turns_; }
  int items() const { return items_; }

 private:
  EventSink* sink_;
  bool turn_completed_ = false;
  bool failed_ = false;
  std::string error_;
  std::string final_text_;
  Usage usage_;
  int turns_ = 0;
  int items_ = 0;
};

}  // namespace kda::agent
