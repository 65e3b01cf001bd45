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
  std::string name;
  bool custom = false;  // Responses freeform tool ({"type":"custom"}), e.g. Codex's apply_patch
  nlohmann::json schema = nlohmann::json::object();  // JSON schema of the arguments (may be empty)
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
  bool include_usage = false;       // chat: stream_options.include_usage
  std::string user_text;            // user messages' text, joined with "\n"
  int assistant_turns = 0;          // runs of consecutive assistant items = the step index
  std::vector<OfferedTool> tools;
  std::vector<ToolResult> last_results;  // tool results after the last assistant turn
  std::optional<std::string> workdir;    // "Primary working directory:" or <cwd>
};

// Never fails: unknown or odd-shaped fields are ignored.
Conversation read_conversation(Format format, const nlohmann::json& body);

// Finds "Primary working directory: X" or "<cwd>X</cwd>" in text.
std::optional<std::string> find_workdir(const std::string& text);

}  // namespace kda::fakellm
