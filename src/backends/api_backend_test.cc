#include "backends/api_backend.h"

#include <map>

#include <gtest/gtest.h>

#include "llm/testing_streams.h"

namespace kda::agent {
namespace {

using namespace std::chrono_literals;
using llm::ProviderKind;
using llm::testing::ScriptedCall;
using llm::testing::stream_for;
using nlohmann::json;

// Two tools: read_file (read-only) and write_file (writes; an error without "content").
class FakeTools final : public ToolHost {
 public:
  std::vector<ToolSpec> tools() const override {
    return {{"read_file", "Read a file", json{{"type", "object"}}, true},
            {"write_file", "Write a file", json{{"type", "object"}}, false}};
  }
  ToolOutcome call(const std::string& name, const json& args) override {
    calls.emplace_back(name, args);
    if (on_call) on_call();
    if (name == "read_file") return {"contents of " + args.value("path", "?"), false};
    if (name == "write_file") {
      if (!args.contains("content")) return {"write_file: missing content", true};
      files[args.value("path", "")] = args["content"].get<std::string>();
      return {"wrote " + args.value("path", ""), false};
    }
    return {"unknown tool " + name, true};
  }
  std::vector<std::pair<std::string, json>> calls;
  std::map<std::string, std::string> files;
  std::function<void()> on_call;
};

struct FakeClock {
  std::chrono::system_clock::time_point t = std::chrono::system_clock::from_time_t(1'700'000'000);
  std::vector<std::chrono::milliseconds> sleeps;
  llm::RetryEnv env() {
    return {[this] { return t; },
            [this](std::chrono::milliseconds d) {
              sleeps.push_back(d);
              t += d;
            },
            [] { return 0.5; }};
  }
};

llm::ProviderConfig config_for(ProviderKind kind, const std::string& model = "claude-sonnet-4-5") {
  llm::ProviderConfig c;
  c.kind = kind;
  c.model = model;
  c.base_url = kind == ProviderKind::kAnthropic ? "http://127.0.0.1:1" : "http://127.0.0.1:1/v1";
  c.api_key_env = llm::kNoKey;
  c.max_tokens = 1000;
  c.retry.max_attempts = 3;
  return c;
}

class ApiBackendLoop : public ::testing::TestWithParam<ProviderKind> {};

TEST_P(ApiBackendLoop, FullToolLoop) {
  const ProviderKind kind = GetParam();
  auto transport = std::make_shared<llm::FakeTransport>();
  FakeClock clock;
  transport->push_body(200,
                       stream_for(kind, "Let me look.",
                                  {{"c1", "read_file", json{{"path", "a.cu"}}},
                                   {"c2", "write_file", json{{"path", "b.cu"}}}}),  // no content: tool error
                       11);
  transport->push_body(429, R"({"error":{"message":"slow"}})", 100, {{"retry-after", "2"}});
  transport->push_body(200, stream_for(kind, "", {{"c3", "write_file", json{{"path", "b.cu"}, {"content", "k"}}}}), 11);
  transport->push_body(200, stream_for(kind, "Done.\nCOMPLETE", {}), 11);

  FakeTools tools;
  SessionRequest req;
  req.role = Role::kWriter;
  req.system_prompt = "You write kernels.";
  req.prompt = "Round 1: make it faster.";
  req.tools = &tools;
  std::vector<AgentEvent> seen;
  req.on_event = [&](const AgentEvent& e) { seen.push_back(e); };

  auto backend = make_api_backend(config_for(kind), transport, clock.env(), llm::process_env());
  EXPECT_EQ(backend->name(), kind == ProviderKind::kAnthropic ? "anthropic" : "openai");
  auto r = backend->run_session(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->final_text, "Done.\nCOMPLETE");
  EXPECT_EQ(r->turns, 3);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->usage.requests, 4);  // 3 turns + 1 retried attempt
  EXPECT_EQ(r->usage.input_tokens, 30);
  EXPECT_EQ(r->usage.output_tokens, 15);
  EXPECT_GT(r->usage.cost_usd, 0);
  EXPECT_EQ(tools.files["b.cu"], "k");
  ASSERT_EQ(tools.calls.size(), 3u);
  EXPECT_EQ(tools.calls[0].second, (json{{"path", "a.cu"}}));
  ASSERT_EQ(clock.sleeps.size(), 1u);
  EXPECT_EQ(clock.sleeps[0], 2000ms);

  // Events: three tool calls (the failed one ok=false), one retry; on_event saw the same list.
  std::vector<bool> tool_ok;
  int retries = 0;
  for (const auto& e : r->events) {
    if (e.kind == "tool_call") tool_ok.push_back(e.ok);
    if (e.kind == "retry") ++retries;
  }
  EXPECT_EQ(tool_ok, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(retries, 1);
  EXPECT_EQ(seen.size(), r->events.size());

  // The second request carries both tool results, the error flag kept.
  auto reqs = transport->requests();
  ASSERT_EQ(reqs.size(), 4u);
  json second = json::parse(reqs[1].body);
  std::string dumped = second.dump();
  EXPECT_NE(dumped.find("contents of a.cu"), std::string::npos);
  EXPECT_NE(dumped.find("write_file: missing content"), std::string::npos);
  if (kind == ProviderKind::kAnthropic) {
    const json& last = second["messages"].back();
    EXPECT_EQ(last["role"], "user");
    ASSERT_EQ(last["content"].size(), 2u);
    EXPECT_EQ(last["content"][1]["tool_use_id"], "c2");
    EXPECT_EQ(last["content"][1]["is_error"], true);
    EXPECT_EQ(second["system"][0]["text"], "You write kernels.");
    EXPECT_EQ(last["content"][1]["cache_control"]["type"], "ephemeral");  // prompt caching on by default
  } else if (kind == ProviderKind::kOpenAiChat) {
    EXPECT_EQ(second["messages"][0]["role"], "system");
    EXPECT_NE(dumped.find("ERROR: write_file: missing content"), std::string::npos);
  } else {
    EXPECT_EQ(second["instructions"], "You write kernels.");
    EXPECT_NE(dumped.find("function_call_output"), std::string::npos);
  }
  EXPECT_EQ(json::parse(reqs[0].body)["tools"].size(), 2u);
  EXPECT_EQ(transport->pending(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Formats, ApiBackendLoop,
                         ::testing::Values(ProviderKind::kAnthropic, ProviderKind::kOpenAiChat,
                                           ProviderKind::kOpenAiResponses),
                         [](const auto& info) {
                           std::string n = llm::provider_kind_name(info.param);
                           for (auto& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

TEST(ApiBackend, ReviewerGetsOnlyReadOnlyTools) {
  auto transport = std::make_shared<llm::FakeTransport>();
  FakeClock clock;
  transport->push_body(
      200, llm::testing::anthropic_stream("", {{"w", "write_file", json{{"path", "x"}, {"content", "y"}}}}));
  transport->push_body(200, llm::testing::anthropic_stream("CONTINUE\nSTALLED", {}));
  FakeTools tools;
  SessionRequest req;
  req.role = Role::kReviewer;
  req.prompt = "review";
  req.tools = &tools;
  auto r = make_api_backend(config_for(ProviderKind::kAnthropic), transport, clock.env())->run_session(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  json first = json::parse(transport->requests()[0].body);
  ASSERT_EQ(first["tools"].size(), 1u);
  EXPECT_EQ(first["tools"][0]["name"], "read_file");
  EXPECT_TRUE(tools.calls.empty());  // the write was refused before reaching the host
  EXPECT_TRUE(tools.files.empty());
  std::string second = transport->requests()[1].body;
  EXPECT_NE(second.find("not available"), std::string::npos);
  EXPECT_EQ(r->final_text, "CONTINUE\nSTALLED");
}

TEST(ApiBackend, MaxTurnsCutsTheSession) {
  auto transport = std::make_shared<llm::FakeTransport>();
  FakeClock clock;
  for (int i = 0; i < 5; ++i) {
    transport->push_body(200,
                         llm::testing::anthropic_stream("step " + std::to_string(i),
                                                        {{"c" + std::to_string(i), "read_file", json{{"path", "a"}}}}));
  }
  FakeTools tools;
  SessionRequest req;
  req.prompt = "go";
  req.tools = &tools;
  req.max_turns = 3;
  auto r = make_api_backend(config_for(ProviderKind::kAnthropic), transport, clock.env())->run_session(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->turns, 3);
  EXPECT_EQ(transport->requests().size(), 3u);
  EXPECT_EQ(r->final_text, "step 2");
  EXPECT_EQ(r->events.back().detail["session_end"], "max_turns");
  EXPECT_FALSE(r->events.back().ok);
}

TEST(ApiBackend, TimeoutStopsTheLoop) {
  auto transport = std::make_shared<llm::FakeTransport>();
  FakeClock clock;
  for (int i = 0; i < 5; ++i) {
    transport->push_body(
        200, llm::testing::anthropic_stream("", {{"c" + std::to_string(i), "read_file", json{{"path", "a"}}}}));
  }
  FakeTools tools;
  tools.on_call = [&] { clock.t += 20min; };  // each tool call takes 20 minutes
  SessionRequest req;
  req.prompt = "go";
  req.tools = &tools;
  req.timeout = 30min;
  auto r = make_api_backend(config_for(ProviderKind::kAnthropic), transport, clock.env())->run_session(req);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->turns, 2);
}

TEST(ApiBackend, ApiFailureIsABackendError) {
  auto transport = std::make_shared<llm::FakeTransport>();
  FakeClock clock;
  transport->push_body(401, R"({"error":{"type":"authentication_error","message":"invalid x-api-key"}})");
  SessionRequest req;
  req.prompt = "go";
  std::vector<std::string> kinds;
  req.on_event = [&](const AgentEvent& e) { kinds.push_back(e.kind); };
  auto r = make_api_backend(config_for(ProviderKind::kAnthropic), transport, clock.env())->run_session(req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("invalid x-api-key"), std::string::npos) << r.status().message();
  EXPECT_EQ(kinds, (std::vector<std::string>{"error"}));
}

TEST(ApiBackend, MissingKeyIsAnError) {
  auto transport = std::make_shared<llm::FakeTransport>();
  auto cfg = config_for(ProviderKind::kOpenAiChat, "gpt-5");
  cfg.api_key_env = "KDA_TEST_SURELY_UNSET_KEY";
  SessionRequest req;
  auto r = make_api_backend(cfg, transport, FakeClock().env())->run_session(req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("KDA_TEST_SURELY_UNSET_KEY"), std::string::npos);
  EXPECT_TRUE(transport->requests().empty());
}

TEST(ApiBackend, NoToolsAndUnpricedModel) {
  auto transport = std::make_shared<llm::FakeTransport>();
  FakeClock clock;
  transport->push_body(200, llm::testing::chat_stream("plan: ...", {}));
  SessionRequest req;
  req.prompt = "plan";
  auto r = make_api_backend(config_for(ProviderKind::kOpenAiChat, "qwen3"), transport, clock.env())->run_session(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->final_text, "plan: ...");
  EXPECT_EQ(r->usage.cost_usd, 0);
  EXPECT_FALSE(json::parse(transport->requests()[0].body).contains("tools"));
  bool flagged = false;
  for (const auto& e : r->events) flagged = flagged || e.detail.contains("unpriced_model");
  EXPECT_TRUE(flagged);
}

}  // namespace
}  // namespace kda::agent
