#include "llm/openai_responses_format.h"

#include <map>

#include "llm/json_util.h"
#include "llm/openai_chat_format.h"

namespace kda::llm {

using nlohmann::json;
using namespace detail;

std::string OpenAiResponsesFormat::url(const Endpoint& endpoint) const { return openai_base(endpoint) + "/responses"; }

std::vector<std::pair<std::string, std::string>> OpenAiResponsesFormat::headers(const Endpoint& endpoint) const {
  return openai_headers(endpoint);
}

json OpenAiResponsesFormat::encode_body(const Request& request, const Endpoint&) const {
  json input = json::array();
  for (const auto& m : request.messages) {
    for (const auto& b : m.blocks) {
      switch (b.type) {
        case BlockType::kText:
          if (b.text.empty()) break;
          if (m.role == MessageRole::kUser) {
            input.push_back({{"type", "message"},
                             {"role", "user"},
                             {"content", json::array({{{"type", "input_text"}, {"text", b.text}}})}});
          } else {
            input.push_back({{"type", "message"},
                             {"role", "assistant"},
                             {"content", json::array({{{"type", "output_text"}, {"text", b.text}}})}});
          }
          break;
        case BlockType::kToolUse:
          input.push_back(
              {{"type", "function_call"}, {"call_id", b.id}, {"name", b.name}, {"arguments", b.input.dump()}});
          break;
        case BlockType::kToolResult:
          input.push_back({{"type", "function_call_output"},
                           {"call_id", b.id},
                           {"output", b.is_error ? "ERROR: " + b.text : b.text}});
          break;
      }
    }
  }
  json body = {{"model", request.model},
               {"input", input},
               {"stream", true},
               {"store", false},
               {"max_output_tokens", request.max_tokens}};
  if (!request.system.empty()) body["instructions"] = request.system;
  if (request.temperature) body["temperature"] = *request.temperature;
  if (!request.tools.empty()) {
    json tools = json::array();
    for (const auto& t : request.tools) {
      tools.push_back({{"type", "function"},
                       {"name", t.name},
                       {"description", t.description},
                       {"parameters", t.input_schema.is_object() ? t.input_schema : json{{"type", "object"}}}});
    }
    body["tools"] = std::move(tools);
  }
  return body;
}

namespace {

class ResponsesDecoder final : public StreamDecoder {
 public:
  Status on_event(const SseEvent& ev) override {
    if (done_) return Status::ok_status();
    json data = json::parse(ev.data, nullptr, false);
    if (data.is_discarded() || !data.is_object()) {
      return Status::failed("openai responses stream: malformed JSON in '" + ev.event + "' event");
    }
    std::string type = str(data, "type");
    if (type.empty()) type = ev.event;
    try {
      return handle(type, data);
    } catch (const json::exception& e) {
      return Status::failed("openai responses stream: unexpected '" + type + "' event: " + e.what());
    }
  }

  bool complete() const override { return done_; }

  Result<Response> finish() override {
    if (!done_) return Status::failed("openai responses stream cut before response.completed");
    Response r;
    r.request_id = id_;
    r.model = model_;
    r.usage = usage_;
    bool any_call = false;
    // Items by output index; when no output_item.done arrived, the final response's output.
    std::map<int64_t, json> items = items_;
    if (items.empty() && final_output_.is_array()) {
      for (size_t i = 0; i < final_output_.size(); ++i) items[static_cast<int64_t>(i)] = final_output_[i];
    }
    for (const auto& [index, item] : items) {
      std::string t = str(item, "type");
      if (t == "message") {
        std::string text;
        const json& content = obj(item, "content");
        if (content.is_array()) {
          for (const auto& part : content) {
            if (str(part, "type") == "output_text") text += str(part, "text");
          }
        }
        if (!text.empty()) r.blocks.push_back(ContentBlock::make_text(std::move(text)));
      } else if (t == "function_call") {
        json input;
        bool ok = parse_arguments(str(item, "arguments"), input);
        std::string call_id = str(item, "call_id");
        if (call_id.empty()) call_id = str(item, "id");
        ContentBlock b = ContentBlock::make_tool_use(call_id, str(item, "name"), std::move(input));
        b.input_invalid = !ok;
        r.blocks.push_back(std::move(b));
        any_call = true;
      }
    }
    if (incomplete_reason_ == "max_output_tokens") {
      r.stop_reason = StopReason::kMaxTokens;
    } else {
      r.stop_reason = any_call ? StopReason::kToolUse : StopReason::kEndTurn;
    }
    return r;
  }

 private:
  void read_response(const json& resp) {
    if (!resp.is_object()) return;
    if (!str(resp, "id").empty()) id_ = str(resp, "id");
    if (!str(resp, "model").empty()) model_ = str(resp, "model");
    const json& u = obj(resp, "usage");
    if (u.is_object()) {
      int64_t cached = num(obj(u, "input_tokens_details"), "cached_tokens");
      usage_.input_tokens = num(u, "input_tokens") - cached;
      usage_.cache_read_tokens = cached;
      usage_.output_tokens = num(u, "output_tokens");
    }
    if (obj(resp, "output").is_array()) final_output_ = obj(resp, "output");
    incomplete_reason_ = str(obj(resp, "incomplete_details"), "reason");
  }

  Status handle(const std::string& type, const json& data) {
    if (type == "response.created" || type == "response.in_progress") {
      read_response(obj(data, "response"));
    } else if (type == "response.output_item.done") {
      const json& item = obj(data, "item");
      int64_t index = data.contains("output_index") ? num(data, "output_index") : static_cast<int64_t>(items_.size());
      if (item.is_object()) items_[index] = item;
    } else if (type == "response.completed" || type == "response.incomplete") {
      read_response(obj(data, "response"));
      done_ = true;
    } else if (type == "response.failed") {
      const json& e = obj(obj(data, "response"), "error");
      return Status::failed("openai responses stream: response.failed: " + str(e, "code") + ": " + str(e, "message"));
    } else if (type == "error") {
      std::string msg = str(data, "message");
      if (msg.empty()) msg = str(obj(data, "error"), "message");
      return Status::failed("openai responses stream error: " + str(data, "code") + ": " + msg);
    }
    return Status::ok_status();
  }

  bool done_ = false;
  std::string id_, model_, incomplete_reason_;
  std::map<int64_t, json> items_;
  json final_output_;
  agent::Usage usage_;
};

}  // namespace

std::unique_ptr<StreamDecoder> OpenAiResponsesFormat::make_decoder() const {
  return std::make_unique<ResponsesDecoder>();
}

}  // namespace kda::llm
