#include "backends/cli_common.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/fs.h"

namespace kda::agent {

namespace stdfs = std::filesystem;

std::string getenv_or_empty(const std::string& name) {
  const char* v = name.empty() ? nullptr : std::getenv(name.c_str());
  return v ? v : "";
}

Result<stdfs::path> find_agent_cli(const stdfs::path& configured, const char* env_var, const std::string& name) {
  std::error_code ec;
  if (!configured.empty()) {
    if (stdfs::exists(configured, ec)) return configured;
    return Status::not_found(name + " CLI not found at the configured path " + configured.string());
  }
  std::string from_env = getenv_or_empty(env_var);
  if (!from_env.empty()) {
    if (stdfs::exists(from_env, ec)) return stdfs::path(from_env);
    return Status::not_found(std::string(env_var) + "=" + from_env + " does not exist");
  }
  std::string cache = getenv_or_empty("KDA_AGENT_CLIS_DIR");
  stdfs::path cache_dir = cache.empty() ? fs::user_cache_dir() / "agent-clis" : stdfs::path(cache);
  stdfs::path cached = cache_dir / name / "node_modules" / ".bin" / name;
  if (name == "claude") {
    // The platform package's native binary works even when npm skipped the postinstall step.
    stdfs::path native = cache_dir / name / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64" / "claude";
    if (stdfs::exists(native, ec)) return native;
  }
  if (stdfs::exists(cached, ec)) return cached;
  auto on_path = proc::find_program(name);
  if (on_path.ok()) return *on_path;
  return Status::not_found(name + " CLI not found: set " + env_var + ", run scripts/install-agent-clis.sh (looked in " +
                           cached.string() + "), or put it on PATH");
}

std::optional<int> url_port(std::string_view url) {
  int default_port;
  if (url.starts_with("https://")) {
    default_port = 443;
    url.remove_prefix(8);
  } else if (url.starts_with("http://")) {
    default_port = 80;
    url.remove_prefix(7);
  } else {
    return std::nullopt;
  }
  url = url.substr(0, url.find_first_of("/?#"));
  if (auto at = url.rfind('@'); at != std::string_view::npos) url.remove_prefix(at + 1);
  if (url.empty()) return std::nullopt;
  size_t colon = url.rfind(':');
  size_t bracket = url.rfind(']');
  if (colon == std::string_view::npos || (bracket != std::string_view::npos && bracket > colon)) return default_port;
  std::string_view digits = url.substr(colon + 1);
  if (digits.empty() || digits.size() > 5) return std::nullopt;
  int port = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    port = port * 10 + (c - '0');
  }
  if (port <= 0 || port > 65535) return std::nullopt;
  return port;
}

Result<SessionDirs> make_session_dirs(const stdfs::path& sessions_dir, const std::string& prefix) {
  stdfs::path parent = sessions_dir;
  if (parent.empty()) {
    std::string tmp = getenv_or_empty("TMPDIR");
    parent = stdfs::path(tmp.empty() ? "/tmp" : tmp) / "kda-agents";
  }
  KDA_RETURN_IF_ERROR(fs::ensure_dir(parent));
  KDA_ASSIGN_OR_RETURN(stdfs::path root, fs::make_temp_dir(parent, prefix));
  SessionDirs d;
  d.root = root;
  d.home = root / "home";
  d.tmp = root / "tmp";
  d.codex_home = root / "codex_home";
  d.kda = root / "kda";
  for (const auto& p : {d.home, d.tmp, d.codex_home, d.kda}) KDA_RETURN_IF_ERROR(fs::ensure_dir(p));
  d.socket = d.kda / "tools.sock";
  if (d.socket.string().size() >= 100) {
    // sockaddr_un holds ~108 bytes: fall back to a short private directory of kda's own.
    KDA_ASSIGN_OR_RETURN(stdfs::path short_dir, fs::make_temp_dir("/tmp", "kda-sock"));
    d.socket = short_dir / "tools.sock";
  }
  return d;
}

void remove_session_dirs(const SessionDirs& dirs) {
  std::error_code ec;
  if (!dirs.root.empty()) stdfs::remove_all(dirs.root, ec);
  if (!dirs.socket.empty() && dirs.socket.parent_path() != dirs.kda) stdfs::remove_all(dirs.socket.parent_path(), ec);
}

sandbox::LandlockPolicy agent_landlock_policy(const SessionRequest& request, const SessionDirs& dirs,
                                              std::optional<int> api_port) {
  sandbox::LandlockPolicy p;
  p.read_only = {"/"};
  if (request.role == Role::kWriter)
    for (const auto& w : request.writable) p.read_write.push_back(w);
  p.read_write.push_back(dirs.home);
  p.read_write.push_back(dirs.tmp);
  p.read_write.push_back(dirs.codex_home);
  p.devices = {"/dev/null",    "/dev/zero", "/dev/full", "/dev/random",
               "/dev/urandom", "/dev/tty",  "/dev/ptmx", "/dev/pts"};
  p.deny_tcp = true;
  if (api_port) p.allowed_tcp_connect_ports.push_back(*api_port);
  p.scope_signals = true;
  p.scope_abstract_unix = true;
  return p;
}

std::vector<std::string> base_cli_environment(const SessionDirs& dirs, const CliAgentConfig& config) {
  std::vector<std::string> env = {
      "PATH=/usr/local/bin:/usr/bin:/bin",
      "HOME=" + dirs.home.string(),
      "TMPDIR=" + dirs.tmp.string(),
      "LANG=C.UTF-8",
      "USER=kda-agent",
  };
  for (const auto& e : config.env) env.push_back(e);
  for (const auto& name : config.pass_env) {
    const char* v = std::getenv(name.c_str());
    if (v != nullptr) env.push_back(name + "=" + v);
  }
  return env;
}

void EventSink::emit(AgentEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (request_->on_event) request_->on_event(event);
  result_->events.push_back(std::move(event));
}

Result<CliRun> run_cli(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       const stdfs::path& cwd, const sandbox::PreparedLandlock* landlock, std::chrono::seconds timeout,
                       const std::function<bool(std::string_view)>& on_line) {
  proc::ChildOptions o;
  o.argv = argv;
  o.cwd = cwd;
  o.env = env;
  o.stdout_mode = proc::Stdio::kPipe;
  o.stderr_mode = proc::Stdio::kCapture;
  o.output_cap = 256 << 10;
  if (landlock != nullptr) o.pre_exec = [landlock] { return landlock->restrict_self(); };
  KDA_ASSIGN_OR_RETURN(proc::Child child, proc::Child::spawn(std::move(o)));
  const proc::Deadline deadline = proc::Deadline::after(timeout);
  std::string buffer;
  char chunk[65536];
  bool timed_out = false, cut = false;
  auto feed = [&](std::string_view line) {
    if (!cut && !on_line(line)) cut = true;
  };
  // Feeds every complete line in the buffer and keeps the unfinished rest.
  auto feed_complete_lines = [&] {
    size_t start = 0;
    for (size_t nl; (nl = buffer.find('\n', start)) != std::string::npos; start = nl + 1)
      feed(std::string_view(buffer).substr(start, nl - start));
    buffer.erase(0, start);
  };
  std::optional<proc::ExitInfo> exited;
  while (!cut) {
    if (deadline.expired()) {
      timed_out = true;
      break;
    }
    // Wake up regularly: a background process of the agent may hold stdout open after the CLI
    // itself has exited, and must not keep the session alive.
    const proc::Deadline tick = deadline.min(proc::Deadline::after_seconds(0.5));
    pollfd p{child.stdout_fd(), POLLIN, 0};
    int n = ::poll(&p, 1, tick.poll_timeout_ms());
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      if (deadline.expired()) {
        timed_out = true;
        break;
      }
      if ((exited = child.wait(proc::Deadline::after(std::chrono::milliseconds(1))))) {
        // Reaped (its group killed): read what is already buffered, without blocking.
        for (;;) {
          pollfd q{child.stdout_fd(), POLLIN, 0};
          if (::poll(&q, 1, 0) <= 0) break;
          ssize_t got = ::read(child.stdout_fd(), chunk, sizeof chunk);
          if (got <= 0) break;
          buffer.append(chunk, static_cast<size_t>(got));
        }
        feed_complete_lines();
        break;
      }
      continue;
    }
    ssize_t got = ::read(child.stdout_fd(), chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    buffer.append(chunk, static_cast<size_t>(got));
    feed_complete_lines();
  }
  if (!buffer.empty()) feed(buffer);
  CliRun run;
  run.cut = cut;
  if (timed_out || cut) {
    child.kill_group();
    run.exit = child.wait_or_kill(proc::Deadline::after_seconds(5));
    run.exit.timed_out = timed_out;
  } else if (exited) {
    run.exit = *exited;
  } else {
    // stdout closed: the CLI is ending. Give it a moment to exit, then kill the group.
    run.exit = child.wait_or_kill(deadline.min(proc::Deadline::after_seconds(30)));
  }
  std::string err = child.take_stderr();
  run.stderr_tail = err.size() > 4096 ? err.substr(err.size() - 4096) : err;
  return run;
}

stdfs::path kda_executable(const CliAgentConfig& config) {
  return config.kda_binary.empty() ? stdfs::read_symlink("/proc/self/exe") : config.kda_binary;
}

Result<std::unique_ptr<mcp::ToolSocketServer>> serve_session_tools(const SessionRequest& request,
                                                                   const SessionDirs& dirs, EventSink& sink) {
  if (request.tools == nullptr) return std::unique_ptr<mcp::ToolSocketServer>{};
  mcp::ToolSocketOptions so;
  so.read_only_tools = request.role == Role::kReviewer;
  so.on_call = [&sink](const std::string& name, const nlohmann::json& args, const ToolOutcome& out) {
    sink.emit({"tool_call",
               !out.is_error,
               {{"source", "kda"},
                {"tool", name},
                {"input", args},
                {out.is_error ? "error" : "output", detail::clip(out.text)}}});
  };
  return mcp::ToolSocketServer::start(request.tools, dirs.socket, std::move(so));
}

Result<std::unique_ptr<CliSession>> CliSession::start(const CliAgentConfig& config, const SessionRequest& request,
                                                      const char* env_var, const std::string& cli) {
  KDA_ASSIGN_OR_RETURN(stdfs::path binary, find_agent_cli(config.binary, env_var, cli));
  KDA_ASSIGN_OR_RETURN(SessionDirs dirs, make_session_dirs(config.sessions_dir, cli + "-" + role_name(request.role)));
  std::unique_ptr<CliSession> s(new CliSession(request));  // from here the directories go with it
  s->binary = std::move(binary);
  s->kda = kda_executable(config);
  s->dirs = std::move(dirs);
  s->keep_dirs = config.keep_session_dirs;
  KDA_ASSIGN_OR_RETURN(s->socket, serve_session_tools(request, s->dirs, s->sink));
  return s;
}

std::vector<std::string> CliSession::mcp_args(const CliAgentConfig& config, const SessionRequest& request) const {
  if (!config.mcp_server_args.empty() || !socket) return config.mcp_server_args;
  return {"mcp", "--connect", dirs.socket.string(), "--role", role_name(request.role)};
}

CliSession::~CliSession() {
  socket.reset();
  if (!keep_dirs) remove_session_dirs(dirs);
}

Result<std::optional<sandbox::PreparedLandlock>> prepare_cli_landlock(const CliAgentConfig& config,
                                                                      const SessionRequest& request,
                                                                      const SessionDirs& dirs, std::string_view api_url,
                                                                      std::string_view cli) {
  std::optional<sandbox::PreparedLandlock> none;
  if (!config.os_sandbox) return none;
  auto prepared = sandbox::prepare_landlock(agent_landlock_policy(request, dirs, url_port(api_url)));
  if (prepared.ok()) return std::optional<sandbox::PreparedLandlock>(std::move(*prepared));
  if (config.require_os_sandbox)
    return prepared.status().with_context(std::string(cli) + ": the agent sandbox (Landlock) is required");
  return none;
}

}  // namespace kda::agent
