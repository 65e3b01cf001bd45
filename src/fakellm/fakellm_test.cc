// Unit tests of the fake LLM server's pieces: scenario validation, reading conversations in the
// three wire formats, tool resolution and aliases, patch texts, stream rendering.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "fakellm/conversation.h"
#include "fakellm/resolve.h"
#include "fakellm/scenario.h"
#include "fakellm/wire.h"
#include "util/fs.h"

namespace kda::fakellm {
namespace {

using nlohmann::json;

TEST(FakeLlmScenario, ParsesListAndObjectForms) {
  auto list = parse_script(json::parse(R"([{"name":"a","match":"x","steps":[{"text":"hi"}]}])"));
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_EQ(list->scenarios.size(), 1u);
  auto obj = parse_script(json::parse(R"({"scenarios":[{"name":"a","steps":[
      {"tool":"write","input":{"path":"p","content":"c"},"faults":[{"status":429,"retry_after":1,"times":2}]},
      {"calls":[{"tool":"shell","input":{"command":"ls"}},{"tool":"read"}],"text":"t"}]}],
      "faults":[{"delay_ms":5}],"responses_stream":"full","chunk_chars":3})"));
  ASSERT_TRUE(obj.ok()) << obj.status().message();
  const Script& s = *obj;
  EXPECT_TRUE(s.responses_full);
  EXPECT_EQ(s.chunk_chars, 3);
  ASSERT_EQ(s.faults.size(), 1u);
  EXPECT_EQ(s.faults[0].kind, Fault::Kind::kDelay);
  EXPECT_TRUE(s.faults[0].fires(1000));
  const Step& st = s.scenarios[0].steps[0];
  ASSERT_EQ(st.faults.size(), 1u);
  EXPECT_EQ(st.faults[0].status, 429);
  EXPECT_EQ(st.faults[0].retry_after, 1);
  EXPECT_TRUE(st.faults[0].fires(2));
  EXPECT_FALSE(st.faults[0].fires(3));
  EXPECT_EQ(s.scenarios[0].steps[1].calls.size(), 2u);
}

TEST(FakeLlmScenario, ErrorsNameTheField) {
  auto expect_error = [](const char* doc, const char* pointer) {
    auto r = parse_script(json::parse(doc));
    ASSERT_FALSE(r.ok()) << doc;
    EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput);
    EXPECT_NE(r.status().message().find(pointer), std::string::npos) << r.status().message();
  };
  expect_error(R"([{"steps":[{"text":"x"}]}])", "/0/name");
  expect_error(R"([{"name":"a","steps":[]}])", "/0/steps");
  expect_error(R"([{"name":"a","steps":[{"nothing":1}]}])", "/0/steps/0");
  expect_error(R"([{"name":"a","steps":[{"text":"x","faults":[{"status":429,"cut":true}]}]}])", "/0/steps/0/faults/0");
  expect_error(R"([{"name":"a","steps":[{"text":"x","fault":{"status":429,"times":0}}]}])", "/0/steps/0/fault/times");
  expect_error(R"([{"name":"a","steps":[{"text":"x"}]},{"name":"a","steps":[{"text":"y"}]}])", "/1/name");
  expect_error(R"({"scenarios":[],"responses_stream":"huge"})", "/responses_stream");
  expect_error(R"("nope")", "scenarios /");
}

TEST(FakeLlmScenario, MatchAndExhaustion) {
  auto s = parse_script(json::parse(R"([{"name":"a","match":"alpha","steps":[{"text":"first"},{"tool":"x"}]},
                                         {"name":"any","steps":[{"tool":"y"}]}])"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(match_scenario(*s, "say alpha now")->name, "a");
  EXPECT_EQ(match_scenario(*s, "beta")->name, "any");
  EXPECT_EQ(step_at(s->scenarios[0], 1).calls.size(), 1u);
  EXPECT_EQ(*step_at(s->scenarios[0], 7).text, "first");  // last text step repeats
  EXPECT_EQ(*step_at(s->scenarios[1], 3).text, "done");
  auto none = parse_script(json::parse(R"([{"name":"a","match":"alpha","steps":[{"text":"x"}]}])"));
  EXPECT_EQ(match_scenario(*none, "beta"), nullptr);
}

TEST(FakeLlmConversation, AnthropicCountsAssistantRunsAndSkipsSystemMessages) {
  json body = json::parse(R"({"model":"m","stream":true,
    "system":[{"type":"text","text":"You are x"},{"type":"text","text":"env\nPrimary working directory: /tmp/work dir\nPlatform: linux"}],
    "tools":[{"name":"Write","input_schema":{"type":"object"}},{"name":"mcp__kda__finish_round"}],
    "messages":[
      {"role":"user","content":[{"type":"text","text":"please create hello"}]},
      {"role":"system","content":"# Environment"},
      {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Write","input":{}}]},
      {"role":"assistant","content":[{"type":"tool_use","id":"t2","name":"Write","input":{}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok one"},
                                {"type":"tool_result","tool_use_id":"t2","is_error":true,
                                 "content":[{"type":"text","text":"denied"}]}]}]})");
  Conversation c = read_conversation(Format::kAnthropic, body);
  EXPECT_EQ(c.assistant_turns, 1);  // two consecutive assistant messages are one turn
  EXPECT_EQ(c.user_text, "please create hello");
  ASSERT_EQ(c.tools.size(), 2u);
  EXPECT_EQ(c.tools[1].name, "mcp__kda__finish_round");
  ASSERT_EQ(c.last_results.size(), 2u);
  EXPECT_EQ(c.last_results[0].text, "ok one");
  EXPECT_TRUE(c.last_results[1].is_error);
  EXPECT_EQ(c.last_results[1].text, "denied");
  EXPECT_EQ(*c.workdir, "/tmp/work dir");
  EXPECT_TRUE(c.stream);
}

TEST(FakeLlmConversation, ChatCountsAssistantMessages) {
  json body = json::parse(R"({"model":"m","stream":true,"stream_options":{"include_usage":true},
    "tools":[{"type":"function","function":{"name":"write_file","parameters":{"type":"object"}}}],
    "messages":[{"role":"system","content":"sys"},{"role":"user","content":"go"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1"}]},{"role":"tool","tool_call_id":"c1","content":"r1"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c2"}]},{"role":"tool","tool_call_id":"c2","content":"r2"}]})");
  Conversation c = read_conversation(Format::kChat, body);
  EXPECT_EQ(c.assistant_turns, 2);
  EXPECT_TRUE(c.include_usage);
  ASSERT_EQ(c.last_results.size(), 1u);
  EXPECT_EQ(c.last_results[0].text, "r2");
  EXPECT_EQ(c.tools[0].name, "write_file");
  EXPECT_EQ(c.user_text, "go");
}

TEST(FakeLlmConversation, ResponsesCountsCallRunsAndJoinsUserMessages) {
  json body = json::parse(R"({"model":"gpt-5.5","instructions":"","stream":true,
    "tools":[{"type":"function","name":"exec_command","parameters":{}},{"type":"custom","name":"apply_patch"},{"type":"web_search"}],
    "input":[
      {"type":"message","role":"developer","content":[{"type":"input_text","text":"base"}]},
      {"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context><cwd>/w</cwd></environment_context>"}]},
      {"type":"message","role":"user","content":[{"type":"input_text","text":"create hello.txt"}]},
      {"type":"reasoning","summary":[]},
      {"type":"function_call","call_id":"a","name":"exec_command","arguments":"{}"},
      {"type":"function_call","call_id":"b","name":"exec_command","arguments":"{}"},
      {"type":"function_call_output","call_id":"a","output":"out a"},
      {"type":"function_call_output","call_id":"b","output":"out b"},
      {"type":"custom_tool_call","call_id":"c","name":"apply_patch","input":"p"},
      {"type":"custom_tool_call_output","call_id":"c","output":"Success."}]})");
  Conversation c = read_conversation(Format::kResponses, body);
  EXPECT_EQ(c.assistant_turns, 2);
  EXPECT_NE(c.user_text.find("create hello.txt"), std::string::npos);
  EXPECT_NE(c.user_text.find("<cwd>"), std::string::npos);
  EXPECT_EQ(*c.workdir, "/w");
  ASSERT_EQ(c.tools.size(), 3u);
  EXPECT_TRUE(c.tools[1].custom);
  EXPECT_EQ(c.tools[2].name, "web_search");
  ASSERT_EQ(c.last_results.size(), 1u);
  EXPECT_EQ(c.last_results[0].text, "Success.");
  EXPECT_EQ(read_conversation(Format::kResponses, json{{"input", "just text"}}).user_text, "just text");
}

std::vector<OfferedTool> tools(std::initializer_list<const char*> names) {
  std::vector<OfferedTool> out;
  for (const char* n : names) out.push_back({n, std::string(n) == "apply_patch", json::object()});
  return out;
}

TEST(FakeLlmResolve, ExactSuffixAndErrors) {
  auto offered = tools({"Bash", "mcp__kda__finish_round", "mcp__kda__evaluate", "mcp__other__evaluate"});
  auto r = resolve_call("finish_round", json{{"summary", "s"}}, offered, "/w");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->name, "mcp__kda__finish_round");
  EXPECT_EQ(r->input["summary"], "s");
  auto amb = resolve_call("evaluate", json::object(), offered, "/w");
  ASSERT_FALSE(amb.ok());
  EXPECT_NE(amb.status().message().find("ambiguous"), std::string::npos);
  auto missing = resolve_call("nope", json::object(), offered, "/w");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("offered: Bash, mcp__kda__finish_round"), std::string::npos);
  EXPECT_EQ(resolve_call("Bash", json{{"command", "ls"}}, offered, "").value().input["command"], "ls");
}

TEST(FakeLlmResolve, WriteAliasPerClient) {
  json in = {{"path", "sub/hello.txt"}, {"content", "hi\nthere\n"}};
  auto claude = resolve_call("write", in, tools({"Bash", "Edit", "Write"}), "/w");
  ASSERT_TRUE(claude.ok());
  EXPECT_EQ(claude->name, "Write");
  EXPECT_EQ(claude->input, (json{{"file_path", "/w/sub/hello.txt"}, {"content", "hi\nthere\n"}}));
  auto bare = resolve_call("write", in, tools({"Bash", "Edit", "Read"}), "/w");
  EXPECT_EQ(bare->input, (json{{"file_path", "/w/sub/hello.txt"}, {"old_string", ""}, {"new_string", "hi\nthere\n"}}));
  auto codex = resolve_call("write", in, tools({"exec_command", "apply_patch"}), "/nonexistent-wd");
  ASSERT_TRUE(codex.ok());
  EXPECT_TRUE(codex->custom);
  EXPECT_EQ(codex->input, "*** Begin Patch\n*** Add File: sub/hello.txt\n+hi\n+there\n*** End Patch\n");
  std::vector<OfferedTool> native = {{"write_file", false, json::parse(R"({"properties":{"file":{},"contents":{}}})")}};
  auto nat = resolve_call("write", json{{"path", "/w/a.cu"}, {"content", "x"}}, native, "/w");
  EXPECT_EQ(nat->input, (json{{"file", "a.cu"}, {"contents", "x"}}));
  auto outside = resolve_call("write", json{{"path", "/etc/evil"}, {"content", "x"}}, tools({"apply_patch"}), "/w");
  EXPECT_NE(outside->input.get<std::string>().find("*** Add File: /etc/evil\n"), std::string::npos);
  // apply_patch offered as a function tool: a function call with {"input": patch}.
  std::vector<OfferedTool> fn_patch = {{"apply_patch", false, json::object()}};
  auto fp = resolve_call("write", in, fn_patch, "/nonexistent-wd");
  EXPECT_FALSE(fp->custom);
  EXPECT_TRUE(fp->input["input"].is_string());
}

TEST(FakeLlmResolve, ShellReadAndEditAliases) {
  json sh = {{"command", "echo hi > a"}};
  EXPECT_EQ(resolve_call("shell", sh, tools({"Bash"}), "").value().input, (json{{"command", "echo hi > a"}}));
  EXPECT_EQ(resolve_call("shell", sh, tools({"exec_command", "apply_patch"}), "").value().input,
            (json{{"cmd", "echo hi > a"}}));
  EXPECT_EQ(resolve_call("shell", sh, tools({"shell"}), "").value().input,
            (json{{"command", json::array({"bash", "-lc", "echo hi > a"})}}));
  auto native = resolve_call("shell", sh, tools({"mcp__kda__run_command"}), "");
  EXPECT_EQ(native->name, "mcp__kda__run_command");
  EXPECT_EQ(native->input, (json{{"command", "echo hi > a"}}));
  EXPECT_EQ(resolve_call("read", json{{"path", "x.cu"}}, tools({"Read"}), "/w").value().input,
            (json{{"file_path", "/w/x.cu"}}));
  EXPECT_EQ(resolve_call("read", json{{"path", "it's.cu"}}, tools({"exec_command"}), "/w").value().input,
            (json{{"cmd", "cat 'it'\\''s.cu'"}}));
  EXPECT_EQ(resolve_call("edit", json{{"path", "k.cu"}, {"old", "a"}, {"new", "b"}}, tools({"Edit", "Write"}), "/w")
                .value()
                .input,
            (json{{"file_path", "/w/k.cu"}, {"old_string", "a"}, {"new_string", "b"}}));
  EXPECT_EQ(
      resolve_call("edit", json{{"path", "k.cu"}, {"old_string", "a"}, {"new_string", "b"}}, tools({"edit_file"}), "/w")
          .value()
          .input,
      (json{{"path", "k.cu"}, {"old_string", "a"}, {"new_string", "b"}}));
}

TEST(FakeLlmResolve, CodexEditAndRewriteUseTheFileOnDisk) {
  auto dir = fs::make_temp_dir(std::filesystem::temp_directory_path(), "fakellm-test");
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(fs::write_file_atomic(*dir / "k.cu", "int a = 1;\nint b = 2;\nint c = 3;\n").ok());
  auto edit = resolve_call("edit", json{{"path", "k.cu"}, {"old", "b = 2"}, {"new", "b = 20"}}, tools({"apply_patch"}),
                           dir->string());
  ASSERT_TRUE(edit.ok());
  EXPECT_EQ(edit->input, "*** Begin Patch\n*** Update File: k.cu\n@@\n-int b = 2;\n+int b = 20;\n*** End Patch\n");
  auto lines = resolve_call("edit", json{{"path", "k.cu"}, {"old", "int a = 1;\nint b = 2;\n"}, {"new", "int ab;\n"}},
                            tools({"apply_patch"}), dir->string());
  EXPECT_EQ(lines->input,
            "*** Begin Patch\n*** Update File: k.cu\n@@\n-int a = 1;\n-int b = 2;\n+int ab;\n*** End Patch\n");
  auto rewrite = resolve_call("write", json{{"path", (*dir / "k.cu").string()}, {"content", "x\n"}},
                              tools({"apply_patch"}), dir->string());
  EXPECT_EQ(rewrite->input,
            "*** Begin Patch\n*** Update File: k.cu\n@@\n-int a = 1;\n-int b = 2;\n-int c = 3;\n+x\n*** End Patch\n");
  std::filesystem::remove_all(*dir);
}

TEST(FakeLlmResolve, Substitutions) {
  EXPECT_EQ(substitute("at ${workdir}: ${last_tool_result}${x}", "/w", "ok"), "at /w: ok${x}");
  json in = {{"a", "${workdir}/f"}, {"b", json::array({"${last_tool_result}", 3})}};
  EXPECT_EQ(substitute_json(in, "/w", "r"), (json{{"a", "/w/f"}, {"b", json::array({"r", 3})}}));
}

TEST(FakeLlmWire, SplitUtf8KeepsSequencesWhole) {
  auto parts = split_utf8(
      "a\xc3\xa9"
      "bc\xe2\x82\xac",
      2);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0], "a\xc3\xa9");
  EXPECT_EQ(parts[1], "bc");
  EXPECT_EQ(parts[2], "\xe2\x82\xac");
  EXPECT_TRUE(split_utf8("", 3).empty());
}

TEST(FakeLlmWire, AnthropicStreamShapeAndFirstDelta) {
  Reply r;
  r.text = "thinking out loud";
  r.calls.push_back({"Write", false, json{{"file_path", "/w/a"}, {"content", "x"}}});
  RenderContext ctx;
  ctx.model = "m";
  ctx.step = 2;
  ctx.chunk_chars = 5;
  int first = -1;
  auto ev = render_stream(Format::kAnthropic, r, ctx, &first);
  std::vector<std::string> names;
  for (const auto& e : ev) names.push_back(e.event);
  ASSERT_GE(ev.size(), 8u);
  EXPECT_EQ(names.front(), "message_start");
  EXPECT_EQ(names.back(), "message_stop");
  EXPECT_EQ(first, 2);
  EXPECT_EQ(names[first], "content_block_delta");
  std::string partial;
  for (const auto& e : ev) {
    json d = json::parse(e.data);
    EXPECT_EQ(d["type"], e.event);
    if (d["type"] == "content_block_start" && d["content_block"]["type"] == "tool_use") {
      EXPECT_EQ(d["content_block"]["id"], "toolu_fake_2_0");
    }
    if (d["type"] == "content_block_delta" && d["delta"]["type"] == "input_json_delta") {
      partial += d["delta"]["partial_json"].get<std::string>();
    }
    if (d["type"] == "message_delta") {
      EXPECT_EQ(d["delta"]["stop_reason"], "tool_use");
    }
  }
  EXPECT_EQ(json::parse(partial), r.calls[0].input);
}

}  // namespace
}  // namespace kda::fakellm
