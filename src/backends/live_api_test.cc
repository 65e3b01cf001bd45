// Against a real API, only when asked: KDA_LLM_LIVE_SPEC holds a provider spec
// (e.g. "anthropic:claude-haiku-4-5", "openai:gpt-5-mini", or a local vLLM/Ollama spec) and the
// key variable it names is set. Otherwise every test skips. ctest label `net`. Costs a few cents.
#include <cstdlib>

#include <gtest/gtest.h>

#include "backends/api_backend.h"

namespace kda::agent {
namespace {

using nlohmann::json;

class Calculator final : public ToolHost {
 public:
  std::vector<ToolSpec> tools() const override {
    return {{"multiply",
             "Multiply two integers exactly. Always use this for multiplication.",
             {{"type", "object"},
              {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"type", "integer"}}}}},
              {"required", {"a", "b"}}},
             true}};
  }
  ToolOutcome call(const std::string& name, const json& args) override {
    ++calls;
    if (!args.contains("a") || !args.contains("b") || !args["a"].is_number_integer() ||
        !args["b"].is_number_integer()) {
      return {"multiply needs integer a and b", true};
    }
    return {std::to_string(args["a"].get<int64_t>() * args["b"].get<int64_t>()), false};
  }
  int calls = 0;
};

TEST(LiveApi, ToolRoundTrip) {
  const char* spec = std::getenv("KDA_LLM_LIVE_SPEC");
  if (spec == nullptr || *spec == '\0') GTEST_SKIP() << "set KDA_LLM_LIVE_SPEC to run against a real API";
  auto config = llm::parse_provider_spec(spec);
  ASSERT_TRUE(config.ok()) << config.status().message();
  auto backend = make_api_backend(*config);
  Calculator calc;
  SessionRequest req;
  req.system_prompt = "You are a careful assistant. Use the tools you are given.";
  req.prompt = "What is 48271 times 9973? Use the multiply tool, then answer with just the number.";
  req.tools = &calc;
  req.timeout = std::chrono::seconds(180);
  req.max_turns = 5;
  auto r = backend->run_session(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GE(calc.calls, 1);
  EXPECT_NE(r->final_text.find("481406683"), std::string::npos) << r->final_text;  // 48271 * 9973
  EXPECT_GT(r->usage.input_tokens + r->usage.cache_read_tokens, 0);
  EXPECT_GT(r->usage.output_tokens, 0);
  std::cerr << "live: turns=" << r->turns << " requests=" << r->usage.requests << " in=" << r->usage.input_tokens
            << " out=" << r->usage.output_tokens << " cache_read=" << r->usage.cache_read_tokens
            << " cost_usd=" << r->usage.cost_usd << "\n";
}

}  // namespace
}  // namespace kda::agent
