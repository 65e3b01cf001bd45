#include "llm/wire_format.h"

#include <gtest/gtest.h>

#include "llm/anthropic_format.h"
#include "llm/testing_streams.h"

namespace kda::llm {
namespace {

using nlohmann::json;

Request sample_request() {
  Request r;
  r.model = "m1";
  r.system = "be brief";
  r.max_tokens = 100;
  r.tools.push_back(
      {"read_file", "Read a file", json{{"type", "object"}, {"properties", {{"path", {{"type", "string"}}}}}}, true});
  r.messages.push_back({MessageRole::kUser, {ContentBlock::make_text("hi")}});
  r.messages.push_back(
      {MessageRole::kAssistant,
       {ContentBlock::make_text("looking"), ContentBlock::make_tool_use("c1", "read_file", {{"path", "a"}})}});
  r.messages.push_back({MessageRole::kUser, {ContentBlock::make_tool_result("c1", "no such file", true)}});
  return r;
}

std::string header(const HttpRequest& h, const std::string& name) {
  for (const auto& [k, v] : h.headers) {
    if (k == name) return v;
  }
  return "<absent>";
}

TEST(AnthropicFormat, EncodeGolden) {
  auto f = make_wire_format(ProviderKind::kAnthropic);
  Endpoint ep{"http://127.0.0.1:9/v1/", "sk-test", "", /*prompt_cache=*/false};
  HttpRequest h = f->encode(sample_request(), ep);
  EXPECT_EQ(h.url, "http://127.0.0.1:9/v1/messages");
  EXPECT_EQ(header(h, "x-api-key"), "sk-test");
  EXPECT_EQ(header(h, "anthropic-version"), "2023-06-01");
  EXPECT_EQ(header(h, "authorization"), "<absent>");
  json expected = json::parse(R"({
    "model":"m1","max_tokens":100,"stream":true,"system":"be brief",
    "messages":[
      {"role":"user","content":[{"type":"text","text":"hi"}]},
      {"role":"assistant","content":[{"type":"text","text":"looking"},
                                     {"type":"tool_use","id":"c1","name":"read_file","input":{"path":"a"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"no such file","is_error":true}]}],
    "tools":[{"name":"read_file","description":"Read a file",
              "input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}]})");
  EXPECT_EQ(json::parse(h.body), expected) << h.body;
  EXPECT_EQ(f->url(Endpoint{}), "https://api.anthropic.com/v1/messages");

  // With prompt caching (the default): the system prompt and the newest block are breakpoints.
  ep.prompt_cache = true;
  json cached = json::parse(f->encode(sample_request(), ep).body);
  json system = json::parse(R"([{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}])");
  EXPECT_EQ(cached["system"], system);
  expected["system"] = system;
  expected["messages"][2]["content"][0]["cache_control"] = {{"type", "ephemeral"}};
  EXPECT_EQ(cached, expected) << cached.dump();
}

TEST(OpenAiChatFormat, EncodeGolden) {
  auto f = make_wire_format(ProviderKind::kOpenAiChat);
  Endpoint ep{"http://127.0.0.1:8000/v1", "", "max_tokens"};
  HttpRequest h = f->encode(sample_request(), ep);
  EXPECT_EQ(h.url, "http://127.0.0.1:8000/v1/chat/completions");
  EXPECT_EQ(header(h, "authorization"), "<absent>");  // no key: local server
  json expected = json::parse(R"({
    "model":"m1","stream":true,"stream_options":{"include_usage":true},"max_tokens":100,
    "messages":[
      {"role":"system","content":"be brief"},
      {"role":"user","content":"hi"},
      {"role":"assistant","content":"looking","tool_calls":[
        {"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"ERROR: no such file"}],
    "tools":[{"type":"function","function":{"name":"read_file","description":"Read a file",
              "parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}]})");
  EXPECT_EQ(json::parse(h.body), expected) << h.body;
  Endpoint official{"", "sk-o", "max_completion_tokens"};
  HttpRequest o = f->encode(sample_request(), official);
  EXPECT_EQ(o.url, "https://api.openai.com/v1/chat/completions");
  EXPECT_EQ(header(o, "authorization"), "Bearer sk-o");
  EXPECT_EQ(json::parse(o.body)["max_completion_tokens"], 100);
}

TEST(OpenAiResponsesFormat, EncodeGolden) {
  auto f = make_wire_format(ProviderKind::kOpenAiResponses);
  Endpoint ep{"https://example.test/v1/", "k", ""};
  HttpRequest h = f->encode(sample_request(), ep);
  EXPECT_EQ(h.url, "https://example.test/v1/responses");
  EXPECT_EQ(header(h, "authorization"), "Bearer k");
  json expected = json::parse(R"({
    "model":"m1","stream":true,"store":false,"max_output_tokens":100,"instructions":"be brief",
    "input":[
      {"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},
      {"type":"message","role":"assistant","content":[{"type":"output_text","text":"looking"}]},
      {"type":"function_call","call_id":"c1","name":"read_file","arguments":"{\"path\":\"a\"}"},
      {"type":"function_call_output","call_id":"c1","output":"ERROR: no such file"}],
    "tools":[{"type":"function","name":"read_file","description":"Read a file",
              "parameters":{"type":"object","properties":{"path":{"type":"string"}}}}]})");
  EXPECT_EQ(json::parse(h.body), expected) << h.body;
}

class DecodeAll : public ::testing::TestWithParam<ProviderKind> {};

TEST_P(DecodeAll, TextAndToolCallsReassembled) {
  auto f = make_wire_format(GetParam());
  std::vector<testing::ScriptedCall> calls = {
      {"call_a", "write_file", json{{"path", "k.cu"}, {"content", "__global__ void k() {}\n\"quoted\""}}},
      {"call_b", "evaluate", json::object()}};
  std::string body = testing::stream_for(GetParam(), "Writing the kernel.", calls, 10, 5);
  // Feed in odd-sized pieces through the parser, as a network would.
  SseParser parser;
  auto dec = f->make_decoder();
  for (size_t i = 0; i < body.size(); i += 13) {
    for (const auto& ev : parser.feed(std::string_view(body).substr(i, 13))) ASSERT_TRUE(dec->on_event(ev).ok());
  }
  auto r = dec->finish();
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->blocks.size(), 3u);
  EXPECT_EQ(r->blocks[0].type, BlockType::kText);
  EXPECT_EQ(r->blocks[0].text, "Writing the kernel.");
  EXPECT_EQ(r->blocks[1].type, BlockType::kToolUse);
  EXPECT_EQ(r->blocks[1].id, "call_a");
  EXPECT_EQ(r->blocks[1].name, "write_file");
  EXPECT_EQ(r->blocks[1].input, calls[0].input);
  EXPECT_FALSE(r->blocks[1].input_invalid);
  EXPECT_EQ(r->blocks[2].name, "evaluate");
  EXPECT_EQ(r->blocks[2].input, json::object());
  EXPECT_EQ(r->stop_reason, StopReason::kToolUse);
  EXPECT_EQ(r->usage.input_tokens, 10);
  EXPECT_EQ(r->usage.output_tokens, 5);
  EXPECT_EQ(r->usage.cache_read_tokens, 3);
}

TEST_P(DecodeAll, PlainTextEndsTurn) {
  auto r = decode_stream(*make_wire_format(GetParam()), testing::stream_for(GetParam(), "COMPLETE\nADVANCED", {}));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->blocks.size(), 1u);
  EXPECT_EQ(r->blocks[0].text, "COMPLETE\nADVANCED");
  EXPECT_EQ(r->stop_reason, StopReason::kEndTurn);
}

TEST_P(DecodeAll, CutStreamIsAnError) {
  std::string body = testing::stream_for(GetParam(), "hello there", {{"c", "t", json{{"x", 1}}}});
  // Cut before the last event (message_stop / [DONE] / response.completed): never a success.
  size_t cut = body.rfind("data:");
  auto r = decode_stream(*make_wire_format(GetParam()), body.substr(0, cut));
  EXPECT_FALSE(r.ok());
  // Cut inside the final event's data line.
  auto r2 = decode_stream(*make_wire_format(GetParam()), body.substr(0, body.size() - 3));
  EXPECT_FALSE(r2.ok());
  auto empty = decode_stream(*make_wire_format(GetParam()), "");
  EXPECT_FALSE(empty.ok());
}

TEST_P(DecodeAll, MalformedJsonIsAnError) {
  std::string body = testing::stream_for(GetParam(), "hi", {});
  size_t at = body.find("data: {");
  body.insert(at + 7, "oops");
  auto r = decode_stream(*make_wire_format(GetParam()), body);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("malformed"), std::string::npos) << r.status().message();
}

TEST_P(DecodeAll, UnknownEventsAndFieldsIgnored) {
  std::string body =
      testing::sse("mystery_event", {{"type", "mystery_event"}, {"x", 1}}) + testing::stream_for(GetParam(), "ok", {});
  auto r = decode_stream(*make_wire_format(GetParam()), body);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->blocks[0].text, "ok");
}

INSTANTIATE_TEST_SUITE_P(Formats, DecodeAll,
                         ::testing::Values(ProviderKind::kAnthropic, ProviderKind::kOpenAiChat,
                                           ProviderKind::kOpenAiResponses),
                         [](const auto& info) {
                           std::string n = provider_kind_name(info.param);
                           for (auto& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

TEST(AnthropicFormat, ErrorEventFails) {
  std::string body =
      testing::sse("message_start", {{"type", "message_start"}, {"message", {{"id", "m"}}}}) +
      testing::sse("error", {{"type", "error"}, {"error", {{"type", "overloaded_error"}, {"message", "Overloaded"}}}});
  auto r = decode_stream(AnthropicFormat(), body);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("overloaded_error"), std::string::npos);
}

TEST(AnthropicFormat, MaxTokensAndInvalidToolJson) {
  std::string body =
      testing::sse("message_start",
                   {{"type", "message_start"}, {"message", {{"id", "m"}, {"usage", {{"input_tokens", 4}}}}}}) +
      testing::sse("content_block_start",
                   {{"type", "content_block_start"},
                    {"index", 0},
                    {"content_block", {{"type", "tool_use"}, {"id", "t"}, {"name", "w"}, {"input", json::object()}}}}) +
      testing::sse("content_block_delta", {{"type", "content_block_delta"},
                                           {"index", 0},
                                           {"delta", {{"type", "input_json_delta"}, {"partial_json", "{\"pa"}}}}) +
      testing::sse("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}}) +
      testing::sse(
          "message_delta",
          {{"type", "message_delta"}, {"delta", {{"stop_reason", "max_tokens"}}}, {"usage", {{"output_tokens", 9}}}}) +
      testing::sse("message_stop", {{"type", "message_stop"}});
  auto r = decode_stream(AnthropicFormat(), body);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->stop_reason, StopReason::kMaxTokens);
  ASSERT_EQ(r->blocks.size(), 1u);
  EXPECT_TRUE(r->blocks[0].input_invalid);
  EXPECT_EQ(r->usage.input_tokens, 4);
  EXPECT_EQ(r->usage.output_tokens, 9);
  EXPECT_EQ(r->request_id, "m");
}

TEST(OpenAiChatFormat, LengthAndErrorChunk) {
  auto f = make_wire_format(ProviderKind::kOpenAiChat);
  std::string body =
      testing::sse(
          "",
          {{"choices", json::array({{{"index", 0}, {"delta", {{"content", "abc"}}}, {"finish_reason", "length"}}})}}) +
      "data: [DONE]\n\n";
  auto r = decode_stream(*f, body);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop_reason, StopReason::kMaxTokens);
  auto e = decode_stream(*f, testing::sse("", {{"error", {{"message", "upstream overloaded"}}}}));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("upstream overloaded"), std::string::npos);
}

TEST(OpenAiResponsesFormat, MinimalStreamAndFailures) {
  auto f = make_wire_format(ProviderKind::kOpenAiResponses);
  // Only response.completed, with the output in it (no output_item.done events).
  std::string body = testing::sse(
      "response.completed",
      {{"type", "response.completed"},
       {"response",
        {{"id", "r9"},
         {"output",
          json::array({{{"type", "function_call"}, {"call_id", "k"}, {"name", "ls"}, {"arguments", "{\"d\":\".\"}"}}})},
         {"usage", {{"input_tokens", 7}, {"output_tokens", 2}}}}}});
  auto r = decode_stream(*f, body);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->blocks.size(), 1u);
  EXPECT_EQ(r->blocks[0].id, "k");
  EXPECT_EQ(r->blocks[0].input, (json{{"d", "."}}));
  EXPECT_EQ(r->stop_reason, StopReason::kToolUse);
  EXPECT_EQ(r->usage.input_tokens, 7);
  EXPECT_EQ(r->request_id, "r9");

  auto incomplete = decode_stream(
      *f,
      testing::sse("response.incomplete", {{"type", "response.incomplete"},
                                           {"response", {{"incomplete_details", {{"reason", "max_output_tokens"}}}}}}));
  ASSERT_TRUE(incomplete.ok());
  EXPECT_EQ(incomplete->stop_reason, StopReason::kMaxTokens);

  auto failed = decode_stream(
      *f,
      testing::sse("response.failed", {{"type", "response.failed"},
                                       {"response", {{"error", {{"code", "server_error"}, {"message", "boom"}}}}}}));
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("boom"), std::string::npos);
}

}  // namespace
}  // namespace kda::llm
