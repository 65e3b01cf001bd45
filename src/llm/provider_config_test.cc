#include "llm/provider_config.h"

#include <map>

#include <gtest/gtest.h>

#include "llm/price_table.h"
#include "util/fs.h"

namespace kda::llm {
namespace {

using nlohmann::json;

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(ProviderSpec, Anthropic) {
  auto c = parse_provider_spec("anthropic:claude-sonnet-4-5", env_of({{"ANTHROPIC_API_KEY", "sk"}}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->kind, ProviderKind::kAnthropic);
  EXPECT_EQ(c->model, "claude-sonnet-4-5");
  EXPECT_EQ(c->api_key_env, "ANTHROPIC_API_KEY");
  EXPECT_EQ(c->base_url, "");
  auto ep = make_endpoint(*c, env_of({{"ANTHROPIC_API_KEY", "sk"}}));
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->api_key, "sk");
}

TEST(ProviderSpec, OpenAiKinds) {
  auto env = env_of({{"OPENAI_API_KEY", "sk"}});
  auto chat = parse_provider_spec("openai:gpt-5.5", env);
  ASSERT_TRUE(chat.ok()) << chat.status().message();
  EXPECT_EQ(chat->kind, ProviderKind::kOpenAiChat);
  EXPECT_EQ(chat->max_tokens_field, "max_completion_tokens");
  auto chat2 = parse_provider_spec("openai-chat:gpt-5.5", env);
  ASSERT_TRUE(chat2.ok());
  EXPECT_EQ(chat2->kind, ProviderKind::kOpenAiChat);
  auto resp = parse_provider_spec("openai-responses:gpt-5.5", env);
  ASSERT_TRUE(resp.ok());
  EXPECT_EQ(resp->kind, ProviderKind::kOpenAiResponses);
  EXPECT_EQ(resp->model, "gpt-5.5");
}

TEST(ProviderSpec, LocalServerWithoutKey) {
  auto c = parse_provider_spec("openai:qwen3?base_url=http://127.0.0.1:8000/v1&key_env=NONE", env_of({}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->model, "qwen3");
  EXPECT_EQ(c->base_url, "http://127.0.0.1:8000/v1");
  EXPECT_EQ(c->api_key_env, "NONE");
  EXPECT_EQ(c->max_tokens_field, "max_tokens");  // not api.openai.com
  auto ep = make_endpoint(*c, env_of({}));
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->api_key, "");
}

TEST(ProviderSpec, OllamaTagAndPercentEncoding) {
  auto c = parse_provider_spec(
      "openai:qwen3:8b?base_url=http%3A%2F%2F127.0.0.1%3A11434%2Fv1&key_env=NONE&max_tokens=2048&temperature=0.2"
      "&timeout_s=900&connect_timeout_s=5&stall_timeout_s=60&max_attempts=3&max_tokens_field=max_completion_tokens",
      env_of({}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->model, "qwen3:8b");
  EXPECT_EQ(c->base_url, "http://127.0.0.1:11434/v1");
  EXPECT_EQ(c->max_tokens, 2048);
  ASSERT_TRUE(c->temperature.has_value());
  EXPECT_DOUBLE_EQ(*c->temperature, 0.2);
  EXPECT_EQ(c->timeouts.total, std::chrono::milliseconds(900'000));
  EXPECT_EQ(c->timeouts.connect, std::chrono::milliseconds(5000));
  EXPECT_EQ(c->timeouts.stall, std::chrono::seconds(60));
  EXPECT_EQ(c->retry.max_attempts, 3);
  EXPECT_EQ(c->max_tokens_field, "max_completion_tokens");
  EXPECT_TRUE(c->prompt_cache);
  auto off = parse_provider_spec("anthropic:m?cache=off&key_env=NONE", env_of({}));
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->prompt_cache);
  EXPECT_FALSE(make_endpoint(*off, env_of({}))->prompt_cache);
}

TEST(ProviderSpec, EnvironmentBaseUrlAndKeyVariable) {
  auto c = parse_provider_spec("openai:gpt-5", env_of({{"OPENAI_BASE_URL", "http://a/v1"}, {"OPENAI_API_KEY", "x"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->base_url, "http://a/v1");
  auto k = parse_provider_spec("openai:gpt-5", env_of({{"OPENAI_BASE_URL", "http://a/v1"},
                                                       {"KDA_OPENAI_BASE_URL", "http://b/v1"},
                                                       {"KDA_OPENAI_KEY_ENV", "VLLM_KEY"},
                                                       {"VLLM_KEY", "v"}}));
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(k->base_url, "http://b/v1");
  EXPECT_EQ(k->api_key_env, "VLLM_KEY");
  auto a = parse_provider_spec("anthropic:m",
                               env_of({{"ANTHROPIC_BASE_URL", "http://127.0.0.1:9"}, {"ANTHROPIC_API_KEY", "x"}}));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->base_url, "http://127.0.0.1:9");
  // The spec wins over the environment.
  auto s = parse_provider_spec("anthropic:m?base_url=http://c",
                               env_of({{"ANTHROPIC_BASE_URL", "http://d"}, {"ANTHROPIC_API_KEY", "x"}}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->base_url, "http://c");
}

void expect_error(const std::string& spec, const std::string& needle,
                  std::map<std::string, std::string> vars = {{"ANTHROPIC_API_KEY", "k"}, {"OPENAI_API_KEY", "k"}}) {
  auto c = parse_provider_spec(spec, env_of(vars));
  ASSERT_FALSE(c.ok()) << spec;
  EXPECT_EQ(c.status().kind(), ErrorKind::kBadInput);
  EXPECT_NE(c.status().message().find(needle), std::string::npos) << spec << " -> " << c.status().message();
}

TEST(ProviderSpec, ErrorsNameTheField) {
  expect_error("anthropic:claude", "ANTHROPIC_API_KEY", {});
  expect_error("openai:gpt-5?key_env=MY_KEY", "MY_KEY");
  expect_error("gemini:pro", "unknown provider 'gemini'");
  expect_error("claude-sonnet", "<provider>:<model>");
  expect_error("anthropic:", "model is empty");
  expect_error("anthropic:m?max_tokens=lots", "max_tokens");
  expect_error("anthropic:m?max_tokens=0", "max_tokens");
  expect_error("anthropic:m?temperature=hot", "temperature");
  expect_error("anthropic:m?base_url=ftp://x", "base_url");
  expect_error("anthropic:m?key_env=1BAD", "key_env");
  expect_error("anthropic:m?colour=blue", "unknown key 'colour'");
  expect_error("anthropic:m?verbose", "not key=value");
  expect_error("anthropic:m?base_url=http%3", "bad %-escape");
  expect_error("anthropic:m?max_attempts=0", "max_attempts");
  expect_error("anthropic:m?prices=/nonexistent/prices.json", "prices");
  expect_error("openai:m?max_tokens_field=n_predict", "max_tokens_field");
  expect_error("anthropic:m?cache=maybe", "cache must be on or off");
  expect_error("openai:m", "OPENAI_BASE_URL", {{"OPENAI_BASE_URL", "localhost:8000"}, {"OPENAI_API_KEY", "k"}});
}

TEST(PriceTable, LongestPrefixAtNameBoundary) {
  auto t = PriceTable::defaults();
  ASSERT_NE(t.find("claude-sonnet-4-5-20250929"), nullptr);
  EXPECT_EQ(t.find("claude-sonnet-4-5-20250929")->prefix, "claude-sonnet-4");
  EXPECT_EQ(t.find("claude-opus-4-5-20251101")->input, 5);
  EXPECT_EQ(t.find("claude-opus-4-20250514")->input, 15);
  EXPECT_EQ(t.find("gpt-5-mini-2025-08-07")->prefix, "gpt-5-mini");
  EXPECT_EQ(t.find("gpt-5")->prefix, "gpt-5");
  EXPECT_EQ(t.find("gpt-5.5"), nullptr);  // not a boundary: unknown, not silently gpt-5
  EXPECT_EQ(t.find("qwen3"), nullptr);
  agent::Usage u;
  u.input_tokens = 1'000'000;
  u.output_tokens = 1'000'000;
  Cost c = t.cost("gpt-5", u);
  EXPECT_TRUE(c.known);
  EXPECT_DOUBLE_EQ(c.usd, 11.25);
  Cost none = t.cost("qwen3", u);
  EXPECT_FALSE(none.known);
  EXPECT_EQ(none.usd, 0);
}

TEST(PriceTable, JsonRoundTripAndErrors) {
  auto t = PriceTable::from_json(PriceTable::defaults().to_json());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->entries().size(), PriceTable::defaults().entries().size());
  auto arr = PriceTable::from_json(json::parse(R"([{"prefix":"qwen3","input":0.1,"output":0.2}])"));
  ASSERT_TRUE(arr.ok());
  EXPECT_DOUBLE_EQ(arr->find("qwen3")->output, 0.2);
  auto bad = PriceTable::from_json(json::parse(R"({"models":[{"prefix":"a"},{"prefix":"b","output":"cheap"}]})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("models[1].output"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(PriceTable::from_json(json::parse(R"({"models":[{"input":1}]})")).ok());
  EXPECT_FALSE(PriceTable::from_json(json::parse(R"({"prices":[]})")).ok());
}

TEST(PriceTable, SpecLoadsFile) {
  auto dir = fs::make_temp_dir(std::filesystem::temp_directory_path(), "kda-llm-test");
  ASSERT_TRUE(dir.ok());
  auto file = *dir / "prices.json";
  ASSERT_TRUE(fs::write_file_atomic(file, R"({"models":[{"prefix":"qwen3","input":0.5,"output":1}]})").ok());
  auto c = parse_provider_spec("openai:qwen3?key_env=NONE&prices=" + file.string(), env_of({}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->price_table_path, file.string());
  ASSERT_TRUE(fs::write_file_atomic(file, "{not json").ok());
  auto bad = parse_provider_spec("openai:qwen3?key_env=NONE&prices=" + file.string(), env_of({}));
  EXPECT_FALSE(bad.ok());
  std::filesystem::remove_all(*dir);
}

}  // namespace
}  // namespace kda::llm
