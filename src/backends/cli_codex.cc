#include "backends/cli_codex.h"

#include <algorithm>

#include "backends/cli_parse_util.h"
#include "mcp/tool_socket.h"

namespace kda::agent {

using nlohmann::json;
namespace stdfs = std::filesystem;
using detail::clip;
using detail::num;
using detail::str;

void CodexStreamParser::feed(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  if (line.empty()) return;
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    sink_->emit({"error", false, {{"source", "cli"}, {"error", "unparsable stream line"}, {"line", clip(line, 500)}}});
    return;
  }
  const std::string type = str(j, "type");
  if (type == "item.completed" && j.contains("item") && j["item"].is_object()) {
    const json& it = j["item"];
    const std::string kind = str(it, "type");
    const std::string status = str(it, "status");
    if (kind != "error") ++items_;
    if (kind == "command_execution") {
      ++turns_;
      const bool ok = status == "completed" && it.contains("exit_code") && it["exit_code"].is_number() &&
                      it["exit_code"].get<int>() == 0;
      json d = {{"source", "cli"}, {"command", clip(str(it, "command"))}, {"status", status}};
      d["exit_code"] = it.contains("exit_code") ? it["exit_code"] : json();
      d[ok ? "output" : "error"] = clip(str(it, "aggregated_output"));
      sink_->emit({"command", ok, d});
    } else if (kind == "file_change") {
      ++turns_;
      const bool ok = status == "completed";
      if (it.contains("changes") && it["changes"].is_array() && !it["changes"].empty()) {
        for (const auto& c : it["changes"])
          sink_->emit({"file_write",
                       ok,
                       {{"source", "cli"}, {"path", str(c, "path")}, {"change", str(c, "kind")}, {"status", status}}});
      } else {
        sink_->emit({"file_write", ok, {{"source", "cli"}, {"status", status}}});
      }
    } else if (kind == "mcp_tool_call") {
      ++turns_;
      bool ok = status == "completed" && (!it.contains("error") || it["error"].is_null());
      if (it.contains("result") && it["result"].is_object() && it["result"].value("is_error", false)) ok = false;
      json d = {{"source", "cli"}, {"tool", str(it, "tool")}, {"server", str(it, "server")}, {"status", status}};
      d["input"] = it.contains("arguments") ? it["arguments"] : json();
      if (it.contains("error") && !it["error"].is_null()) d["error"] = it["error"];
      sink_->emit({"tool_call", ok, d});
    } else if (kind == "agent_message") {
      ++turns_;
      final_text_ = str(it, "text");
      sink_->emit({"message", true, {{"source", "cli"}, {"text", clip(final_text_)}}});
    } else if (kind == "error") {
      sink_->emit({"error", false, {{"source", "cli"}, {"error", clip(str(it, "message"))}}});
    } else if (kind == "reasoning") {
      // not an action
    } else if (!kind.empty()) {
      ++turns_;
      sink_->emit({"tool_call",
                   status.empty() || status == "completed",
                   {{"source", "cli"}, {"item", kind}, {"status", status}}});
    }
  } else if (type == "turn.completed") {
    turn_completed_ = true;
    const json& u = j.contains("usage") ? j["usage"] : json();
    usage_.input_tokens += num(u, "input_tokens");
    usage_.output_tokens += num(u, "output_tokens");
    usage_.cache_read_tokens += num(u, "cached_input_tokens");
    usage_.requests += std::max(1, turns_);
  } else if (type == "turn.failed") {
    failed_ = true;
    const json& e = j.contains("error") ? j["error"] : json();
    error_ = str(e, "message");
    sink_->emit({"error", false, {{"source", "cli"}, {"error", clip(error_)}, {"event", "turn.failed"}}});
  } else if (type == "error") {
    error_ = str(j, "message");
    sink_->emit({"error", false, {{"source", "cli"}, {"error", clip(error_)}}});
  }
}

std::string codex_sandbox_mode(const CodexConfig& config, Role role, bool os_sandbox_active) {
  if (!config.sandbox_mode.empty()) return config.sandbox_mode;
  if (os_sandbox_active) return "danger-full-access";
  return role == Role::kReviewer ? "read-only" : "workspace-write";
}

// ---------------------------------------------------------------------------------------------

namespace {

std::string toml_string(const std::string& s) { return json(s).dump(); }

std::string toml_string_array(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + toml_string(v[i]);
  return out + "]";
}

class CodexBackend final : public Backend {
 public:
  explicit CodexBackend(CodexConfig c) : config_(std::move(c)) {}
  std::string name() const override { return "codex"; }
  Result<SessionResult> run_session(const SessionRequest& request) override;

 private:
  CodexConfig config_;
};

Result<SessionResult> CodexBackend::run_session(const SessionRequest& request) {
  KDA_ASSIGN_OR_RETURN(std::unique_ptr<CliSession> session,
                       CliSession::start(config_, request, "KDA_CODEX_BIN", "codex"));
  const stdfs::path& binary = session->binary;
  const stdfs::path& kda = session->kda;
  const SessionDirs& dirs = session->dirs;
  const bool reviewer = request.role == Role::kReviewer;

  const std::string base_url = config_.base_url.empty() ? "https://api.openai.com/v1" : config_.base_url;
  KDA_ASSIGN_OR_RETURN(std::optional<sandbox::PreparedLandlock> landlock,
                       prepare_cli_landlock(config_, request, dirs, base_url, "codex"));

  const std::string key_var = config_.api_key_env.empty() ? "OPENAI_API_KEY" : config_.api_key_env;
  const std::string retries = std::to_string(config_.api_retries);
  const std::string provider = config_.provider_name;
  std::vector<std::string> argv = {binary.string(),
                                   "exec",
                                   "--json",
                                   "--skip-git-repo-check",
                                   "--ephemeral",
                                   "--sandbox",
                                   codex_sandbox_mode(config_, request.role, landlock.has_value())};
  auto config_arg = [&argv](const std::string& kv) { argv.insert(argv.end(), {"-c", kv}); };
  config_arg("model_provider=" + toml_string(provider));
  config_arg("model_providers." + provider + "={name=" + toml_string(provider) + ",base_url=" + toml_string(base_url) +
             ",env_key=" + toml_string(key_var) + ",wire_api=\"responses\",request_max_retries=" + retries +
             ",stream_max_retries=" + retries + "}");
  config_arg("analytics.enabled=false");
  argv.insert(argv.end(), {"--disable", "plugins"});
  if (!landlock) {
    config_arg("sandbox_workspace_write.exclude_slash_tmp=true");
    config_arg("sandbox_workspace_write.exclude_tmpdir_env_var=true");
    std::vector<std::string> roots;
    for (const auto& w : request.writable) roots.push_back(w.string());
    if (!reviewer && !roots.empty()) config_arg("sandbox_workspace_write.writable_roots=" + toml_string_array(roots));
  }
  const std::vector<std::string> mcp_args = session->mcp_args(config_, request);
  if (!mcp_args.empty()) {
    config_arg("mcp_servers.kda.command=" + toml_string(kda.string()));
    config_arg("mcp_servers.kda.args=" + toml_string_array(mcp_args));
    // kda's own server: its tools run without Codex's per-call MCP approval (which `codex exec`
    // cannot ask for and, outside full access, cancels).
    config_arg("mcp_servers.kda.default_tools_approval_mode=\"approve\"");
  }
  if (!request.system_prompt.empty()) config_arg("developer_instructions=" + toml_string(request.system_prompt));
  if (!config_.model.empty()) argv.insert(argv.end(), {"-m", config_.model});
  argv.insert(argv.end(), config_.extra_args.begin(), config_.extra_args.end());
  argv.push_back("--");
  argv.push_back(request.prompt);

  std::vector<std::string> env = base_cli_environment(dirs, config_);
  env.push_back("CODEX_HOME=" + dirs.codex_home.string());
  if (const std::string key = getenv_or_empty(key_var); !key.empty()) env.push_back(key_var + "=" + key);

  return run_cli_attempts<CodexStreamParser>("codex", config_, request, argv, env, landlock ? &*landlock : nullptr,
                                             session->sink, session->result,
                                             [](const CodexStreamParser& p) { return p.items() > 0; });
}

}  // namespace

std::unique_ptr<Backend> make_codex_backend(CodexConfig config) {
  return std::make_unique<CodexBackend>(std::move(config));
}

}  // namespace kda::agent
