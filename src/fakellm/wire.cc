#include "fakellm/wire.h"

#include <ctime>

namespace kda::fakellm {
namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string call_text(const ToolCall& c) { return c.input.is_string() ? c.input.get<std::string>() : dump(c.input); }

int output_tokens(const Reply& r) {
  size_t bytes = r.text.size();
  for (const ToolCall& c : r.calls) bytes += c.name.size() + call_text(c).size();
  return static_cast<int>(bytes / 4) + 1;
}

int input_tokens(const RenderContext& ctx) { return static_cast<int>(ctx.request_bytes / 4) + 1; }

std::string tool_id(const char* prefix, const RenderContext& ctx, size_t i) {
  return std::string(prefix) + "_fake_" + std::to_string(ctx.step) + "_" + std::to_string(i);
}

// ---- Anthropic Messages ----

json anthropic_usage(const RenderContext& ctx, int out) {
  return {{"input_tokens", input_tokens(ctx)},
          {"output_tokens", out},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", 0}};
}

std::vector<SseEvent> anthropic_stream(const Reply& r, const RenderContext& ctx, int* first_delta) {
  std::vector<SseEvent> ev;
  auto add = [&](const char* type, json data) {
    data["type"] = type;
    ev.push_back({type, dump(data)});
  };
  add("message_start", {{"message",
                         {{"id", "msg_fake_" + std::to_string(ctx.seq)},
                          {"type", "message"},
                          {"role", "assistant"},
                          {"model", ctx.model},
                          {"content", json::array()},
                          {"stop_reason", nullptr},
                          {"stop_sequence", nullptr},
                          {"usage", anthropic_usage(ctx, 1)}}}});
  int index = 0;
  if (!r.text.empty()) {
    add("content_block_start", {{"index", index}, {"content_block", {{"type", "text"}, {"text", ""}}}});
    for (const std::string& piece : split_utf8(r.text, ctx.chunk_chars)) {
      if (*first_delta < 0) *first_delta = static_cast<int>(ev.size());
      add("content_block_delta", {{"index", index}, {"delta", {{"type", "text_delta"}, {"text", piece}}}});
    }
    add("content_block_stop", {{"index", index}});
    ++index;
  }
  for (size_t i = 0; i < r.calls.size(); ++i, ++index) {
    const ToolCall& c = r.calls[i];
    add("content_block_start",
        {{"index", index},
         {"content_block",
          {{"type", "tool_use"}, {"id", tool_id("toolu", ctx, i)}, {"name", c.name}, {"input", json::object()}}}});
    for (const std::string& piece : split_utf8(dump(c.input), ctx.chunk_chars)) {
      if (*first_delta < 0) *first_delta = static_cast<int>(ev.size());
      add("content_block_delta",
          {{"index", index}, {"delta", {{"type", "input_json_delta"}, {"partial_json", piece}}}});
    }
    add("content_block_stop", {{"index", index}});
  }
  add("message_delta",
      {{"delta", {{"stop_reason", r.calls.empty() ? "end_turn" : "tool_use"}, {"stop_sequence", nullptr}}},
       {"usage", {{"output_tokens", output_tokens(r)}}}});
  add("message_stop", json::object());
  return ev;
}

json anthropic_body(const Reply& r, const RenderContext& ctx) {
  json content = json::array();
  if (!r.text.empty()) content.push_back({{"type", "text"}, {"text", r.text}});
  for (size_t i = 0; i < r.calls.size(); ++i) {
    content.push_back({{"type", "tool_use"},
                       {"id", tool_id("toolu", ctx, i)},
                       {"name", r.calls[i].name},
                       {"input", r.calls[i].input}});
  }
  return {{"id", "msg_fake_" + std::to_string(ctx.seq)},
          {"type", "message"},
          {"role", "assistant"},
          {"model", ctx.model},
          {"content", content},
          {"stop_reason", r.calls.empty() ? "end_turn" : "tool_use"},
          {"stop_sequence", nullptr},
          {"usage", anthropic_usage(ctx, output_tokens(r))}};
}

// ---- OpenAI chat completions ----

json chat_usage(const Reply& r, const RenderContext& ctx) {
  int in = input_tokens(ctx), out = output_tokens(r);
  return {{"prompt_tokens", in}, {"completion_tokens", out}, {"total_tokens", in + out}};
}

std::vector<SseEvent> chat_stream(const Reply& r, const RenderContext& ctx, int* first_delta) {
  std::vector<SseEvent> ev;
  long created = static_cast<long>(std::time(nullptr));
  auto chunk = [&](json delta, json finish) {
    json c = {
        {"id", "chatcmpl-fake-" + std::to_string(ctx.seq)},
        {"object", "chat.completion.chunk"},
        {"created", created},
        {"model", ctx.model},
        {"choices", json::array({{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", std::move(finish)}}})}};
    ev.push_back({"", dump(c)});
  };
  chunk({{"role", "assistant"}, {"content", ""}}, nullptr);
  for (const std::string& piece : split_utf8(r.text, ctx.chunk_chars)) {
    if (*first_delta < 0) *first_delta = static_cast<int>(ev.size());
    chunk({{"content", piece}}, nullptr);
  }
  for (size_t i = 0; i < r.calls.size(); ++i) {
    const ToolCall& c = r.calls[i];
    chunk({{"tool_calls", json::array({{{"index", i},
                                        {"id", tool_id("call", ctx, i)},
                                        {"type", "function"},
                                        {"function", {{"name", c.name}, {"arguments", ""}}}}})}},
          nullptr);
    for (const std::string& piece : split_utf8(call_text(c), ctx.chunk_chars)) {
      if (*first_delta < 0) *first_delta = static_cast<int>(ev.size());
      chunk({{"tool_calls", json::array({{{"index", i}, {"function", {{"arguments", piece}}}}})}}, nullptr);
    }
  }
  chunk(json::object(), r.calls.empty() ? "stop" : "tool_calls");
  if (ctx.include_usage) {
    json u = {{"id", "chatcmpl-fake-" + std::to_string(ctx.seq)},
              {"object", "chat.completion.chunk"},
              {"created", created},
              {"model", ctx.model},
              {"choices", json::array()},
              {"usage", chat_usage(r, ctx)}};
    ev.push_back({"", dump(u)});
  }
  ev.push_back({"", "[DONE]"});
  return ev;
}

json chat_body(const Reply& r, const RenderContext& ctx) {
  json message = {{"role", "assistant"},
                  {"content", r.text.empty() && !r.calls.empty() ? json(nullptr) : json(r.text)}};
  if (!r.calls.empty()) {
    json calls = json::array();
    for (size_t i = 0; i < r.calls.size(); ++i) {
      calls.push_back({{"id", tool_id("call", ctx, i)},
                       {"type", "function"},
                       {"function", {{"name", r.calls[i].name}, {"arguments", call_text(r.calls[i])}}}});
    }
    message["tool_calls"] = calls;
  }
  return {
      {"id", "chatcmpl-fake-" + std::to_string(ctx.seq)},
      {"object", "chat.completion"},
      {"created", static_cast<long>(std::time(nullptr))},
      {"model", ctx.model},
      {"choices",
       json::array({{{"index", 0}, {"message", message}, {"finish_reason", r.calls.empty() ? "stop" : "tool_calls"}}})},
      {"usage", chat_usage(r, ctx)}};
}

// ---- OpenAI Responses ----

json responses_usage(const Reply& r, const RenderContext& ctx) {
  int in = input_tokens(ctx), out = output_tokens(r);
  return {{"input_tokens", in},
          {"input_tokens_details", {{"cached_tokens", 0}}},
          {"output_tokens", out},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", in + out}};
}

json responses_items(const Reply& r, const RenderContext& ctx) {
  json items = json::array();
  if (!r.text.empty()) {
    items.push_back(
        {{"type", "message"},
         {"id", "msg_fake_" + std::to_string(ctx.step)},
         {"role", "assistant"},
         {"status", "completed"},
         {"content", json::array({{{"type", "output_text"}, {"text", r.text}, {"annotations", json::array()}}})}});
  }
  for (size_t i = 0; i < r.calls.size(); ++i) {
    const ToolCall& c = r.calls[i];
    if (c.search) {
      items.push_back({{"type", "tool_search_call"},
                       {"id", tool_id("tsc", ctx, i)},
                       {"call_id", tool_id("call", ctx, i)},
                       {"status", "completed"},
                       {"execution", "client"},
                       {"arguments", c.input}});
    } else if (c.custom) {
      items.push_back({{"type", "custom_tool_call"},
                       {"id", tool_id("ctc", ctx, i)},
                       {"call_id", tool_id("call", ctx, i)},
                       {"name", c.name},
                       {"input", call_text(c)},
                       {"status", "completed"}});
    } else {
      json item = {{"type", "function_call"}, {"id", tool_id("fc", ctx, i)}, {"call_id", tool_id("call", ctx, i)},
                   {"name", c.name},          {"arguments", call_text(c)},   {"status", "completed"}};
      if (!c.ns.empty()) item["namespace"] = c.ns;
      items.push_back(std::move(item));
    }
  }
  return items;
}

json responses_object(const Reply& r, const RenderContext& ctx, const char* status, json output, bool with_usage) {
  json o = {{"id", "resp_fake_" + std::to_string(ctx.seq)},
            {"object", "response"},
            {"created_at", static_cast<long>(std::time(nullptr))},
            {"status", status},
            {"model", ctx.model},
            {"output", std::move(output)}};
  o["usage"] = with_usage ? responses_usage(r, ctx) : json(nullptr);
  return o;
}

std::vector<SseEvent> responses_stream(const Reply& r, const RenderContext& ctx, int* first_delta) {
  std::vector<SseEvent> ev;
  int seqno = 0;
  auto add = [&](const char* type, json data) {
    data["type"] = type;
    data["sequence_number"] = seqno++;
    ev.push_back({type, dump(data)});
  };
  json items = responses_items(r, ctx);
  if (ctx.responses_full || ctx.responses_created) {
    add("response.created", {{"response", responses_object(r, ctx, "in_progress", json::array(), false)}});
  }
  if (ctx.responses_full) {
    add("response.in_progress", {{"response", responses_object(r, ctx, "in_progress", json::array(), false)}});
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const json& item = items[i];
    if (ctx.responses_full) {
      json start = item;
      start["status"] = "in_progress";
      std::string id = item["id"];
      if (item["type"] == "message") {
        start["content"] = json::array();
        add("response.output_item.added", {{"output_index", i}, {"item", start}});
        json part = {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}};
        add("response.content_part.added",
            {{"item_id", id}, {"output_index", i}, {"content_index", 0}, {"part", part}});
        for (const std::string& piece : split_utf8(r.text, ctx.chunk_chars)) {
          if (*first_delta < 0) *first_delta = static_cast<int>(ev.size());
          add("response.output_text.delta",
              {{"item_id", id}, {"output_index", i}, {"content_index", 0}, {"delta", piece}});
        }
        add("response.output_text.done",
            {{"item_id", id}, {"output_index", i}, {"content_index", 0}, {"text", r.text}});
        part["text"] = r.text;
        add("response.content_part.done", {{"item_id", id}, {"output_index", i}, {"content_index", 0}, {"part", part}});
      } else if (item["type"] == "function_call") {
        start["arguments"] = "";
        add("response.output_item.added", {{"output_index", i}, {"item", start}});
        for (const std::string& piece : split_utf8(item["arguments"].get<std::string>(), ctx.chunk_chars)) {
          if (*first_delta < 0) *first_delta = static_cast<int>(ev.size());
          add("response.function_call_arguments.delta", {{"item_id", id}, {"output_index", i}, {"delta", piece}});
        }
        add("response.function_call_arguments.done",
            {{"item_id", id}, {"output_index", i}, {"arguments", item["arguments"]}});
      } else {
        if (item["type"] == "custom_tool_call") start["input"] = "";
        add("response.output_item.added", {{"output_index", i}, {"item", start}});
      }
    }
    if (*first_delta < 0) *first_delta = static_cast<int>(ev.size());
    add("response.output_item.done", {{"output_index", i}, {"item", item}});
  }
  add("response.completed", {{"response", responses_object(r, ctx, "completed", items, true)}});
  if (*first_delta < 0) *first_delta = static_cast<int>(ev.size()) - 1;
  return ev;
}

const char* anthropic_error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

}  // namespace

std::vector<std::string> split_utf8(const std::string& text, int n) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = pos;
    int chars = 0;
    while (end < text.size() && chars < n) {
      ++end;
      while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
      ++chars;
    }
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

std::vector<SseEvent> render_stream(Format format, const Reply& reply, const RenderContext& ctx, int* first_delta) {
  *first_delta = -1;
  std::vector<SseEvent> ev;
  switch (format) {
    case Format::kAnthropic: ev = anthropic_stream(reply, ctx, first_delta); break;
    case Format::kChat: ev = chat_stream(reply, ctx, first_delta); break;
    case Format::kResponses: ev = responses_stream(reply, ctx, first_delta); break;
  }
  if (*first_delta < 0) *first_delta = ev.size() > 1 ? 1 : 0;
  return ev;
}

json render_body(Format format, const Reply& reply, const RenderContext& ctx) {
  switch (format) {
    case Format::kAnthropic: return anthropic_body(reply, ctx);
    case Format::kChat: return chat_body(reply, ctx);
    case Format::kResponses: return responses_object(reply, ctx, "completed", responses_items(reply, ctx), true);
  }
  return json::object();
}

json error_body(Format format, int status, const std::string& message) {
  if (format == Format::kAnthropic) {
    return {{"type", "error"}, {"error", {{"type", anthropic_error_type(status)}, {"message", message}}}};
  }
  const char* type = status == 429   ? "rate_limit_exceeded"
                     : status == 401 ? "invalid_api_key"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  return {{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", type}}}};
}

std::string sse_text(const SseEvent& event) {
  std::string out;
  if (!event.event.empty()) out += "event: " + event.event + "\n";
  out += "data: " + event.data + "\n\n";
  return out;
}

}  // namespace kda::fakellm
