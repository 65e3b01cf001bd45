// Test helpers: well-formed SSE bodies in each wire format (text and/or tool calls), used by the
// llm and api backend tests. Not part of the library.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm/wire_format.h"

namespace kda::llm::testing {

struct ScriptedCall {
  std::string id, name;
  nlohmann::json input;
};

inline std::string sse(const std::string& event, const nlohmann::json& data) {
  return (event.empty() ? "" : "event: " + event + "\n") + "data: " + data.dump() + "\n\n";
}

// Anthropic: tool input split into 5-byte input_json_delta fragments.
inline std::string anthropic_stream(const std::string& text, const std::vector<ScriptedCall>& calls, int in = 10,
                                    int out = 5) {
  using nlohmann::json;
  std::string s = sse("message_start", {{"type", "message_start"},
                                        {"message",
                                         {{"id", "msg_1"},
                                          {"type", "message"},
                                          {"role", "assistant"},
                                          {"model", "claude-test"},
                                          {"content", json::array()},
                                          {"usage",
                                           {{"input_tokens", in},
                                            {"output_tokens", 1},
                                            {"cache_read_input_tokens", 3},
                                            {"cache_creation_input_tokens", 2}}}}}});
  s += sse("ping", {{"type", "ping"}});
  int index = 0;
  if (!text.empty()) {
    s += sse("content_block_start",
             {{"type", "content_block_start"}, {"index", index}, {"content_block", {{"type", "text"}, {"text", ""}}}});
    for (size_t i = 0; i < text.size(); i += 4) {
      s += sse("content_block_delta", {{"type", "content_block_delta"},
                                       {"index", index},
                                       {"delta", {{"type", "text_delta"}, {"text", text.substr(i, 4)}}}});
    }
    s += sse("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
    ++index;
  }
  for (const auto& c : calls) {
    s += sse("content_block_start",
             {{"type", "content_block_start"},
              {"index", index},
              {"content_block", {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", json::object()}}}});
    std::string args = c.input.dump();
    for (size_t i = 0; i < args.size(); i += 5) {
      s += sse("content_block_delta", {{"type", "content_block_delta"},
                                       {"index", index},
                                       {"delta", {{"type", "input_json_delta"}, {"partial_json", args.substr(i, 5)}}}});
    }
    s += sse("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
    ++index;
  }
  s += sse("message_delta",
           {{"type", "message_delta"},
            {"delta", {{"stop_reason", calls.empty() ? "end_turn" : "tool_use"}, {"stop_sequence", nullptr}}},
            {"usage", {{"output_tokens", out}}}});
  s += sse("message_stop", {{"type", "message_stop"}});
  return s;
}

inline std::string chat_stream(const std::string& text, const std::vector<ScriptedCall>& calls, int in = 10,
                               int out = 5) {
  using nlohmann::json;
  auto chunk = [](json delta, json finish) {
    return sse("", {{"id", "chatcmpl-1"},
                    {"object", "chat.completion.chunk"},
                    {"model", "gpt-test"},
                    {"choices", json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}})}});
  };
  std::string s = chunk({{"role", "assistant"}, {"content", ""}}, nullptr);
  for (size_t i = 0; i < text.size(); i += 4) s += chunk({{"content", text.substr(i, 4)}}, nullptr);
  for (size_t k = 0; k < calls.size(); ++k) {
    const auto& c = calls[k];
    s += chunk({{"tool_calls", json::array({{{"index", k},
                                             {"id", c.id},
                                             {"type", "function"},
                                             {"function", {{"name", c.name}, {"arguments", ""}}}}})}},
               nullptr);
    std::string args = c.input.dump();
    for (size_t i = 0; i < args.size(); i += 5) {
      s += chunk({{"tool_calls", json::array({{{"index", k}, {"function", {{"arguments", args.substr(i, 5)}}}}})}},
                 nullptr);
    }
  }
  s += chunk(json::object(), calls.empty() ? "stop" : "tool_calls");
  s += sse("", {{"id", "chatcmpl-1"},
                {"object", "chat.completion.chunk"},
                {"choices", json::array()},
                {"usage",
                 {{"prompt_tokens", in + 3},
                  {"completion_tokens", out},
                  {"total_tokens", in + 3 + out},
                  {"prompt_tokens_details", {{"cached_tokens", 3}}}}}});
  s += "data: [DONE]\n\n";
  return s;
}

inline std::string responses_stream(const std::string& text, const std::vector<ScriptedCall>& calls, int in = 10,
                                    int out = 5) {
  using nlohmann::json;
  json output = json::array();
  std::string s =
      sse("response.created", {{"type", "response.created"},
                               {"response", {{"id", "resp_1"}, {"status", "in_progress"}, {"output", json::array()}}}});
  int index = 0;
  if (!text.empty()) {
    json item = {{"type", "message"},
                 {"id", "msg_1"},
                 {"role", "assistant"},
                 {"status", "completed"},
                 {"content", json::array({{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}}})}};
    s += sse("response.output_item.added",
             {{"type", "response.output_item.added"},
              {"output_index", index},
              {"item", {{"type", "message"}, {"id", "msg_1"}, {"content", json::array()}}}});
    s += sse("response.output_text.delta",
             {{"type", "response.output_text.delta"}, {"output_index", index}, {"item_id", "msg_1"}, {"delta", text}});
    s += sse("response.output_item.done",
             {{"type", "response.output_item.done"}, {"output_index", index}, {"item", item}});
    output.push_back(item);
    ++index;
  }
  for (const auto& c : calls) {
    json item = {{"type", "function_call"}, {"id", "fc_" + c.id},          {"call_id", c.id},
                 {"name", c.name},          {"arguments", c.input.dump()}, {"status", "completed"}};
    s += sse("response.function_call_arguments.delta",
             {{"type", "response.function_call_arguments.delta"}, {"output_index", index}, {"delta", c.input.dump()}});
    s += sse("response.output_item.done",
             {{"type", "response.output_item.done"}, {"output_index", index}, {"item", item}});
    output.push_back(item);
    ++index;
  }
  s += sse("response.completed", {{"type", "response.completed"},
                                  {"response",
                                   {{"id", "resp_1"},
                                    {"status", "completed"},
                                    {"model", "gpt-test"},
                                    {"output", output},
                                    {"usage",
                                     {{"input_tokens", in + 3},
                                      {"input_tokens_details", {{"cached_tokens", 3}}},
                                      {"output_tokens", out},
                                      {"total_tokens", in + 3 + out}}}}}});
  return s;
}

inline std::string stream_for(ProviderKind kind, const std::string& text, const std::vector<ScriptedCall>& calls,
                              int in = 10, int out = 5) {
  switch (kind) {
    case ProviderKind::kAnthropic: return anthropic_stream(text, calls, in, out);
    case ProviderKind::kOpenAiChat: return chat_stream(text, calls, in, out);
    case ProviderKind::kOpenAiResponses: return responses_stream(text, calls, in, out);
  }
  return {};
}

}  // namespace kda::llm::testing
