#include "llm/anthropic_format.h"

#include <map>

#include "llm/json_util.h"

namespace kda::llm {

using nlohmann::json;
using namespace detail;

std::string AnthropicFormat::url(const Endpoint& endpoint) const {
  std::string base = trim_slash(endpoint.base_url.empty() ? "https://api.anthropic.com" : endpoint.base_url);
  if (base.size() >= 3 && base.compare(base.size() - 3, 3, "/v1") == 0) base.resize(base.size() - 3);
  return base + "/v1/messages";
}

std::vector<std::pair<std::string, std::string>> AnthropicFormat::headers(const Endpoint& endpoint) const {
  std::vector<std::pair<std::string, std::string>> h = {
      {"content-type", "application/json"},
      {"accept", "text/event-stream"},
      {"anthropic-version", kVersion},
  };
  if (!endpoint.api_key.empty()) h.emplace_back("x-api-key", endpoint.api_key);
  return h;
}

json AnthropicFormat::encode_body(const Request& request, const Endpoint& endpoint) const {
  json messages = json::array();
  for (const auto& m : request.messages) {
    json content = json::array();
    for (const auto& b : m.blocks) {
      switch (b.type) {
        case BlockType::kText:
          if (!b.text.empty()) content.push_back({{"type", "text"}, {"text", b.text}});
          break;
        case BlockType::kToolUse:
          content.push_back({{"type", "tool_use"},
                             {"id", b.id},
                             {"name", b.name},
                             {"input", b.input.is_object() ? b.input : json::object()}});
          break;
        case BlockType::kToolResult: {
          json r = {{"type", "tool_result"}, {"tool_use_id", b.id}, {"content", b.text}};
          if (b.is_error) r["is_error"] = true;
          content.push_back(std::move(r));
          break;
        }
      }
    }
    if (content.empty()) content.push_back({{"type", "text"}, {"text", "(empty)"}});
    messages.push_back({{"role", m.role == MessageRole::kUser ? "user" : "assistant"}, {"content", content}});
  }
  json body = {{"model", request.model}, {"max_tokens", request.max_tokens}, {"messages", messages}, {"stream", true}};
  if (!request.system.empty()) {
    if (endpoint.prompt_cache) {
      body["system"] =
          json::array({{{"type", "text"}, {"text", request.system}, {"cache_control", {{"type", "ephemeral"}}}}});
    } else {
      body["system"] = request.system;
    }
  }
  if (endpoint.prompt_cache && !messages.empty()) {
    // The newest block is the end of the cached prefix; the next turn reads all of it back.
    body["messages"].back()["content"].back()["cache_control"] = {{"type", "ephemeral"}};
  }
  if (request.temperature) body["temperature"] = *request.temperature;
  if (!request.tools.empty()) {
    json tools = json::array();
    for (const auto& t : request.tools) {
      tools.push_back({{"name", t.name},
                       {"description", t.description},
                       {"input_schema", t.input_schema.is_object() ? t.input_schema : json{{"type", "object"}}}});
    }
    body["tools"] = std::move(tools);
  }
  return body;
}

namespace {

class AnthropicDecoder final : public StreamDecoder {
 public:
  Status on_event(const SseEvent& ev) override {
    json data = json::parse(ev.data, nullptr, false);
    if (data.is_discarded() || !data.is_object()) {
      return Status::failed("anthropic stream: malformed JSON in '" + ev.event + "' event");
    }
    std::string type = str(data, "type");
    if (type.empty()) type = ev.event;
    try {
      return handle(type, data);
    } catch (const json::exception& e) {
      return Status::failed("anthropic stream: unexpected '" + type + "' event: " + e.what());
    }
  }

  bool complete() const override { return stopped_; }

  Result<Response> finish() override {
    if (!stopped_) {
      return Status::failed(started_ ? "anthropic stream cut before message_stop"
                                     : "anthropic stream ended before message_start");
    }
    Response r;
    r.request_id = id_;
    r.model = model_;
    r.usage = usage_;
    for (auto& [index, blk] : blocks_) {
      if (blk.type == BlockType::kToolUse) {
        json input;
        blk.input_invalid = !parse_arguments(blk.text, input);
        blk.input = std::move(input);
        blk.text.clear();
      }
      r.blocks.push_back(std::move(blk));
    }
    if (stop_reason_ == "tool_use") {
      r.stop_reason = StopReason::kToolUse;
    } else if (stop_reason_ == "max_tokens") {
      r.stop_reason = StopReason::kMaxTokens;
    } else {
      r.stop_reason = StopReason::kEndTurn;
    }
    return r;
  }

 private:
  void read_usage(const json& u) {
    if (!u.is_object()) return;
    if (u.contains("input_tokens")) usage_.input_tokens = num(u, "input_tokens");
    if (u.contains("output_tokens")) usage_.output_tokens = num(u, "output_tokens");
    if (u.contains("cache_read_input_tokens")) usage_.cache_read_tokens = num(u, "cache_read_input_tokens");
    if (u.contains("cache_creation_input_tokens")) usage_.cache_write_tokens = num(u, "cache_creation_input_tokens");
  }

  Status handle(const std::string& type, const json& data) {
    if (type == "message_start") {
      started_ = true;
      const json& m = obj(data, "message");
      id_ = str(m, "id");
      model_ = str(m, "model");
      read_usage(obj(m, "usage"));
    } else if (type == "content_block_start") {
      int index = static_cast<int>(num(data, "index"));
      const json& cb = obj(data, "content_block");
      std::string bt = str(cb, "type");
      ContentBlock blk;
      if (bt == "tool_use") {
        blk.type = BlockType::kToolUse;
        blk.id = str(cb, "id");
        blk.name = str(cb, "name");
        // Input arrives as input_json_delta fragments; a non-empty start input is a whole object.
        const json& in = obj(cb, "input");
        if (in.is_object() && !in.empty()) blk.text = in.dump();
      } else if (bt == "text") {
        blk.type = BlockType::kText;
        blk.text = str(cb, "text");
      } else {
        return Status::ok_status();  // thinking and other block types are not part of the model
      }
      blocks_[index] = std::move(blk);
    } else if (type == "content_block_delta") {
      int index = static_cast<int>(num(data, "index"));
      auto it = blocks_.find(index);
      if (it == blocks_.end()) return Status::ok_status();
      const json& d = obj(data, "delta");
      std::string dt = str(d, "type");
      if (dt == "text_delta" && it->second.type == BlockType::kText) {
        it->second.text += str(d, "text");
      } else if (dt == "input_json_delta" && it->second.type == BlockType::kToolUse) {
        it->second.text += str(d, "partial_json");
      }
    } else if (type == "message_delta") {
      const json& d = obj(data, "delta");
      if (!str(d, "stop_reason").empty()) stop_reason_ = str(d, "stop_reason");
      read_usage(obj(data, "usage"));
    } else if (type == "message_stop") {
      if (!started_) return Status::failed("anthropic stream: message_stop before message_start");
      stopped_ = true;
    } else if (type == "error") {
      const json& e = obj(data, "error");
      return Status::failed("anthropic stream error: " + str(e, "type") + ": " + str(e, "message"));
    }
    return Status::ok_status();
  }

  bool started_ = false;
  bool stopped_ = false;
  std::string id_, model_, stop_reason_;
  agent::Usage usage_;
  std::map<int, ContentBlock> blocks_;  // by stream index; tool_use input JSON text kept in .text
};

}  // namespace

std::unique_ptr<StreamDecoder> AnthropicFormat::make_decoder() const { return std::make_unique<AnthropicDecoder>(); }

}  // namespace kda::llm
