#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "backends/cli_claude.h"
#include "backends/cli_codex.h"
#include "backends/cli_common.h"
#include "backends/cli_guard.h"
#include "mcp/tool_socket.h"
#include "util/fs.h"

namespace kda::agent {
namespace {

using nlohmann::json;
namespace stdfs = std::filesystem;

struct Collected {
  SessionRequest request;
  SessionResult result;
  EventSink sink{&result, &request};
  int callbacks = 0;
  Collected() {
    request.on_event = [this](const AgentEvent&) { ++callbacks; };
  }
  std::vector<AgentEvent> of_kind(const std::string& kind) const {
    std::vector<AgentEvent> out;
    for (const auto& e : result.events)
      if (e.kind == kind) out.push_back(e);
    return out;
  }
};

TEST(ClaudeStreamParser, ToolCallsDenialsUsageAndFinalText) {
  Collected c;
  ClaudeStreamParser p(&c.sink);
  for (
      const char* line : {
          R"({"type":"system","subtype":"init","tools":["Write"],"model":"m"})",
          R"({"type":"assistant","message":{"id":"msg_1","content":[{"type":"text","text":"writing"}]}})",
          R"({"type":"assistant","message":{"id":"msg_1","content":[{"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"/w/a.cu","content":"x"}}]}})",
          R"({"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"File created successfully at: /w/a.cu"}]}})",
          R"({"type":"assistant","message":{"id":"msg_2","content":[{"type":"tool_use","id":"t2","name":"Write","input":{"file_path":"/pack/task.toml","content":"x"}}]}})",
          R"({"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2","is_error":true,"content":[{"type":"text","text":"PreToolUse:Write hook error: kda guard: denied"}]}]}})",
          R"({"type":"assistant","message":{"id":"msg_3","content":[{"type":"tool_use","id":"t3","name":"Bash","input":{"command":"echo x > /pack/plan.md"}}]}})",
          R"({"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t3","is_error":true,"content":"Permission denied"}]}})",
          R"({"type":"assistant","message":{"id":"msg_4","content":[{"type":"tool_use","id":"t4","name":"mcp__kda__evaluate","input":{}}]}})",
          R"({"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t4","content":"PASSED"}]}})",
          "not json",
          R"({"type":"system","subtype":"api_retry","attempt":1})",
          R"({"type":"assistant","message":{"id":"msg_5","content":[{"type":"text","text":"DECISION: CONTINUE"}]}})",
          R"({"type":"result","subtype":"success","is_error":false,"num_turns":5,"result":"DECISION: CONTINUE","permission_denials":[{"tool_name":"Write","tool_use_id":"t2","tool_input":{"file_path":"/pack/task.toml"}}],"usage":{"input_tokens":100,"output_tokens":20,"cache_read_input_tokens":7,"cache_creation_input_tokens":3},"total_cost_usd":0.01})",
      })
    p.feed(line);
  p.finish();
  EXPECT_TRUE(p.saw_result());
  EXPECT_FALSE(p.is_error());
  EXPECT_EQ(p.final_text(), "DECISION: CONTINUE");
  EXPECT_EQ(p.turns(), 5);
  EXPECT_EQ(p.usage().input_tokens, 100);
  EXPECT_EQ(p.usage().output_tokens, 20);
  EXPECT_EQ(p.usage().cache_read_tokens, 7);
  EXPECT_EQ(p.usage().cache_write_tokens, 3);
  EXPECT_EQ(p.usage().requests, 5);
  auto writes = c.of_kind("file_write");
  ASSERT_EQ(writes.size(), 2u);
  EXPECT_TRUE(writes[0].ok);
  EXPECT_EQ(writes[0].detail["path"], "/w/a.cu");
  EXPECT_FALSE(writes[1].ok);  // a denied write is never a success
  EXPECT_EQ(writes[1].detail["path"], "/pack/task.toml");
  auto commands = c.of_kind("command");
  ASSERT_EQ(commands.size(), 1u);
  EXPECT_FALSE(commands[0].ok);
  auto calls = c.of_kind("tool_call");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_TRUE(calls[0].ok);
  EXPECT_EQ(calls[0].detail["tool"], "mcp__kda__evaluate");
  ASSERT_EQ(c.of_kind("denied").size(), 1u);
  EXPECT_FALSE(c.of_kind("denied")[0].ok);
  EXPECT_EQ(c.of_kind("retry").size(), 1u);
  EXPECT_EQ(c.of_kind("error").size(), 1u);  // the unparsable line
  EXPECT_EQ(c.callbacks, static_cast<int>(c.result.events.size()));
}

TEST(ClaudeStreamParser, ApiErrorsAndUnansweredToolsAreFailures) {
  Collected c;
  ClaudeStreamParser p(&c.sink);
  p.feed(
      R"({"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t9","name":"Edit","input":{"file_path":"/w/x"}}]}})");
  // subtype "success" with is_error true: an API failure (the CLI's quirk).
  p.feed(R"({"type":"result","subtype":"success","is_error":true,"result":"API Error: 500","num_turns":1})");
  p.finish();
  EXPECT_TRUE(p.is_error());
  EXPECT_EQ(p.error(), "API Error: 500");
  auto writes = c.of_kind("file_write");
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_FALSE(writes[0].ok);
  ASSERT_EQ(c.of_kind("error").size(), 1u);
}

TEST(CodexStreamParser, ItemsTurnsAndFailures) {
  Collected c;
  CodexStreamParser p(&c.sink);
  for (
      const char* line : {
          R"({"type":"thread.started","thread_id":"x"})",
          R"({"type":"turn.started"})",
          R"({"type":"item.completed","item":{"id":"i0","type":"error","message":"Model metadata not found"}})",
          R"({"type":"item.completed","item":{"id":"i1","type":"file_change","changes":[{"path":"/w/k.cu","kind":"add"}],"status":"completed"}})",
          R"({"type":"item.completed","item":{"id":"i2","type":"file_change","changes":[{"path":"/pack/task.toml","kind":"update"}],"status":"failed"}})",
          R"({"type":"item.completed","item":{"id":"i3","type":"command_execution","command":"bash -lc 'echo x > /pack/plan.md'","aggregated_output":"Permission denied","exit_code":1,"status":"failed"}})",
          R"({"type":"item.completed","item":{"id":"i4","type":"command_execution","command":"ls","aggregated_output":"a","exit_code":0,"status":"completed"}})",
          R"({"type":"item.completed","item":{"id":"i5","type":"mcp_tool_call","server":"kda","tool":"evaluate","arguments":{},"result":{"content":[]},"error":null,"status":"completed"}})",
          R"({"type":"item.completed","item":{"id":"i6","type":"mcp_tool_call","server":"kda","tool":"finish_round","arguments":{},"error":{"message":"boom"},"status":"failed"}})",
          R"({"type":"item.completed","item":{"id":"i7","type":"agent_message","text":"DECISION: COMPLETE"}})",
          R"({"type":"turn.completed","usage":{"input_tokens":300,"cached_input_tokens":10,"output_tokens":40}})",
      })
    p.feed(line);
  EXPECT_TRUE(p.turn_completed());
  EXPECT_FALSE(p.failed());
  EXPECT_EQ(p.final_text(), "DECISION: COMPLETE");
  EXPECT_EQ(p.usage().input_tokens, 300);
  EXPECT_EQ(p.usage().cache_read_tokens, 10);
  EXPECT_EQ(p.usage().output_tokens, 40);
  auto writes = c.of_kind("file_write");
  ASSERT_EQ(writes.size(), 2u);
  EXPECT_TRUE(writes[0].ok);
  EXPECT_FALSE(writes[1].ok);
  auto commands = c.of_kind("command");
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_FALSE(commands[0].ok);
  EXPECT_TRUE(commands[1].ok);
  auto calls = c.of_kind("tool_call");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_TRUE(calls[0].ok);
  EXPECT_FALSE(calls[1].ok);
  EXPECT_EQ(c.of_kind("error").size(), 1u);

  Collected f;
  CodexStreamParser q(&f.sink);
  q.feed(R"({"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized"}})");
  EXPECT_TRUE(q.failed());
  EXPECT_EQ(q.items(), 0);
  EXPECT_EQ(f.of_kind("error").size(), 1u);
}

TEST(CliGuard, DeniesFileToolsOutsideAllowedPaths) {
  auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-guard");
  ASSERT_TRUE(d.ok());
  stdfs::path ws = *d / "ws", pack = *d / "pack";
  stdfs::create_directories(ws / "solution");
  stdfs::create_directories(pack);
  stdfs::create_directory_symlink(pack, ws / "solution" / "link");
  std::vector<stdfs::path> allowed = {ws / "solution"};
  auto input = [](const std::string& tool, const std::string& path) {
    return json{
        {"hook_event_name", "PreToolUse"}, {"tool_name", tool}, {"tool_input", {{"file_path", path}}}, {"cwd", "/"}};
  };
  EXPECT_FALSE(guard_denial(input("Write", (ws / "solution/k.cu").string()), allowed));
  EXPECT_FALSE(guard_denial(input("Edit", (ws / "solution/new/dir/k.cu").string()), allowed));
  EXPECT_TRUE(guard_denial(input("Write", (pack / "task.toml").string()), allowed));
  EXPECT_TRUE(guard_denial(input("Write", (ws / "solution/../plan.md").string()), allowed));
  EXPECT_TRUE(guard_denial(input("Write", (ws / "solution/link/task.toml").string()), allowed));  // symlink out
  EXPECT_TRUE(guard_denial(input("Write", (ws / "solutionX/a").string()), allowed));              // prefix trick
  EXPECT_TRUE(guard_denial(input("MultiEdit", "/etc/passwd"), allowed));
  json rel = input("Write", "solution/k.cu");
  rel["cwd"] = ws.string();
  EXPECT_FALSE(guard_denial(rel, allowed));
  EXPECT_FALSE(guard_denial(input("Bash", "/anything"), allowed));  // not a file tool: Landlock's job
  EXPECT_TRUE(guard_denial(json{{"tool_name", "Write"}, {"tool_input", json::object()}}, allowed));
  EXPECT_TRUE(guard_denial(json("x"), allowed));
  EXPECT_EQ(guard_deny_output("r")["hookSpecificOutput"]["permissionDecision"], "deny");
  stdfs::remove_all(*d);
}

TEST(CliCommon, UrlPorts) {
  EXPECT_EQ(url_port("http://127.0.0.1:4321/v1"), 4321);
  EXPECT_EQ(url_port("http://127.0.0.1:4321"), 4321);
  EXPECT_EQ(url_port("https://api.anthropic.com"), 443);
  EXPECT_EQ(url_port("http://localhost/v1"), 80);
  EXPECT_EQ(url_port("http://[::1]:8080/v1"), 8080);
  EXPECT_EQ(url_port("http://[::1]/v1"), 80);
  EXPECT_FALSE(url_port("ftp://x"));
  EXPECT_FALSE(url_port("http://h:99999"));
  EXPECT_FALSE(url_port("http://h:ab"));
}

TEST(CliCommon, CodexSandboxModeFollowsTheOsSandbox) {
  CodexConfig c;
  EXPECT_EQ(codex_sandbox_mode(c, Role::kWriter, true), "danger-full-access");
  EXPECT_EQ(codex_sandbox_mode(c, Role::kWriter, false), "workspace-write");
  EXPECT_EQ(codex_sandbox_mode(c, Role::kReviewer, false), "read-only");
  c.sandbox_mode = "read-only";
  EXPECT_EQ(codex_sandbox_mode(c, Role::kWriter, true), "read-only");
}

TEST(CliCommon, MissingCliIsNotFoundAndNamesWhereItLooked) {
  auto r = find_agent_cli("/nonexistent/claude", "KDA_CLAUDE_BIN", "claude");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kNotFound);
}

// A CLI session's start-up, shared by the Claude Code and Codex backends: its directory lives as long
// as the session (unless kept), and kda's MCP server is the config's or none without tools.
TEST(CliCommon, ASessionsDirectoriesGoWithItUnlessKept) {
  auto root = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-cli-session");
  ASSERT_TRUE(root.ok());
  CliAgentConfig config;
  config.binary = "/bin/true";
  config.sessions_dir = *root / "sessions";
  SessionRequest request;
  request.role = Role::kReviewer;
  stdfs::path dir;
  {
    auto s = CliSession::start(config, request, "KDA_CLAUDE_BIN", "claude");
    ASSERT_TRUE(s.ok()) << s.status().message();
    dir = (*s)->dirs.root;
    EXPECT_TRUE(stdfs::is_directory((*s)->dirs.home));
    EXPECT_NE(dir.filename().string().find("claude-reviewer"), std::string::npos) << dir;
    EXPECT_EQ((*s)->binary, "/bin/true");
    EXPECT_EQ((*s)->socket, nullptr);                      // no tools in the request
    EXPECT_TRUE((*s)->mcp_args(config, request).empty());  // and no server named
    config.mcp_server_args = {"mcp", "--workspace", "/w"};
    EXPECT_EQ((*s)->mcp_args(config, request), config.mcp_server_args);
  }
  EXPECT_FALSE(stdfs::exists(dir));
  config.keep_session_dirs = true;
  {
    auto s = CliSession::start(config, request, "KDA_CLAUDE_BIN", "claude");
    ASSERT_TRUE(s.ok());
    dir = (*s)->dirs.root;
  }
  EXPECT_TRUE(stdfs::exists(dir));
  config.binary = "/nonexistent/codex";
  auto missing = CliSession::start(config, request, "KDA_CODEX_BIN", "codex");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().kind(), ErrorKind::kNotFound);
  stdfs::remove_all(*root);
}

class AgentSandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sandbox::landlock_abi() < 4) GTEST_SKIP() << "needs Landlock ABI >= 4 (fs + TCP)";
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-agent-sbx");
    ASSERT_TRUE(d.ok());
    root_ = *d;
    stdfs::create_directories(root_ / "ws" / "solution");
    stdfs::create_directories(root_ / "pack");
    std::ofstream(root_ / "pack" / "task.toml") << "orig\n";
    auto dirs = make_session_dirs(root_ / "sessions", "test");
    ASSERT_TRUE(dirs.ok()) << dirs.status().message();
    dirs_ = *dirs;
  }
  void TearDown() override {
    if (!root_.empty()) stdfs::remove_all(root_);
  }
  proc::RunResult run_confined(Role role, const std::string& script) {
    SessionRequest req;
    req.role = role;
    req.workspace = root_ / "ws";
    req.writable = {root_ / "ws" / "solution"};
    auto ll = sandbox::prepare_landlock(agent_landlock_policy(req, dirs_, 1));
    EXPECT_TRUE(ll.ok()) << ll.status().message();
    proc::RunOptions o;
    o.argv = {"/bin/sh", "-c", script};
    o.cwd = root_ / "ws";
    o.timeout_seconds = 20;
    const sandbox::PreparedLandlock* p = &*ll;
    o.pre_exec = [p] { return p->restrict_self(); };
    auto r = proc::run(o);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : proc::RunResult{};
  }
  stdfs::path root_;
  SessionDirs dirs_;
};

TEST_F(AgentSandboxTest, WriterWritesOnlySolutionAndSessionDirs) {
  const std::string pack = (root_ / "pack" / "task.toml").string();
  auto r = run_confined(Role::kWriter, "echo k > solution/k.cu && echo s > " + dirs_.tmp.string() + "/s && echo h > " +
                                           dirs_.home.string() +
                                           "/h && echo ok; "
                                           "echo x > " +
                                           pack +
                                           " || echo blocked1; "
                                           "echo x > " +
                                           (root_ / "ws" / "plan.md").string() +
                                           " || echo blocked2; "
                                           "echo x > " +
                                           (dirs_.kda / "evil").string() +
                                           " || echo blocked3; "
                                           "(sleep 0.2; echo x > " +
                                           pack + "; echo $? > solution/bg_status) & wait");
  EXPECT_NE(r.stdout_text.find("ok"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("blocked1"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("blocked2"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("blocked3"), std::string::npos);
  EXPECT_EQ(*fs::read_file(pack), "orig\n");
  EXPECT_EQ(*fs::read_file(root_ / "ws" / "solution" / "bg_status"), "2\n");  // the background write failed
  EXPECT_TRUE(stdfs::exists(root_ / "ws" / "solution" / "k.cu"));
}

TEST_F(AgentSandboxTest, ReviewerWritesNothingButItsSessionDirs) {
  auto r = run_confined(Role::kReviewer,
                        "echo k > solution/k.cu || echo blocked; echo t > " + dirs_.tmp.string() + "/t && echo tmp-ok");
  EXPECT_NE(r.stdout_text.find("blocked"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("tmp-ok"), std::string::npos);
  EXPECT_FALSE(stdfs::exists(root_ / "ws" / "solution" / "k.cu"));
}

// The MCP child runs inside the agent's Landlock domain and must still reach kda's tool socket,
// which lives in a directory the agent cannot write (Landlock does not scope pathname sockets).
TEST_F(AgentSandboxTest, ConfinedChildReachesTheToolSocket) {
  if (!proc::find_program("python3").ok()) GTEST_SKIP() << "python3 not found";
  struct Echo final : ToolHost {
    std::vector<ToolSpec> tools() const override { return {{"echo", "e", {{"type", "object"}}, true}}; }
    ToolOutcome call(const std::string&, const json& a) override { return {a.dump(), false, {}}; }
  } tools;
  auto server = mcp::ToolSocketServer::start(&tools, dirs_.socket);
  ASSERT_TRUE(server.ok());
  auto r = run_confined(Role::kReviewer,
                        "python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
                        "print(\"connected\")' " +
                            dirs_.socket.string());
  EXPECT_NE(r.stdout_text.find("connected"), std::string::npos) << r.stderr_text;
}

TEST(CliCommon, RunCliKillsTheGroupOnTimeoutAndCut) {
  SessionDirs d;
  std::vector<std::string> lines;
  auto r = run_cli({"/bin/sh", "-c", "echo one; echo two; sleep 30"}, {"PATH=/usr/bin:/bin"}, "/", nullptr,
                   std::chrono::seconds(1), [&](std::string_view l) {
                     lines.emplace_back(l);
                     return true;
                   });
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->exit.timed_out);
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two"}));
  lines.clear();
  auto c = run_cli({"/bin/sh", "-c", "echo one; echo two; sleep 30"}, {"PATH=/usr/bin:/bin"}, "/", nullptr,
                   std::chrono::seconds(20), [&](std::string_view l) {
                     lines.emplace_back(l);
                     return false;
                   });
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->cut);
  EXPECT_FALSE(c->exit.timed_out);
  EXPECT_LT(c->exit.wall_seconds, 10);
}

}  // namespace
}  // namespace kda::agent

#include "backends/cli_backend_spec.h"

namespace kda::agent {
namespace {

TEST(CliBackendSpec, ParsesModelAndProviderSettings) {
  auto c = parse_claude_code_spec(
      "claude-sonnet-4-5?base_url=http%3A%2F%2F127.0.0.1%3A9000&key_env=MY_KEY&api_retries=0&guard_hook=0");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->model, "claude-sonnet-4-5");
  EXPECT_EQ(c->base_url, "http://127.0.0.1:9000");
  EXPECT_EQ(c->api_key_env, "MY_KEY");
  EXPECT_EQ(c->api_retries, 0);
  EXPECT_FALSE(c->guard_hook);
  auto x = parse_codex_spec("gpt-5.5?base_url=http://h:8000/v1&pass_env=HTTPS_PROXY,NO_PROXY");
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->pass_env, (std::vector<std::string>{"HTTPS_PROXY", "NO_PROXY"}));
  EXPECT_TRUE(parse_codex_spec("").ok());
  EXPECT_FALSE(parse_codex_spec("m?guard_hook=1").ok());  // Claude only
  EXPECT_FALSE(parse_codex_spec("m?base_url=ftp://x").ok());
  EXPECT_FALSE(parse_codex_spec("m?api_retries=-1").ok());
  EXPECT_FALSE(parse_codex_spec("m?nonsense").ok());
  auto bad = parse_claude_code_spec("m?colour=blue");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("colour"), std::string::npos);
  EXPECT_TRUE(make_cli_backend("codex", "m").ok());
  EXPECT_FALSE(make_cli_backend("gemini", "m").ok());
}

}  // namespace
}  // namespace kda::agent
