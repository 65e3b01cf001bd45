// The fake LLM server against the real agent CLIs (Claude Code 2.1.332, Codex 0.171.0), when
// they are installed (scripts/install-agent-clis.sh; KDA_CLAUDE_BIN / KDA_CODEX_BIN or the cache
// dir). Each CLI runs one scripted session offline — write, edit, shell, final text — through a
// 429 with Retry-After and a stream cut after its start, and must leave the files on disk and
// show the fake's tool results in its requests. Skipped, with a message, when a CLI is absent.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "fakellm/server.h"
#include "proc/subprocess.h"
#include "util/fs.h"

namespace kda::fakellm {
namespace {

using nlohmann::json;
namespace stdfs = std::filesystem;

stdfs::path clis_dir() {
  if (const char* d = std::getenv("KDA_AGENT_CLIS_DIR")) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return stdfs::path(x) / "kda/agent-clis";
  const char* home = std::getenv("HOME");
  return stdfs::path(home ? home : "/root") / ".cache/kda/agent-clis";
}

std::optional<stdfs::path> find_cli(const char* env, const std::vector<stdfs::path>& candidates) {
  if (const char* e = std::getenv(env); e && *e && stdfs::exists(e)) return stdfs::path(e);
  for (const stdfs::path& c : candidates) {
    if (stdfs::exists(c)) return c;
  }
  return std::nullopt;
}

const json kScenario = json::parse(R"([{"name":"smoke","match":"do the scripted steps","steps":[
  {"tool":"write","input":{"path":"k.txt","content":"alpha\nbeta\ngamma\n"},"fault":{"status":429,"retry_after":1}},
  {"tool":"edit","input":{"path":"k.txt","old":"beta","new":"BETA"},"fault":{"cut":"after_start"}},
  {"tool":"shell","input":{"command":"cat k.txt > out.txt"}},
  {"text":"finished in ${workdir}"}]}])");

struct Session {
  stdfs::path root, work;
  std::unique_ptr<Server> server;
};

Session start_session(const char* prefix) {
  Session s;
  auto dir = fs::make_temp_dir(stdfs::temp_directory_path(), prefix);
  EXPECT_TRUE(dir.ok());
  s.root = *dir;
  s.work = s.root / "work";
  for (const char* d : {"work", "home", "tmp", "codex_home"}) stdfs::create_directories(s.root / d);
  Options o;
  o.scenarios = kScenario;
  o.log_path = s.root / "requests.jsonl";
  auto server = Server::start(o);
  EXPECT_TRUE(server.ok()) << server.status().message();
  s.server = std::move(server).value();
  return s;
}

void expect_files_and_log(const Session& s, const std::string& first_tool) {
  auto k = fs::read_file(s.work / "k.txt");
  ASSERT_TRUE(k.ok()) << "the scripted write did not happen";
  EXPECT_EQ(*k, "alpha\nBETA\ngamma\n");
  auto out = fs::read_file(s.work / "out.txt");
  ASSERT_TRUE(out.ok()) << "the scripted shell command did not run";
  EXPECT_EQ(*out, "alpha\nBETA\ngamma\n");
  auto log = s.server->log();
  ASSERT_GE(log.size(), 5u);
  EXPECT_EQ(log[0]["fault"], "status:429");
  EXPECT_EQ(log[1]["reply"]["tool_calls"][0]["name"], first_tool);
  int max_step = 0;
  for (const json& e : log) {
    max_step = std::max(max_step, e["step"].get<int>());
    for (const json& r : e["tool_results"]) EXPECT_FALSE(r["is_error"].get<bool>()) << r.dump();
  }
  EXPECT_EQ(max_step, 3);
  EXPECT_EQ(log.back()["reply"]["text"], "finished in " + stdfs::canonical(s.work).string());
}

TEST(FakeLlmCliSmoke, ClaudeCodeRunsAScriptedSession) {
  stdfs::path dir = clis_dir();
  auto bin = find_cli("KDA_CLAUDE_BIN", {dir / "claude/node_modules/@anthropic-ai/claude-code-linux-x64/claude",
                                         dir / "claude/node_modules/.bin/claude"});
  if (!bin) GTEST_SKIP() << "Claude Code not installed (run scripts/install-agent-clis.sh or set KDA_CLAUDE_BIN)";
  Session s = start_session("fakellm-claude");
  proc::RunOptions ro;
  ro.argv = {bin->string(), "-p",        "do the scripted steps",   "--output-format",
             "stream-json", "--verbose", "--allowedTools",          "Write",
             "Edit",        "Bash",      "--no-session-persistence"};
  ro.cwd = s.work;
  ro.env = std::vector<std::string>{"PATH=/usr/bin:/bin",
                                    "HOME=" + (s.root / "home").string(),
                                    "TMPDIR=" + (s.root / "tmp").string(),
                                    "LANG=C.UTF-8",
                                    "ANTHROPIC_BASE_URL=" + s.server->base_url(),
                                    "ANTHROPIC_API_KEY=dummy",
                                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
                                    "DISABLE_TELEMETRY=1",
                                    "DISABLE_AUTOUPDATER=1",
                                    "DISABLE_ERROR_REPORTING=1",
                                    "CLAUDE_CODE_MAX_RETRIES=3"};
  ro.timeout_seconds = 240;
  auto r = proc::run(ro);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->exit.success()) << r->exit.describe() << "\n" << r->stderr_text;
  std::string result_line;
  for (size_t pos = 0; pos < r->stdout_text.size();) {
    size_t nl = r->stdout_text.find('\n', pos);
    std::string line = r->stdout_text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? r->stdout_text.size() : nl + 1;
    if (line.find("\"type\":\"result\"") != std::string::npos) result_line = line;
  }
  ASSERT_FALSE(result_line.empty()) << r->stdout_text;
  json result = json::parse(result_line);
  EXPECT_EQ(result["is_error"], false);
  EXPECT_TRUE(result["permission_denials"].empty());
  expect_files_and_log(s, "Write");
  s.server->stop();
  stdfs::remove_all(s.root);
}

TEST(FakeLlmCliSmoke, CodexRunsAScriptedSession) {
  stdfs::path dir = clis_dir();
  auto bin = find_cli("KDA_CODEX_BIN", {dir / "codex/node_modules/.bin/codex"});
  if (!bin) GTEST_SKIP() << "Codex not installed (run scripts/install-agent-clis.sh or set KDA_CODEX_BIN)";
  Session s = start_session("fakellm-codex");
  proc::RunOptions ro;
  ro.argv = {bin->string(),
             "exec",
             "--json",
             "--skip-git-repo-check",
             "--ephemeral",
             "-m",
             "gpt-5.5",
             "--sandbox",
             "workspace-write",
             "-c",
             "model_provider=fake",
             "-c",
             "model_providers.fake={name=\"fake\",base_url=\"" + s.server->base_url() +
                 "/v1\",env_key=\"FAKE_API_KEY\",wire_api=\"responses\",request_max_retries=3,stream_max_retries=3}",
             "-c",
             "analytics.enabled=false",
             "--disable",
             "plugins",
             "do the scripted steps"};
  ro.cwd = s.work;
  ro.env = std::vector<std::string>{"PATH=/usr/bin:/bin", "HOME=" + (s.root / "home").string(),
                                    "CODEX_HOME=" + (s.root / "codex_home").string(),
                                    "TMPDIR=" + (s.root / "tmp").string(), "FAKE_API_KEY=dummy"};
  ro.timeout_seconds = 240;
  auto r = proc::run(ro);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->exit.success()) << r->exit.describe() << "\n" << r->stderr_text;
  EXPECT_NE(r->stdout_text.find("\"type\":\"turn.completed\""), std::string::npos) << r->stdout_text;
  EXPECT_EQ(r->stdout_text.find("\"type\":\"turn.failed\""), std::string::npos) << r->stdout_text;
  expect_files_and_log(s, "apply_patch");
  auto log = s.server->log();
  EXPECT_EQ(log[0]["format"], "responses");
  EXPECT_EQ(log[0]["headers"]["authorization"], "<redacted>");
  s.server->stop();
  stdfs::remove_all(s.root);
}

}  // namespace
}  // namespace kda::fakellm
