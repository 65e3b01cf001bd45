#include "llm/openai_chat_format.h"

#include <map>

#include "llm/json_util.h"

namespace kda::llm {

using nlohmann::json;
using namespace detail;

std::string openai_base(const Endpoint& endpoint) {
  return trim_slash(endpoint.base_url.empty() ? "https://api.openai.com/v1" : endpoint.base_url);
}

std::vector<std::pair<std::string, std::string>> openai_headers(const Endpoint& endpoint) {
  std::vector<std::pair<std::string, std::string>> h = {
      {"content-type", "application/json"},
      {"accept", "text/event-stream"},
  };
  if (!endpoint.api_key.empty()) h.emplace_back("authorization", "Bearer " + endpoint.api_key);
  return h;
}

std::string OpenAiChatFormat::url(const Endpoint& endpoint) const {
  return openai_base(endpoint) + "/chat/completions";
}

std::vector<std::pair<std::string, std::string>> OpenAiChatFormat::headers(const Endpoint& endpoint) const {
  return openai_headers(endpoint);
}

json OpenAiChatFormat::encode_body(const Request& request, const Endpoint& endpoint) const {
  json messages = json::array();
  if (!request.system.empty()) messages.push_back({{"role", "system"}, {"content", request.system}});
  for (const auto& m : request.messages) {
    if (m.role == MessageRole::kAssistant) {
      std::string text = response_text(m.blocks);
      json msg = {{"role", "assistant"}, {"content", text.empty() ? json(nullptr) : json(text)}};
      json calls = json::array();
      for (const auto& b : m.blocks) {
        if (b.type != BlockType::kToolUse) continue;
        calls.push_back(
            {{"id", b.id}, {"type", "function"}, {"function", {{"name", b.name}, {"arguments", b.input.dump()}}}});
      }
      if (!calls.empty()) msg["tool_calls"] = std::move(calls);
      messages.push_back(std::move(msg));
      continue;
    }
    // User turn: tool results become "tool" messages (the format has no error flag, so an error
    // is said in the text); text becomes one user message after them.
    std::string text;
    for (const auto& b : m.blocks) {
      if (b.type == BlockType::kToolResult) {
        messages.push_back(
            {{"role", "tool"}, {"tool_call_id", b.id}, {"content", b.is_error ? "ERROR: " + b.text : b.text}});
      } else if (b.type == BlockType::kText && !b.text.empty()) {
        if (!text.empty()) text += "\n";
        text += b.text;
      }
    }
    if (!text.empty()) messages.push_back({{"role", "user"}, {"content", text}});
  }
  json body = {{"model", request.model},
               {"messages", messages},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  body[endpoint.max_tokens_field.empty() ? "max_completion_tokens" : endpoint.max_tokens_field] = request.max_tokens;
  if (request.temperature) body["temperature"] = *request.temperature;
  if (!request.tools.empty()) {
    json tools = json::array();
    for (const auto& t : request.tools) {
      tools.push_back({{"type", "function"},
                       {"function",
                        {{"name", t.name},
                         {"description", t.description},
                         {"parameters", t.input_schema.is_object() ? t.input_schema : json{{"type", "object"}}}}}});
    }
    body["tools"] = std::move(tools);
  }
  return body;
}

namespace {

class ChatDecoder final : public StreamDecoder {
 public:
  Status on_event(const SseEvent& ev) override {
    if (done_) return Status::ok_status();
    std::string_view d = ev.data;
    while (!d.empty() && (d.back() == ' ' || d.back() == '\n')) d.remove_suffix(1);
    if (d == "[DONE]") {
      done_ = true;
      return Status::ok_status();
    }
    json data = json::parse(ev.data, nullptr, false);
    if (data.is_discarded() || !data.is_object()) {
      return Status::failed("openai chat stream: malformed JSON chunk");
    }
    try {
      return handle(data);
    } catch (const json::exception& e) {
      return Status::failed(std::string("openai chat stream: unexpected chunk: ") + e.what());
    }
  }

  bool complete() const override { return done_; }

  Result<Response> finish() override {
    if (!done_) return Status::failed("openai chat stream cut before [DONE]");
    Response r;
    r.request_id = id_;
    r.model = model_;
    r.usage = usage_;
    if (!text_.empty()) r.blocks.push_back(ContentBlock::make_text(text_));
    for (auto& [index, call] : calls_) {
      json input;
      bool ok = parse_arguments(call.arguments, input);
      ContentBlock b = ContentBlock::make_tool_use(call.id.empty() ? "call_" + std::to_string(index) : call.id,
                                                   call.name, std::move(input));
      b.input_invalid = !ok;
      r.blocks.push_back(std::move(b));
    }
    if (finish_reason_ == "length") {
      r.stop_reason = StopReason::kMaxTokens;
    } else if (!calls_.empty()) {
      r.stop_reason = StopReason::kToolUse;  // "tool_calls" (some servers say "stop" anyway)
    } else {
      r.stop_reason = StopReason::kEndTurn;
    }
    return r;
  }

 private:
  struct Call {
    std::string id, name, arguments;
  };

  Status handle(const json& data) {
    if (data.contains("error") && data["error"].is_object()) {
      return Status::failed("openai chat stream error: " + str(data["error"], "message"));
    }
    if (id_.empty()) id_ = str(data, "id");
    if (model_.empty()) model_ = str(data, "model");
    const json& u = obj(data, "usage");
    if (u.is_object()) {
      int64_t prompt = num(u, "prompt_tokens");
      int64_t cached = num(obj(u, "prompt_tokens_details"), "cached_tokens");
      usage_.input_tokens = prompt - cached;  // kda counts uncached input; cached is a cache read
      usage_.cache_read_tokens = cached;
      usage_.output_tokens = num(u, "completion_tokens");
    }
    const json& choices = obj(data, "choices");
    if (!choices.is_array()) return Status::ok_status();
    for (const auto& c : choices) {
      if (num(c, "index") != 0) continue;  // n = 1
      const json& delta = obj(c, "delta");
      text_ += str(delta, "content");
      const json& tcs = obj(delta, "tool_calls");
      if (tcs.is_array()) {
        for (const auto& tc : tcs) {
          int index = tc.contains("index") ? static_cast<int>(num(tc, "index")) : static_cast<int>(calls_.size());
          Call& call = calls_[index];
          if (!str(tc, "id").empty()) call.id = str(tc, "id");
          const json& fn = obj(tc, "function");
          if (call.name.empty()) call.name = str(fn, "name");  // sent once, with the id
          call.arguments += str(fn, "arguments");
        }
      }
      if (!str(c, "finish_reason").empty()) finish_reason_ = str(c, "finish_reason");
    }
    return Status::ok_status();
  }

  bool done_ = false;
  std::string id_, model_, text_, finish_reason_;
  std::map<int, Call> calls_;
  agent::Usage usage_;
};

}  // namespace

std::unique_ptr<StreamDecoder> OpenAiChatFormat::make_decoder() const { return std::make_unique<ChatDecoder>(); }

}  // namespace kda::llm
