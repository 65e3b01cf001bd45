// The native API agent, through the real libcurl transport, against kda's fake LLM server
// (src/fakellm) in all three wire formats — with a 429 + Retry-After, a cut stream, malformed
// stream JSON and a 500 injected along the way. Offline: the server listens on 127.0.0.1:0.
#include <map>

#include <gtest/gtest.h>

#include "backends/api_backend.h"
#include "fakellm/server.h"

namespace kda::agent {
namespace {

using llm::ProviderKind;
using nlohmann::json;

// Files in memory: read_file (read-only) and write_file.
class MemoryTools final : public ToolHost {
 public:
  std::vector<ToolSpec> tools() const override {
    json path = {{"type", "string"}};
    return {
        {"read_file",
         "Read a file",
         {{"type", "object"}, {"properties", {{"path", path}}}, {"required", {"path"}}},
         true},
        {"write_file",
         "Write a file",
         {{"type", "object"}, {"properties", {{"path", path}, {"content", path}}}, {"required", {"path", "content"}}},
         false}};
  }
  ToolOutcome call(const std::string& name, const json& args) override {
    std::string path = args.value("path", "");
    if (name == "write_file") {
      files[path] = args.value("content", "");
      return {"wrote " + path, false};
    }
    auto it = files.find(path);
    if (it == files.end()) return {"no such file: " + path, true};
    return {it->second, false};
  }
  std::map<std::string, std::string> files;
};

const char* kScenario = R"([{
  "name": "improve",
  "match": "improve the kernel",
  "steps": [
    {"text": "Reading first.", "tool": "read", "input": {"path": "k.cu"},
     "faults": [{"status": 429, "retry_after": 1}]},
    {"tool": "write", "input": {"path": "k.cu", "content": "fast kernel"}, "faults": [{"cut": "after_start"}]},
    {"tool": "read", "input": {"path": "k.cu"}, "faults": [{"malformed": true}]},
    {"text": "COMPLETE: ${last_tool_result}", "faults": [{"status": 500}]}
  ]}])";

class FakeLlmIntegration : public ::testing::TestWithParam<ProviderKind> {};

TEST_P(FakeLlmIntegration, ToolLoopSurvivesFaults) {
  fakellm::Options o;
  o.scenarios = json::parse(kScenario);
  auto server = fakellm::Server::start(o);
  ASSERT_TRUE(server.ok()) << server.status().message();

  llm::ProviderConfig c;
  c.kind = GetParam();
  c.model = "claude-sonnet-4-5";
  c.base_url = (*server)->base_url() + (GetParam() == ProviderKind::kAnthropic ? "" : "/v1");
  c.api_key_env = llm::kNoKey;
  c.max_tokens_field = "max_tokens";
  c.timeouts.connect = std::chrono::milliseconds(5000);
  c.timeouts.total = std::chrono::milliseconds(30'000);
  c.timeouts.stall = std::chrono::seconds(10);
  c.retry.max_attempts = 3;
  // Real clock, but sleeps are recorded instead of slept (Retry-After: 1 would cost a second).
  std::vector<std::chrono::milliseconds> sleeps;
  llm::RetryEnv env = llm::real_retry_env();
  env.sleep = [&](std::chrono::milliseconds d) { sleeps.push_back(d); };
  auto backend = make_api_backend(c, llm::make_curl_transport(), env);

  MemoryTools tools;
  tools.files["k.cu"] = "slow kernel";
  SessionRequest req;
  req.system_prompt = "You are the writer.";
  req.prompt = "Please improve the kernel in k.cu.";
  req.tools = &tools;
  auto r = backend->run_session(req);
  ASSERT_TRUE(r.ok()) << r.status().message();

  EXPECT_EQ(r->final_text, "COMPLETE: fast kernel");
  EXPECT_EQ(tools.files["k.cu"], "fast kernel");
  EXPECT_EQ(r->turns, 4);
  EXPECT_EQ(r->usage.requests, 8);  // 4 turns + 4 failed attempts
  EXPECT_GT(r->usage.input_tokens, 0);
  EXPECT_GT(r->usage.output_tokens, 0);
  std::vector<int> statuses;
  int tool_calls = 0;
  for (const auto& e : r->events) {
    if (e.kind == "retry") statuses.push_back(e.detail["http_status"].get<int>());
    if (e.kind == "tool_call") {
      ++tool_calls;
      EXPECT_TRUE(e.ok) << e.detail.dump();
    }
  }
  EXPECT_EQ(statuses, (std::vector<int>{429, 200, 200, 500}));  // 200s: the cut and the malformed stream
  EXPECT_EQ(tool_calls, 3);
  ASSERT_FALSE(sleeps.empty());
  EXPECT_EQ(sleeps[0], std::chrono::milliseconds(1000));  // Retry-After: 1
  EXPECT_EQ((*server)->log().size(), 8u);
}

INSTANTIATE_TEST_SUITE_P(Formats, FakeLlmIntegration,
                         ::testing::Values(ProviderKind::kAnthropic, ProviderKind::kOpenAiChat,
                                           ProviderKind::kOpenAiResponses),
                         [](const auto& info) {
                           std::string n = llm::provider_kind_name(info.param);
                           for (auto& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

}  // namespace
}  // namespace kda::agent
