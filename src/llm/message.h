// The provider-neutral conversation model the wire formats translate to and from: messages made of
// text, tool_use and tool_result blocks; one request; one decoded response.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/backend.h"
#include "agent/tool.h"

namespace kda::llm {

enum class BlockType { kText, kToolUse, kToolResult };

struct ContentBlock {
  BlockType type = BlockType::kText;
  std::string text;                                 // kText; kToolResult: what the tool returned
  std::string id;                                   // kToolUse: the call id; kToolResult: the call it answers
  std::string name;                                 // kToolUse
  nlohmann::json input = nlohmann::json::object();  // kToolUse arguments
  bool input_invalid = false;                       // kToolUse: the model's arguments were not a JSON object
  bool is_error = false;                            // kToolResult

  static ContentBlock make_text(std::string text);
  static ContentBlock make_tool_use(std::string id, std::string name, nlohmann::json input);
  static ContentBlock make_tool_result(std::string tool_use_id, std::string text, bool is_error);
};

enum class MessageRole { kUser, kAssistant };

struct Message {
  MessageRole role = MessageRole::kUser;
  std::vector<ContentBlock> blocks;
};

struct Request {
  std::string model;
  std::string system;
  std::vector<Message> messages;
  std::vector<agent::ToolSpec> tools;
  int max_tokens = 8192;
  std::optional<double> temperature;
};

enum class StopReason { kEndTurn, kToolUse, kMaxTokens };
const char* stop_reason_name(StopReason reason);  // "end_turn" | "tool_use" | "max_tokens"

struct Response {
  std::vector<ContentBlock> blocks;
  StopReason stop_reason = StopReason::kEndTurn;
  agent::Usage usage;      // tokens of this response (requests/cost filled by the client)
  std::string request_id;  // provider request id header, else the message/response id
  std::string model;       // the model the server says answered
};

// All text blocks joined with "\n" (the assistant's visible message).
std::string response_text(const std::vector<ContentBlock>& blocks);

}  // namespace kda::llm
