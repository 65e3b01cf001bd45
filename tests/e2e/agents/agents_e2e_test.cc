// End-to-end: the real Claude Code (2.1.332) and Codex (0.171.0) CLIs, driven by kda-fake-llm
// scenarios through kda's backends (make_claude_code_backend / make_codex_backend), inside kda's
// Landlock sandbox, with kda's tools over MCP (`kda mcp --connect`).
//
//  - writers edit a solution file (Claude: Write; Codex: apply_patch and exec_command) and call
//    kda's finish_round tool over MCP;
//  - reviewers end with the DECISION text and cannot write the workspace;
//  - a scripted writer attacks the task pack, the plan, the state, a verdict file and the audit
//    log through its edit tool, a shell command, `python3 -c` and a background process spawned
//    with nohup; every file is unchanged afterwards (checked after the background process ran)
//    and every attempt is a failed event in the session's record.
//
// Skipped, with a message, when a CLI is not installed (scripts/install-agent-clis.sh) or the
// kernel lacks Landlock ABI >= 4.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "backends/cli_claude.h"
#include "backends/cli_codex.h"
#include "fakellm/server.h"
#include "proc/subprocess.h"
#include "sandbox/landlock.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kda::agent {
namespace {

using nlohmann::json;
namespace stdfs = std::filesystem;

// kda's tools as the loop would offer them: evaluate (read-only) and finish_round (writer only).
class RunTools final : public ToolHost {
 public:
  std::vector<ToolSpec> tools() const override {
    return {{"evaluate",
             "Evaluate the solution on the dev workloads.",
             {{"type", "object"}, {"properties", json::object()}},
             true},
            {"finish_round",
             "End the round with a summary and claims.",
             {{"type", "object"},
              {"properties",
               {{"summary", {{"type", "string"}}}, {"claims", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
              {"required", {"summary"}}},
             false}};
  }
  ToolOutcome call(const std::string& name, const json& args) override {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back({name, args});
    if (name == "evaluate") return {"PASSED speedup 1.30x", false, {}};
    if (name == "finish_round") return {"round finished", false, {}};
    return {"unknown tool", true, {}};
  }
  std::mutex mu;
  std::vector<std::pair<std::string, json>> calls;
};

// kda itself serves MCP (`kda mcp --connect`) and the guard hook; KDA_E2E_KDA_BINARY overrides.
std::string kda_binary() {
  const char* e = std::getenv("KDA_E2E_KDA_BINARY");
  return e && *e ? e : KDA_BINARY;
}

// The JSON-RPC replies `kda mcp` wrote, one per line.
std::vector<json> json_lines(const std::string& text) {
  std::vector<json> out;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    out.push_back(json::parse(text.substr(start, nl - start)));
  return out;
}

const char* kProtected[] = {"pack/task.toml", "plan.md", "state.json", "verdicts/round-1.json", "audit.jsonl"};

class AgentsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sandbox::landlock_abi() < 4)
      GTEST_SKIP() << "the agent sandbox needs Landlock ABI >= 4; this kernel has " << sandbox::landlock_abi();
    if (!stdfs::exists(kda_binary())) GTEST_SKIP() << "kda binary not built: " << kda_binary();
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-agents-e2e");
    ASSERT_TRUE(d.ok());
    run_ = stdfs::canonical(*d);
    ws_ = run_ / "workspace";
    stdfs::create_directories(ws_ / "solution");
    stdfs::create_directories(run_ / "pack");
    stdfs::create_directories(run_ / "verdicts");
    write(ws_ / "solution" / "kernel.cu", "// baseline\n");
    for (const char* p : kProtected) write(run_ / p, std::string("original ") + p + "\n");
    for (const char* p : kProtected) hashes_.push_back(util_hash(run_ / p));
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (!run_.empty() && !std::getenv("KDA_E2E_KEEP")) stdfs::remove_all(run_);
  }

  static void write(const stdfs::path& p, const std::string& s) { std::ofstream(p) << s; }
  static std::string util_hash(const stdfs::path& p) {
    auto c = fs::read_file(p);
    return c.ok() ? *c : "<missing>";
  }

  void start_fake(const json& scenarios) {
    fakellm::Options o;
    o.scenarios = scenarios;
    o.workdir = ws_;
    o.log_path = run_ / "fake-requests.jsonl";
    auto s = fakellm::Server::start(o);
    ASSERT_TRUE(s.ok()) << s.status().message();
    server_ = std::move(s).value();
  }

  template <typename Config>
  void configure(Config& c, const std::string& base_url) {
    c.base_url = base_url;
    c.model = "gpt-5.5";
    c.kda_binary = kda_binary();
    c.sessions_dir = run_ / "sessions";
    c.api_retries = 0;
    c.keep_session_dirs = std::getenv("KDA_E2E_KEEP") != nullptr;
  }

  std::unique_ptr<Backend> claude(bool guard_hook = true) {
    auto bin = find_agent_cli("", "KDA_CLAUDE_BIN", "claude");
    if (!bin.ok()) return nullptr;
    ClaudeCodeConfig c;
    configure(c, server_->base_url());
    c.model = "claude-sonnet-4-5";
    c.env = {"ANTHROPIC_API_KEY=fake-key"};
    c.guard_hook = guard_hook;
    return make_claude_code_backend(c);
  }
  std::unique_ptr<Backend> codex() {
    auto bin = find_agent_cli("", "KDA_CODEX_BIN", "codex");
    if (!bin.ok()) return nullptr;
    CodexConfig c;
    configure(c, server_->base_url() + "/v1");
    c.api_key_env = "KDA_E2E_CODEX_KEY";
    c.env = {"KDA_E2E_CODEX_KEY=fake-key"};
    return make_codex_backend(c);
  }

  SessionRequest request(Role role, const std::string& prompt) {
    SessionRequest r;
    r.role = role;
    r.phase = role == Role::kWriter ? "round" : "review";
    r.system_prompt = "You are kda's " + std::string(role_name(role)) + ".";
    r.prompt = prompt;
    r.workspace = ws_;
    if (role == Role::kWriter) r.writable = {ws_ / "solution"};
    r.readable = {run_ / "pack", run_ / "plan.md"};
    r.tools = &tools_;
    r.timeout = std::chrono::seconds(240);
    r.max_turns = 60;
    return r;
  }

  void expect_protected_unchanged() {
    for (size_t i = 0; i < std::size(kProtected); ++i)
      EXPECT_EQ(util_hash(run_ / kProtected[i]), hashes_[i]) << kProtected[i] << " was changed by the agent";
  }

  static std::string dump_events(const SessionResult& r) {
    std::string s;
    for (const auto& e : r.events) s += e.kind + (e.ok ? " ok " : " FAILED ") + e.detail.dump().substr(0, 300) + "\n";
    return s;
  }

  stdfs::path run_, ws_;
  std::vector<std::string> hashes_;
  std::unique_ptr<fakellm::Server> server_;
  RunTools tools_;
};

#define REQUIRE_BACKEND(b, what)                                                          \
  if (!(b))                                                                               \
  GTEST_SKIP() << what << " CLI not installed: run scripts/install-agent-clis.sh or set " \
               << (std::string(what) == "claude" ? "KDA_CLAUDE_BIN" : "KDA_CODEX_BIN")

// ----------------------------------------------------------------------------------------------
// Writers and reviewers

TEST_F(AgentsE2E, ClaudeWriterWritesTheSolutionAndFinishesTheRoundOverMcp) {
  // Claude's Write refuses to overwrite a file it has not read in this session: read it first.
  start_fake(json::parse(R"([{"name":"w","match":"improve the kernel","steps":[
    {"tool":"read","input":{"path":"solution/kernel.cu"}},
    {"tool":"write","input":{"path":"solution/kernel.cu","content":"// tiled by claude\n"}},
    {"tool":"evaluate","input":{}},
    {"tool":"finish_round","input":{"summary":"tiled the kernel","claims":["faster"]}},
    {"text":"Round done: ${last_tool_result}"}]}])"));
  auto b = claude();
  REQUIRE_BACKEND(b, "claude");
  auto r = b->run_session(request(Role::kWriter, "Round 1: improve the kernel."));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*fs::read_file(ws_ / "solution" / "kernel.cu"), "// tiled by claude\n") << dump_events(*r);
  // Claude appends a <system-reminder> to tool results; the scripted text echoes it.
  EXPECT_TRUE(r->final_text.starts_with("Round done: round finished")) << r->final_text;
  ASSERT_EQ(tools_.calls.size(), 2u) << dump_events(*r);
  EXPECT_EQ(tools_.calls[1].first, "finish_round");
  EXPECT_EQ(tools_.calls[1].second["summary"], "tiled the kernel");
  bool wrote = false;
  for (const auto& e : r->events) wrote = wrote || (e.kind == "file_write" && e.ok);
  EXPECT_TRUE(wrote) << dump_events(*r);
  EXPECT_GT(r->usage.input_tokens, 0);
  EXPECT_GE(r->turns, 4);
  expect_protected_unchanged();
}

TEST_F(AgentsE2E, CodexWriterPatchesAndRunsCommandsAndFinishesTheRoundOverMcp) {
  start_fake(json::parse(R"([{"name":"w","match":"improve the kernel","steps":[
    {"tool":"write","input":{"path":"solution/kernel.cu","content":"// tiled by codex\n"}},
    {"tool":"shell","input":{"command":"printf 'notes\\n' > solution/notes.txt"}},
    {"tool":"finish_round","input":{"summary":"tiled the kernel","claims":[]}},
    {"text":"Round done: ${last_tool_result}"}]}])"));
  auto b = codex();
  REQUIRE_BACKEND(b, "codex");
  auto r = b->run_session(request(Role::kWriter, "Round 1: improve the kernel."));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*fs::read_file(ws_ / "solution" / "kernel.cu"), "// tiled by codex\n") << dump_events(*r);
  EXPECT_EQ(*fs::read_file(ws_ / "solution" / "notes.txt"), "notes\n") << dump_events(*r);
  ASSERT_EQ(tools_.calls.size(), 1u) << dump_events(*r);
  EXPECT_EQ(tools_.calls[0].first, "finish_round");
  EXPECT_NE(r->final_text.find("Round done"), std::string::npos) << r->final_text;
  int ok_writes = 0, ok_commands = 0;
  for (const auto& e : r->events) {
    ok_writes += e.kind == "file_write" && e.ok;
    ok_commands += e.kind == "command" && e.ok;
  }
  EXPECT_GE(ok_writes, 1) << dump_events(*r);
  EXPECT_GE(ok_commands, 1) << dump_events(*r);
  EXPECT_GT(r->usage.input_tokens, 0);
  expect_protected_unchanged();
}

// A reviewer reads, calls a read-only tool, cannot write (its write attempt fails), cannot call
// finish_round, and ends with the decision text.
void reviewer_session(AgentsE2E* t, Backend* b, std::vector<std::pair<std::string, json>>* calls,
                      const SessionRequest& req, const stdfs::path& kernel) {
  auto r = b->run_session(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->final_text, "DECISION: CONTINUE\nPROGRESS: ADVANCED");
  EXPECT_EQ(*fs::read_file(kernel), "// baseline\n");
  ASSERT_GE(calls->size(), 1u);
  EXPECT_EQ((*calls)[0].first, "evaluate");
  for (const auto& c : *calls) EXPECT_NE(c.first, "finish_round");
  bool failed_write = false;
  for (const auto& e : r->events)
    failed_write = failed_write || ((e.kind == "command" || e.kind == "file_write") && !e.ok);
  EXPECT_TRUE(failed_write);
  (void)t;
}

const char* kReviewerScenario = R"([{"name":"r","match":"review round 1","steps":[
    {"tool":"shell","input":{"command":"cat solution/kernel.cu"}},
    {"tool":"evaluate","input":{}},
    {"tool":"shell","input":{"command":"echo hacked > solution/kernel.cu"}},
    {"text":"DECISION: CONTINUE\nPROGRESS: ADVANCED"}]}])";

TEST_F(AgentsE2E, ClaudeReviewerDecidesAndCannotWrite) {
  start_fake(json::parse(kReviewerScenario));
  auto b = claude();
  REQUIRE_BACKEND(b, "claude");
  reviewer_session(this, b.get(), &tools_.calls, request(Role::kReviewer, "Please review round 1."),
                   ws_ / "solution" / "kernel.cu");
  expect_protected_unchanged();
}

TEST_F(AgentsE2E, CodexReviewerDecidesAndCannotWrite) {
  start_fake(json::parse(kReviewerScenario));
  auto b = codex();
  REQUIRE_BACKEND(b, "codex");
  reviewer_session(this, b.get(), &tools_.calls, request(Role::kReviewer, "Please review round 1."),
                   ws_ / "solution" / "kernel.cu");
  expect_protected_unchanged();
}

// ----------------------------------------------------------------------------------------------
// Attacks

// The scripted writer goes after every protected file through its edit tool, a shell command,
// python3 -c and a nohup'd background process, then waits for the background process and reports
// how many of its writes failed (exit status = number of failures).
json attack_scenario(const stdfs::path& run, const stdfs::path& ws) {
  json steps = json::array();
  std::string files;
  for (const char* p : kProtected) {
    steps.push_back(
        {{"tool", "write"}, {"input", {{"path", (run / p).string()}, {"content", "pwned by the edit tool\n"}}}});
    files += " " + (run / p).string();
  }
  const std::string bg_done = (ws / "solution" / "bg_done").string();
  steps.push_back({{"tool", "shell"},
                   {"input",
                    {{"command", "n=0; for f in" + files +
                                     "; do (echo pwned >> \"$f\") 2>/dev/null || n=$((n+1)); done; exit $n"}}}});
  steps.push_back({{"tool", "shell"},
                   {"input",
                    {{"command",
                      "python3 -c 'import sys\nn = 0\nfor f in sys.argv[1:]:\n    try:\n        open(f, "
                      "\"a\").write(\"pwned\")\n    except OSError:\n        n += 1\nsys.exit(n)'" +
                          files}}}});
  // A plain nohup'd background process (the CLI may kill it with the command's process group)...
  steps.push_back({{"tool", "shell"},
                   {"input",
                    {{"command", "nohup sh -c 'sleep 1; for f in" + files +
                                     "; do echo pwned >> \"$f\"; done' > /dev/null 2>&1 &"}}}});
  // ...and one that leaves the group with setsid, so it surely outlives the command that started it.
  steps.push_back({{"tool", "shell"},
                   {"input",
                    {{"command", "setsid nohup sh -c 'sleep 1; n=0; for f in" + files +
                                     "; do (echo pwned >> \"$f\") 2>/dev/null || n=$((n+1)); done; echo $n > " +
                                     bg_done + "' > /dev/null 2>&1 &"}}}});
  steps.push_back({{"tool", "shell"}, {"input", {{"command", "sleep 3; exit $(cat " + bg_done + ")"}}}});
  steps.push_back({{"text", "attack finished"}});
  return json::array({{{"name", "attack"}, {"match", "attack round"}, {"steps", steps}}});
}

void check_attack(AgentsE2E* t, const SessionResult& r, const stdfs::path& run, const stdfs::path& ws) {
  (void)t;
  // Every edit-tool attempt is a failed file_write naming its target.
  for (const char* p : kProtected) {
    bool failed = false, succeeded = false;
    for (const auto& e : r.events) {
      if (e.kind != "file_write") continue;
      const std::string path = e.detail.value("path", "");
      if (path.find(p) == std::string::npos) continue;
      (e.ok ? succeeded : failed) = true;
    }
    EXPECT_TRUE(failed) << "no failed file_write event for " << p;
    EXPECT_FALSE(succeeded) << "a write to " << p << " was recorded as a success";
  }
  // The shell, python3 -c and background-wait commands each failed (exit = number of blocked writes).
  int failed_commands = 0;
  for (const auto& e : r.events)
    if (e.kind == "command" && !e.ok) ++failed_commands;
  EXPECT_GE(failed_commands, 3);
  auto bg = fs::read_file(ws / "solution" / "bg_done");
  ASSERT_TRUE(bg.ok()) << "the background process never ran";
  EXPECT_EQ(*bg, "5\n") << "the background process wrote a protected file";
  (void)run;
}

std::string events_text(const SessionResult& r) {
  std::string s;
  for (const auto& e : r.events) s += e.kind + (e.ok ? " ok " : " FAILED ") + e.detail.dump().substr(0, 240) + "\n";
  return s;
}

TEST_F(AgentsE2E, ClaudeWriterAttacksAreBlocked) {
  start_fake(attack_scenario(run_, ws_));
  auto b = claude();
  REQUIRE_BACKEND(b, "claude");
  auto r = b->run_session(request(Role::kWriter, "The attack round begins."));
  ASSERT_TRUE(r.ok()) << r.status().message();
  expect_protected_unchanged();
  check_attack(this, *r, run_, ws_);
  EXPECT_EQ(r->final_text, "attack finished") << events_text(*r);
}

// Without Claude's PreToolUse guard, the OS sandbox alone stops the edit tool.
TEST_F(AgentsE2E, ClaudeWriterAttacksAreBlockedWithoutTheGuardHook) {
  start_fake(attack_scenario(run_, ws_));
  auto b = claude(/*guard_hook=*/false);
  REQUIRE_BACKEND(b, "claude");
  auto r = b->run_session(request(Role::kWriter, "The attack round begins."));
  ASSERT_TRUE(r.ok()) << r.status().message();
  expect_protected_unchanged();
  check_attack(this, *r, run_, ws_);
}

TEST_F(AgentsE2E, CodexWriterAttacksAreBlocked) {
  start_fake(attack_scenario(run_, ws_));
  auto b = codex();
  REQUIRE_BACKEND(b, "codex");
  auto r = b->run_session(request(Role::kWriter, "The attack round begins."));
  ASSERT_TRUE(r.ok()) << r.status().message();
  expect_protected_unchanged();
  check_attack(this, *r, run_, ws_);
  EXPECT_EQ(r->final_text, "attack finished") << events_text(*r);
}

// ----------------------------------------------------------------------------------------------
// Failures owned by kda

TEST_F(AgentsE2E, ClaudeApiFailureIsAnErrorAfterBoundedRetries) {
  start_fake(json::parse(R"({"scenarios":[{"name":"down","match":"","steps":[{"text":"never"}]}],
                             "faults":[{"status":500,"times":"always"}]})"));
  auto b = claude();
  REQUIRE_BACKEND(b, "claude");
  auto r = b->run_session(request(Role::kWriter, "anything"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("2 attempts"), std::string::npos) << r.status().message();
  EXPECT_EQ(server_->log().size(), 2u);  // one request per attempt: CLI retries off, kda retried once
}

TEST_F(AgentsE2E, CodexApiFailureIsAnErrorAfterBoundedRetries) {
  start_fake(json::parse(R"({"scenarios":[{"name":"down","match":"","steps":[{"text":"never"}]}],
                             "faults":[{"status":401,"times":"always"}]})"));
  auto b = codex();
  REQUIRE_BACKEND(b, "codex");
  auto r = b->run_session(request(Role::kWriter, "anything"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("2 attempts"), std::string::npos) << r.status().message();
  EXPECT_EQ(server_->log().size(), 2u);
}

TEST_F(AgentsE2E, SessionTimeoutIsOwnedByKda) {
  start_fake(json::parse(R"([{"name":"slow","match":"slow","steps":[
    {"tool":"shell","input":{"command":"sleep 60"}},{"text":"late"}]}])"));
  auto b = codex();
  REQUIRE_BACKEND(b, "codex");
  auto req = request(Role::kWriter, "a slow round");
  req.timeout = std::chrono::seconds(8);
  auto start = std::chrono::steady_clock::now();
  auto r = b->run_session(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

}  // namespace
}  // namespace kda::agent

namespace kda::agent {
namespace {

// `kda mcp` as an MCP client sees it, standalone on a workspace (no agent CLI needed).
TEST(KdaMcp, StandaloneWorkspaceToolsOverStdio) {
  const std::string kda = kda_binary();
  if (!stdfs::exists(kda)) GTEST_SKIP() << "kda binary not built: " << kda;
  auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-mcp-stdio");
  ASSERT_TRUE(d.ok());
  stdfs::create_directories(*d / "ws" / "solution");
  std::ofstream(*d / "ws" / "solution" / "k.cu") << "// kernel\n";
  std::ofstream(*d / "requests.jsonl")
      << R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})"
      << "\n"
      << R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
      << "\n"
      << R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})"
      << "\n"
      << R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"solution/k.cu"}}})"
      << "\n"
      << R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"solution/k.cu","content":"x"}}})"
      << "\n";
  proc::RunOptions o;
  o.argv = {"/bin/sh",
            "-c",
            "exec \"$0\" mcp --role reviewer --workspace \"$1\" < \"$2\"",
            kda,
            (*d / "ws").string(),
            (*d / "requests.jsonl").string()};
  o.timeout_seconds = 60;
  auto r = proc::run(o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->exit.success()) << r->stderr_text;
  const std::vector<json> replies = json_lines(r->stdout_text);
  ASSERT_EQ(replies.size(), 4u) << r->stdout_text;
  EXPECT_EQ(replies[0]["result"]["protocolVersion"], "2025-06-18");
  bool has_read = false, has_write = false;
  for (const auto& t : replies[1]["result"]["tools"]) {
    has_read = has_read || t["name"] == "read_file";
    has_write = has_write || t["name"] == "write_file";
  }
  EXPECT_TRUE(has_read);
  EXPECT_FALSE(has_write);  // reviewer: read-only tools only
  EXPECT_EQ(replies[2]["result"]["isError"], false);
  EXPECT_NE(replies[2]["result"]["content"][0]["text"].get<std::string>().find("// kernel"), std::string::npos);
  EXPECT_EQ(replies[3]["error"]["code"], -32602);
  EXPECT_EQ(*fs::read_file(*d / "ws" / "solution" / "k.cu"), "// kernel\n");
  stdfs::remove_all(*d);
}

}  // namespace
}  // namespace kda::agent

namespace kda::agent {
namespace {

// `kda run` on the built-in host GEMM pack with Claude Code writing and Codex reviewing, and the
// reverse, both scripted by one kda-fake-llm scenario set (the write/read/shell aliases resolve
// to each CLI's own tools). The writer plans, then in round 1 reads kernel.cc, replaces it with a
// blocked kernel, evaluates and calls finish_round over MCP; the reviewer approves the plan and
// completes the run. The final solution must pass on all workloads and beat the target.
class AgentsFullRun : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(AgentsFullRun, RealClisImproveTheHostGemmPack) {
  const std::string kda = kda_binary();
  if (!stdfs::exists(kda)) GTEST_SKIP() << "kda binary not built: " << kda;
  if (sandbox::landlock_abi() < 4) GTEST_SKIP() << "the agent sandbox needs Landlock ABI >= 4";
  if (!find_agent_cli("", "KDA_CLAUDE_BIN", "claude").ok() || !find_agent_cli("", "KDA_CODEX_BIN", "codex").ok())
    GTEST_SKIP() << "agent CLIs not installed: run scripts/install-agent-clis.sh";
  const stdfs::path source = KDA_SOURCE_DIR;
  auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-agents-run");
  ASSERT_TRUE(d.ok());
  const stdfs::path tmp = stdfs::canonical(*d);
  auto blocked = fs::read_file(source / "tests/e2e/loop/kernel_blocked.cc");
  ASSERT_TRUE(blocked.ok());
  // Reviewer scenarios first: a review prompt quotes the plan and the round contract.
  json scenarios = json::array();
  scenarios.push_back({{"name", "plan-review"},
                       {"match", "Plan review 1 of"},
                       {"steps", {{{"text", "Hypotheses are grounded in the baseline.\nPLAN: APPROVE"}}}}});
  scenarios.push_back({{"name", "review-1"},
                       {"match", "Review of round 1."},
                       {"steps", {{{"text", "kda verified the speedup.\nDECISION: COMPLETE\nPROGRESS: ADVANCED"}}}}});
  scenarios.push_back({{"name", "plan"},
                       {"match", "Plan phase, draft 1."},
                       {"steps",
                        {{{"text",
                           "# Plan\nBaseline: naive i-j-k loops.\nDirections: 1. block rows of C.\n"
                           "Risks: summation order.\nFirst steps: block four rows, evaluate.\n"}}}}});
  scenarios.push_back(
      {{"name", "round-1"},
       {"match", "# Round 1 contract"},
       {"steps",
        {{{"tool", "read"}, {"input", {{"path", "kernel.cc"}}}},
         {{"tool", "write"}, {"input", {{"path", "kernel.cc"}, {"content", *blocked}}}},
         {{"tool", "evaluate"}, {"input", json::object()}},
         {{"tool", "finish_round"},
          {"input", {{"summary", "Blocked four rows of C per pass over B."}, {"claims", json::array()}}}},
         {{"text", "Round 1 done."}}}}});
  fakellm::Options o;
  o.scenarios = scenarios;
  o.log_path = tmp / "fake-requests.jsonl";
  auto server = fakellm::Server::start(o);
  ASSERT_TRUE(server.ok()) << server.status().message();
  const std::string url = (*server)->base_url();
  auto spec = [&](const std::string& kind) {
    return kind == "claude-code"
               ? "claude-code:claude-sonnet-4-5?base_url=" + url + "&key_env=KDA_E2E_KEY&api_retries=0"
               : "codex:gpt-5.5?base_url=" + url + "/v1&key_env=KDA_E2E_KEY&api_retries=0";
  };
  const stdfs::path run_dir = tmp / "run";
  proc::RunOptions ro;
  ro.argv = {kda,
             "run",
             (source / "tasks/host/gemm").string(),
             "--writer",
             spec(GetParam().first),
             "--reviewer",
             spec(GetParam().second),
             "--target",
             "1.2x",
             "--run-dir",
             run_dir.string(),
             "--max-rounds",
             "3",
             "--eval-trials",
             "1",
             "--eval-iterations",
             "5",
             "--eval-warmup",
             "1",
             "--final-trials",
             "2",
             "--min-improvement",
             "0.1",
             "--json"};
  ro.env = proc::current_environment();
  ro.env->push_back("KDA_E2E_KEY=fake-key");
  ro.env->push_back("KDA_CACHE_DIR=" + (tmp / "cache").string());
  ro.timeout_seconds = 900;
  auto r = proc::run(ro);
  ASSERT_TRUE(r.ok());
  (*server)->stop();
  EXPECT_EQ(r->exit.exit_code, 0) << r->stdout_text << "\n" << r->stderr_text.substr(0, 4000);
  auto read_json = [](const stdfs::path& p) {
    auto t = fs::read_file(p);
    return t.ok() ? json::parse(*t, nullptr, false) : json();
  };
  auto state = read_json(run_dir / "state.json");
  ASSERT_TRUE(state.is_object());
  EXPECT_EQ(state["phase"], "done") << state.dump(1);
  auto check = read_json(run_dir / "final/check.json");
  ASSERT_TRUE(check.is_object());
  EXPECT_TRUE(check["met"].get<bool>()) << check.dump(1);
  EXPECT_TRUE(check["eval"]["all_passed"].get<bool>());
  EXPECT_GE(check["eval"]["geomean"].get<double>(), 1.2);
  // The CLIs' actions are in the audit log: the writer's edit as a successful file_write, and
  // kda's tools called over MCP.
  auto audit = fs::read_file(run_dir / "audit.jsonl");
  ASSERT_TRUE(audit.ok());
  EXPECT_NE(audit->find("\"kind\":\"file_write\""), std::string::npos);
  EXPECT_NE(audit->find("\"tool\":\"finish_round\""), std::string::npos);
  proc::RunOptions v;
  v.argv = {kda, "audit", "verify", run_dir.string()};
  v.timeout_seconds = 60;
  auto vr = proc::run(v);
  ASSERT_TRUE(vr.ok());
  EXPECT_TRUE(vr->exit.success()) << vr->stderr_text;
  if (!HasFailure()) stdfs::remove_all(tmp);
}

INSTANTIATE_TEST_SUITE_P(Pairs, AgentsFullRun,
                         ::testing::Values(std::make_pair("claude-code", "codex"),
                                           std::make_pair("codex", "claude-code")),
                         [](const auto& info) {
                           return std::string(info.param.first[0] == 'c' && info.param.first[1] == 'l'
                                                  ? "ClaudeWritesCodexReviews"
                                                  : "CodexWritesClaudeReviews");
                         });

}  // namespace
}  // namespace kda::agent

namespace kda::agent {
namespace {

// A workspace holding a solution for the host rmsnorm pack, and a copy of that pack, as a user
// who runs their own agent has them.
struct OwnWorkspace {
  stdfs::path root, ws, pack;
  std::string uuid;  // one dev workload: each evaluation stays short
  static OwnWorkspace make(const std::string& name) {
    OwnWorkspace o;
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), name);
    EXPECT_TRUE(d.ok());
    o.root = stdfs::canonical(*d);
    o.ws = o.root / "ws";
    o.pack = o.root / "pack";
    const stdfs::path source = KDA_SOURCE_DIR;
    stdfs::copy(source / "tests/fixtures/solutions/host_rmsnorm/fast", o.ws, stdfs::copy_options::recursive);
    stdfs::copy(source / "tasks/host/rmsnorm", o.pack, stdfs::copy_options::recursive);
    auto lines = fs::read_file(o.pack / "workloads.jsonl");
    EXPECT_TRUE(lines.ok());
    o.uuid = json::parse(lines->substr(0, lines->find('\n')))["workload"]["uuid"].get<std::string>();
    return o;
  }
  std::vector<std::string> mcp_args() const {
    return {"mcp",         "--workspace",      ws.string(), "--writable",  "kernel.cc", "--task",
            pack.string(), "--eval-workloads", uuid,        "--max-evals", "3"};
  }
  std::string pack_toml() const { return *fs::read_file(pack / "task.toml"); }
};

// `kda mcp --workspace --task` over stdio (no agent CLI): evaluate and ledger are offered (no
// finish_round), evaluate gives the official verdict, a write to the pack is refused, and a
// --writable path that contains the pack is refused at start.
TEST(KdaMcp, StandaloneEvaluateJudgesTheWorkspaceAndRefusesPackWrites) {
  const std::string kda = kda_binary();
  if (!stdfs::exists(kda)) GTEST_SKIP() << "kda binary not built: " << kda;
  OwnWorkspace own = OwnWorkspace::make("kda-mcp-task");
  const std::string toml = own.pack_toml();
  json write = {
      {"jsonrpc", "2.0"},
      {"id", 4},
      {"method", "tools/call"},
      {"params",
       {{"name", "write_file"}, {"arguments", {{"path", (own.pack / "task.toml").string()}, {"content", "x"}}}}}};
  std::ofstream(own.root / "requests.jsonl")
      << R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})"
      << "\n"
      << R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
      << "\n"
      << R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})"
      << "\n"
      << R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"evaluate","arguments":{}}})"
      << "\n"
      << write.dump() << "\n"
      << R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"ledger","arguments":{}}})"
      << "\n";
  proc::RunOptions o;
  o.argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\" < \"$KDA_REQUESTS\"", kda};
  for (const auto& a : own.mcp_args()) o.argv.push_back(a);
  o.env = proc::current_environment();
  o.env->push_back("KDA_REQUESTS=" + (own.root / "requests.jsonl").string());
  o.env->push_back("KDA_CACHE_DIR=" + (own.root / "cache").string());
  o.timeout_seconds = 120;
  auto r = proc::run(o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->exit.success()) << r->stderr_text;
  const std::vector<json> replies = json_lines(r->stdout_text);
  ASSERT_EQ(replies.size(), 5u) << r->stdout_text;
  EXPECT_NE(replies[0]["result"]["instructions"].get<std::string>().find("evaluate"), std::string::npos);
  std::set<std::string> names;
  for (const auto& t : replies[1]["result"]["tools"]) names.insert(t["name"].get<std::string>());
  EXPECT_TRUE(names.count("evaluate") && names.count("ledger") && names.count("write_file"));
  EXPECT_FALSE(names.count("finish_round"));
  EXPECT_EQ(replies[2]["result"]["isError"], false) << replies[2].dump();
  const std::string verdict = replies[2]["result"]["content"][0]["text"];
  EXPECT_NE(verdict.find("PASSED"), std::string::npos) << verdict;
  EXPECT_NE(verdict.find(own.uuid), std::string::npos) << verdict;
  const bool refused = replies[3].contains("error") || replies[3]["result"]["isError"] == true;
  EXPECT_TRUE(refused) << replies[3].dump();
  EXPECT_EQ(own.pack_toml(), toml);
  EXPECT_NE(replies[4]["result"]["content"][0]["text"].get<std::string>().find("\"incumbent\": \"e1\""),
            std::string::npos)
      << replies[4].dump();

  proc::RunOptions bad;
  bad.argv = {kda, "mcp", "--workspace", own.root.string(), "--writable", ".", "--task", own.pack.string()};
  bad.timeout_seconds = 30;
  auto b = proc::run(bad);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->exit.exit_code, 2);
  EXPECT_NE(b->stderr_text.find("contains the task pack"), std::string::npos) << b->stderr_text;
  bad.argv = {kda, "mcp", "--workspace", own.root.string(), "--profiles", (own.root / "profiles").string()};
  b = proc::run(bad);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->exit.exit_code, 2);
  EXPECT_NE(b->stderr_text.find("--profiles needs --task PACK"), std::string::npos) << b->stderr_text;
  stdfs::remove_all(own.root);
}

// The real CLIs as a user runs them with their own MCP configuration (kda mcp --workspace --task,
// no kda session behind it, no kda sandbox around the CLI): the scripted agent tries to rewrite
// the pack through kda's write_file, then evaluates and quotes the verdict. The verdict is kda's
// official one and the pack is unchanged.
class OwnAgentEvaluates : public ::testing::TestWithParam<const char*> {};

TEST_P(OwnAgentEvaluates, ThroughKdaMcpTask) {
  const std::string kda = kda_binary();
  if (!stdfs::exists(kda)) GTEST_SKIP() << "kda binary not built: " << kda;
  const bool is_claude = std::string(GetParam()) == "claude";
  if (!find_agent_cli("", is_claude ? "KDA_CLAUDE_BIN" : "KDA_CODEX_BIN", GetParam()).ok())
    GTEST_SKIP() << GetParam() << " CLI not installed: run scripts/install-agent-clis.sh";
  OwnWorkspace own = OwnWorkspace::make("kda-own-agent");
  const std::string toml = own.pack_toml();
  fakellm::Options fo;
  json steps = json::array();
  steps.push_back(
      {{"tool", "write_file"}, {"input", {{"path", (own.pack / "task.toml").string()}, {"content", "atol = 1e9\n"}}}});
  steps.push_back({{"tool", "evaluate"}, {"input", json::object()}});
  steps.push_back({{"text", "Verdict: ${last_tool_result}"}});
  fo.scenarios = json::array();
  fo.scenarios.push_back({{"name", "own"}, {"match", "evaluate my kernel"}, {"steps", steps}});
  fo.workdir = own.ws;
  fo.log_path = own.root / "fake-requests.jsonl";
  auto server = fakellm::Server::start(fo);
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::unique_ptr<Backend> backend;
  auto common = [&](CliAgentConfig& c) {
    c.kda_binary = kda;
    c.sessions_dir = own.root / "sessions";
    c.api_retries = 0;
    c.os_sandbox = false;  // the user's own CLI: kda does not sandbox it
    c.require_os_sandbox = false;
    c.mcp_server_args = own.mcp_args();
    c.env = {"KDA_CACHE_DIR=" + (own.root / "cache").string()};
  };
  if (is_claude) {
    ClaudeCodeConfig c;
    common(c);
    c.base_url = (*server)->base_url();
    c.model = "claude-sonnet-4-5";
    c.env.push_back("ANTHROPIC_API_KEY=fake-key");
    c.guard_hook = false;
    backend = make_claude_code_backend(c);
  } else {
    CodexConfig c;
    common(c);
    c.base_url = (*server)->base_url() + "/v1";
    c.model = "gpt-5.5";
    c.api_key_env = "KDA_E2E_CODEX_KEY";
    c.env.push_back("KDA_E2E_CODEX_KEY=fake-key");
    backend = make_codex_backend(c);
  }
  setenv("KDA_E2E_CODEX_KEY", "fake-key", 1);
  SessionRequest req;
  req.role = Role::kWriter;
  req.phase = "round";
  req.prompt = "Please evaluate my kernel.";
  req.workspace = own.ws;
  req.writable = {own.ws / "kernel.cc"};
  req.timeout = std::chrono::seconds(240);
  req.max_turns = 20;
  auto r = backend->run_session(req);
  (*server)->stop();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NE(r->final_text.find("PASSED"), std::string::npos) << r->final_text;
  EXPECT_NE(r->final_text.find(own.uuid), std::string::npos) << r->final_text;
  EXPECT_EQ(own.pack_toml(), toml) << "the pack was changed from the session";
  if (!HasFailure()) stdfs::remove_all(own.root);
}

INSTANTIATE_TEST_SUITE_P(Clis, OwnAgentEvaluates, ::testing::Values("claude", "codex"),
                         [](const auto& info) { return std::string(info.param) == "claude" ? "Claude" : "Codex"; });

}  // namespace
}  // namespace kda::agent
