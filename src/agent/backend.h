// One interface for every agent that can write or review: the native API agent (Anthropic
// Messages / OpenAI-compatible), Claude Code, Codex, and the scripted backend used by tests. The
// loop (src/loop) composes a prompt and a set of tools for each session; the backend runs one
// fresh conversation and reports what happened. Each session starts from nothing: no context
// carries over between sessions except what the prompt and the run's files say.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/tool.h"
#include "util/status.h"

namespace kda::agent {

enum class Role { kWriter, kReviewer };
const char* role_name(Role role);  // "writer" | "reviewer"

struct Usage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t cache_read_tokens = 0;
  int64_t cache_write_tokens = 0;
  double cost_usd = 0;  // from the configured price table; 0 when unknown
  int requests = 0;     // API requests made (retries included)
  Usage& operator+=(const Usage& o);
};

// One thing the agent did, for the audit log. kind: "tool_call", "file_write", "command",
// "message", "error", "retry", "denied". A denied or failed action has ok = false.
struct AgentEvent {
  std::string kind;
  bool ok = true;
  nlohmann::json detail = nlohmann::json::object();
};

struct SessionRequest {
  Role role = Role::kWriter;
  std::string phase;  // "plan", "plan_review", "round", "review", "alignment"
  // Which session of this (role, phase) it is: the round number for "round"/"review", the draft
  // number for "plan"/"plan_review". Stable across a resumed run (scripted backends key on it).
  int index = 0;
  std::string system_prompt;        // kda's standing instructions for this role
  std::string prompt;               // the session's task (round contract, evidence...)
  std::filesystem::path workspace;  // the agent's working directory
  // Paths the agent may write (workspace solution files and a scratch dir); empty for reviewers.
  std::vector<std::filesystem::path> writable;
  // Paths the agent may read besides the workspace (sealed task pack, plan, evidence).
  std::vector<std::filesystem::path> readable;
  ToolHost* tools = nullptr;  // kda's tools (evaluate, wiki, ledger, finish_round...)
  std::chrono::seconds timeout{1800};
  int max_turns = 60;  // model turns before the session is cut
  // Called for each event as it happens (audit log, live status). May be empty.
  std::function<void(const AgentEvent&)> on_event;
};

struct SessionResult {
  std::string final_text;  // the agent's last message (reviewer verdicts live here)
  Usage usage;
  int turns = 0;
  bool timed_out = false;
  std::vector<AgentEvent> events;  // everything on_event saw
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "scripted", "anthropic", "openai", "claude-code", "codex"
  // Errors are the backend's own failures after kda's retries (API down, CLI missing); what the
  // agent does wrong is data in the result.
  virtual Result<SessionResult> run_session(const SessionRequest& request) = 0;
};

}  // namespace kda::agent
