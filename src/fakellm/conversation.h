// What the fake server needs to know about a request, whatever its wire format: the user text
// (scenario choice), the number of assistant turns so far (step choice), the tools offered, the
// tool results the agent just saw, and the working directory the client announced.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kda::fakellm {

enum class Format { kAnthropic, kChat, kResponses };
const char* format_name(Format format);  // "anthropic" | "chat" | "responses"

struct OfferedTool {
  std::string name;     // what scenarios match against: namespace + name for namespaced tools
  bool custom = false;  // Responses freeform tool ({"type":"custom"}), e.g. Codex's apply_patch
  nlohmann::json schema = nlohmann::json::object();  // JSON schema of the arguments (may be empty)
  bool search = false;    // a tool-search tool (Codex "tool_search", Claude Code "ToolSearch")
  std::string ns;         // Responses namespace ("" = none); the call then names call_name in it
  std::string call_name;  // the name inside the namespace ("" = name)
};

struct ToolResult {
  std::string id;
  std::string text;
  bool is_error = false;
};

struct Conversation {
  Format format = Format::kAnthropic;
  std::string model;
  bool stream = false;
  bool include_usage = false;  // chat: stream_options.include_usage
  std::string user_text;       // user messages' text, joined with "\n"
  // Runs of consecutive assistant items = the step index. Runs made only of tool-search calls
  // (which the fake itself issues to load deferred tools) do not count.
  int assistant_turns = 0;
  int all_turns = 0;  // every run, search runs included (tool-call ids derive from it)
  std::vector<OfferedTool> tools;
  std::vector<ToolResult> last_results;  // tool results after the last assistant turn
  std::optional<std::string> workdir;    // "Primary working directory:" or <cwd>
};

// Never fails: unknown or odd-shaped fields are ignored.
Conversation read_conversation(Format format, const nlohmann::json& body);

// Finds "Primary working directory: X" or "<cwd>X</cwd>" in text.
std::optional<std::string> find_workdir(const std::string& text);

}  // namespace kda::fakellm
