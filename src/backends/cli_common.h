// What the Claude Code and Codex backends share: configuration, per-session directories, the
// environment built from scratch, the Landlock policy applied in the child before exec, and a
// runner that streams the CLI's JSONL to a parser under a kda-owned timeout.
//
// Guarantees come from the OS, not from the CLIs: the CLI process (and everything it spawns,
// including background processes and `python3 -c`) runs under Landlock; it may write only
// SessionRequest::writable plus its own session HOME/TMP, and connect over TCP only to the API
// endpoint's port. kda's tools reach it over MCP through a unix socket in a directory it can read
// but not write. The CLIs' own guards (Claude's PreToolUse hook, Codex's sandbox) are configured
// too, as defence in depth.
#pragma once

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/backend.h"
#include "backends/cli_parse_util.h"
#include "mcp/tool_socket.h"
#include "proc/subprocess.h"
#include "sandbox/landlock.h"
#include "util/status.h"
#include "util/strings.h"

namespace kda::agent {

struct CliAgentConfig {
  // The CLI's executable; empty: KDA_CLAUDE_BIN / KDA_CODEX_BIN, then the install cache
  // (scripts/install-agent-clis.sh), then PATH.
  std::filesystem::path binary;
  std::string model;                  // passed through verbatim; empty: the CLI's default
  std::string base_url;               // API endpoint; empty: the provider's public API
  std::string api_key_env;            // variable in kda's environment holding the key; empty: the CLI's usual one
  std::vector<std::string> env;       // extra KEY=VALUE for the CLI (provider settings, proxies)
  std::vector<std::string> pass_env;  // names copied from kda's environment when set
  // kda's own executable (MCP proxy and guard hook); empty: /proc/self/exe.
  std::filesystem::path kda_binary;
  // Kda-owned parent of the per-session directories; empty: $TMPDIR/kda-agents.
  std::filesystem::path sessions_dir;
  bool os_sandbox = true;          // Landlock around the CLI (tests of the CLI guards alone turn it off)
  bool require_os_sandbox = true;  // refuse to run when Landlock is unavailable
  int max_start_attempts = 2;      // a CLI that fails before its first model turn is started again
  int api_retries = 2;             // the CLI's own retries of a failed API request (0 in tests)
  bool keep_session_dirs = false;  // for debugging; default: removed after the session
  std::vector<std::string> extra_args;
  // Arguments of the kda MCP server the CLI starts (`kda <args>`); empty: `mcp --connect` to this
  // session's tool socket. E.g. {"mcp", "--workspace", DIR, "--task", PACK}: the CLI as a user runs
  // it with kda's standalone server, whose tools kda does not serve from this process.
  std::vector<std::string> mcp_server_args;
};

// Finds a CLI: `configured` if set, else $<env_var>, else <cache>/<subdir>/node_modules/.bin/<name>
// (cache: $KDA_AGENT_CLIS_DIR or ~/.cache/kda/agent-clis), else PATH. kNotFound names all of them.
Result<std::filesystem::path> find_agent_cli(const std::filesystem::path& configured, const char* env_var,
                                             const std::string& name);

// The TCP port of an http(s) URL (explicit, else 80/443); nullopt when it cannot be parsed.
std::optional<int> url_port(std::string_view url);

// One session's directories, all under a fresh kda-owned directory:
//   root/home (HOME), root/tmp (TMPDIR), root/codex_home, root/kda (tool socket, CLI configs;
//   readable by the agent, never writable).
struct SessionDirs {
  std::filesystem::path root, home, tmp, codex_home, kda;
  std::filesystem::path socket;  // root/kda/tools.sock, or a short private dir in /tmp when too long
};
Result<SessionDirs> make_session_dirs(const std::filesystem::path& sessions_dir, const std::string& prefix);
void remove_session_dirs(const SessionDirs& dirs);

// The Landlock policy of a CLI agent: read and execute anywhere; write the request's writable
// paths (writers only) and the session's home/tmp/codex_home; character devices a shell needs
// (/dev/null, /dev/tty, ptys); TCP connect only to `api_port`.
sandbox::LandlockPolicy agent_landlock_policy(const SessionRequest& request, const SessionDirs& dirs,
                                              std::optional<int> api_port);

// The environment of a CLI, built from scratch: PATH, HOME, TMPDIR, LANG, then `extra`, then the
// config's env and pass_env.
std::vector<std::string> base_cli_environment(const SessionDirs& dirs, const CliAgentConfig& config);
// Value of `name` in kda's environment ("" if unset).
std::string getenv_or_empty(const std::string& name);

// Streams a CLI's stdout lines to `on_line` until it exits, `on_line` returns false (the session
// is cut: e.g. too many turns) or `timeout` passes; in the last two cases the whole process group
// is killed. The child runs in `cwd` with exactly `env`, stdin from /dev/null,
// under `landlock` when given.
struct CliRun {
  proc::ExitInfo exit;
  bool cut = false;         // on_line asked to stop
  std::string stderr_tail;  // last few KB of stderr
};
Result<CliRun> run_cli(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       const std::filesystem::path& cwd, const sandbox::PreparedLandlock* landlock,
                       std::chrono::seconds timeout, const std::function<bool(std::string_view)>& on_line);

// Collects a session's events from the stream parser (main thread) and the tool socket (its own
// thread): appends to result.events and calls request.on_event, one at a time.
class EventSink {
 public:
  EventSink(SessionResult* result, const SessionRequest* request) : result_(result), request_(request) {}
  void emit(AgentEvent event);

 private:
  SessionResult* result_;
  const SessionRequest* request_;
  std::mutex mu_;
};

// Hook command lines quote their words with util::shell_quote.
using util::shell_quote;

// kda's own executable (the MCP proxy and the guard hook): config.kda_binary, else /proc/self/exe.
std::filesystem::path kda_executable(const CliAgentConfig& config);

// kda's tools for one session, served on dirs.socket (reviewers: read-only tools); every call is
// reported to `sink`. Null when the request carries no tools.
Result<std::unique_ptr<mcp::ToolSocketServer>> serve_session_tools(const SessionRequest& request,
                                                                   const SessionDirs& dirs, EventSink& sink);

// What every CLI session starts with: the CLI found (config.binary, $<env_var>, the install cache,
// PATH), kda's own executable, a fresh session directory (removed when the session ends unless the
// config keeps it), the event sink and kda's tools served on the session's socket.
struct CliSession {
  std::filesystem::path binary, kda;
  SessionDirs dirs;
  bool keep_dirs = false;
  SessionResult result;
  EventSink sink;
  std::unique_ptr<mcp::ToolSocketServer> socket;  // null when the request carries no tools

  // `cli`: the executable's name ("claude", "codex"), also the session directory's prefix.
  static Result<std::unique_ptr<CliSession>> start(const CliAgentConfig& config, const SessionRequest& request,
                                                   const char* env_var, const std::string& cli);
  // The kda MCP server's arguments: the config's, else a proxy to this session's socket; empty when
  // the session serves no tools and the config names no server.
  std::vector<std::string> mcp_args(const CliAgentConfig& config, const SessionRequest& request) const;
  ~CliSession();  // the tool server first, then the directories it lives in

 private:
  explicit CliSession(const SessionRequest& request) : sink(&result, &request) {}
};

// The prepared Landlock around the CLI (agent_landlock_policy, TCP to the port of `api_url`).
// nullopt when config.os_sandbox is off, or Landlock is unavailable and not required; an error
// naming `cli` when it is required and unavailable.
Result<std::optional<sandbox::PreparedLandlock>> prepare_cli_landlock(const CliAgentConfig& config,
                                                                      const SessionRequest& request,
                                                                      const SessionDirs& dirs, std::string_view api_url,
                                                                      std::string_view cli);

// Runs the CLI and fills `result` from a fresh `Parser` per attempt. A CLI that ended before the
// agent did anything (`acted(parser)` false, not timed out, not cut, non-zero exit) failed to start
// (API down, bad configuration) and is started again, up to config.max_start_attempts; each retry
// is an event. Parsers provide feed, final_text, usage, turns and error (and finish when they
// buffer).
template <typename Parser>
Result<SessionResult> run_cli_attempts(std::string_view cli, const CliAgentConfig& config,
                                       const SessionRequest& request, const std::vector<std::string>& argv,
                                       const std::vector<std::string>& env, const sandbox::PreparedLandlock* landlock,
                                       EventSink& sink, SessionResult& result,
                                       const std::function<bool(const Parser&)>& acted) {
  using detail::clip;
  const std::string name(cli);
  const int attempts = std::max(1, config.max_start_attempts);
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    Parser parser(&sink);
    auto run = run_cli(argv, env, request.workspace, landlock, request.timeout, [&](std::string_view line) {
      parser.feed(line);
      return request.max_turns <= 0 || parser.turns() <= request.max_turns;
    });
    if (!run.ok()) return run.status().with_context(name);
    if constexpr (requires { parser.finish(); }) parser.finish();
    result.final_text = parser.final_text();
    result.usage = parser.usage();
    result.turns = parser.turns();
    result.timed_out = run->exit.timed_out;
    if (run->cut) sink.emit({"error", false, {{"source", "kda"}, {"error", "max_turns reached: session cut"}}});
    if (result.timed_out) sink.emit({"error", false, {{"source", "kda"}, {"error", "session timed out"}}});
    const bool started = acted(parser) || result.timed_out || run->cut;
    if (started || run->exit.success()) return result;
    std::string why =
        parser.error().empty() ? run->exit.describe() + ": " + clip(run->stderr_tail, 1000) : parser.error();
    if (attempt == attempts)
      return Status::io(name + " did not start (" + std::to_string(attempts) + " attempts): " + why);
    sink.emit({"retry", false, {{"source", "kda"}, {"attempt", attempt}, {"error", why}}});
  }
  return result;
}

}  // namespace kda::agent
