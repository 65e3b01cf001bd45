#include "llm/message.h"

namespace kda::llm {

ContentBlock ContentBlock::make_text(std::string text) {
  ContentBlock b;
  b.type = BlockType::kText;
  b.text = std::move(text);
  return b;
}

ContentBlock ContentBlock::make_tool_use(std::string id, std::string name, nlohmann::json input) {
  ContentBlock b;
  b.type = BlockType::kToolUse;
  b.id = std::move(id);
  b.name = std::move(name);
  b.input = std::move(input);
  return b;
}

ContentBlock ContentBlock::make_tool_result(std::string tool_use_id, std::string text, bool is_error) {
  ContentBlock b;
  b.type = BlockType::kToolResult;
  b.id = std::move(tool_use_id);
  b.text = std::move(text);
  b.is_error = is_error;
  return b;
}

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kEndTurn: return "end_turn";
    case StopReason::kToolUse: return "tool_use";
    case StopReason::kMaxTokens: return "max_tokens";
  }
  return "end_turn";
}

std::string response_text(const std::vector<ContentBlock>& blocks) {
  std::string out;
  for (const auto& b : blocks) {
    if (b.type != BlockType::kText || b.text.empty()) continue;
    if (!out.empty()) out += "\n";
    out += b.text;
  }
  return out;
}

}  // namespace kda::llm
