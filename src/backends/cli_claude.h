// Claude Code (`claude -p ... --output-format stream-json --verbose`) as a kda agent backend.
//
// Each session: fresh HOME/TMPDIR under a kda-owned directory, an environment built from scratch
// (ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY / model from the config, the offline switches), stdin
// /dev/null, kda's tools over MCP (--mcp-config + --strict-mcp-config: `kda mcp --connect`), a
// PreToolUse guard hook (`kda mcp guard`) via --settings, and the whole CLI under Landlock.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "agent/backend.h"
#include "backends/cli_common.h"

namespace kda::agent {

struct ClaudeCodeConfig : CliAgentConfig {
  bool guard_hook = true;  // PreToolUse hook denying Write/Edit outside the writable paths
};

std::unique_ptr<Backend> make_claude_code_backend(ClaudeCodeConfig config);

// Turns Claude Code's stream-json lines into AgentEvents, usage and the final text.
//  - assistant text -> "message"; tool_use + its tool_result -> "file_write" (Write, Edit,
//    MultiEdit, NotebookEdit), "command" (Bash), "tool_call" (everything else, MCP included),
//    ok = !is_error; a tool_use whose result never came is reported failed at the end.
//  - result.permission_denials -> "denied" (ok = false); result.is_error -> "error".
//  - system/api_retry -> "retry".
class ClaudeStreamParser {
 public:
  explicit ClaudeStreamParser(EventSink* sink) : sink_(sink) {}
  void feed(std::string_view line);
  void finish();  // reports tool calls that never got a result

  bool saw_result() const { return saw_result_; }
  bool is_error() const { return is_error_; }
  const std::string& error() const { return error_; }
  const std::string& final_text() const { return final_text_; }
  const Usage& usage() const { return usage_; }
  int turns() const { return turns_; }
  int actions() const { return actions_; }  // tool results seen

 private:
  void on_tool_result(const nlohmann::json& block);

  EventSink* sink_;
  struct Pending {
    std::string name;
    nlohmann::json input;
  };
  std::unordered_map<std::string, Pending> pending_;
  std::vector<std::string> pending_order_;
  std::vector<std::string> seen_message_ids_;
  bool saw_result_ = false;
  bool is_error_ = false;
  std::string error_;
  std::string final_text_;
  std::string last_text_;
  Usage usage_;
  int turns_ = 0;
  int actions_ = 0;
};

}  // namespace kda::agent
