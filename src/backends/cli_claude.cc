#include "backends/cli_claude.h"

#include <algorithm>

#include "backends/cli_parse_util.h"
#include "mcp/tool_socket.h"
#include "util/fs.h"

namespace kda::agent {

using nlohmann::json;
namespace stdfs = std::filesystem;
using detail::clip;
using detail::content_text;
using detail::num;
using detail::str;

namespace {

bool is_file_tool(const std::string& name) {
  return name == "Write" || name == "Edit" || name == "MultiEdit" || name == "NotebookEdit";
}

AgentEvent tool_event(const std::string& name, const json& input, bool ok, const std::string& output) {
  AgentEvent e;
  e.ok = ok;
  e.detail["source"] = "cli";
  e.detail["tool"] = name;
  if (is_file_tool(name)) {
    e.kind = "file_write";
    std::string path = str(input, "file_path");
    if (path.empty()) path = str(input, "notebook_path");
    e.detail["path"] = path;
  } else if (name == "Bash") {
    e.kind = "command";
    e.detail["command"] = clip(str(input, "command"));
  } else {
    e.kind = "tool_call";
    e.detail["input"] = input;
  }
  e.detail[ok ? "output" : "error"] = clip(output);
  return e;
}

}  // namespace

void ClaudeStreamParser::on_tool_result(const json& block) {
  ++actions_;
  const std::string id = str(block, "tool_use_id");
  const bool is_error = block.value("is_error", false);
  const std::string text = content_text(block.contains("content") ? block["content"] : json());
  auto it = pending_.find(id);
  Pending p = it == pending_.end() ? Pending{"unknown", json::object()} : it->second;
  if (it != pending_.end()) pending_.erase(it);
  AgentEvent e = tool_event(p.name, p.input, !is_error, text);
  e.detail["id"] = id;
  sink_->emit(std::move(e));
}

void ClaudeStreamParser::feed(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  if (line.empty()) return;
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    sink_->emit({"error", false, {{"source", "cli"}, {"error", "unparsable stream line"}, {"line", clip(line, 500)}}});
    return;
  }
  const std::string type = str(j, "type");
  if (type == "assistant" && j.contains("message") && j["message"].is_object()) {
    const json& m = j["message"];
    const std::string mid = str(m, "id");
    if (mid.empty() || std::find(seen_message_ids_.begin(), seen_message_ids_.end(), mid) == seen_message_ids_.end()) {
      if (!mid.empty()) seen_message_ids_.push_back(mid);
      ++turns_;
    }
    if (m.contains("content") && m["content"].is_array()) {
      for (const auto& b : m["content"]) {
        const std::string bt = str(b, "type");
        if (bt == "text") {
          last_text_ = str(b, "text");
          sink_->emit({"message", true, {{"source", "cli"}, {"text", clip(last_text_)}}});
        } else if (bt == "tool_use") {
          const std::string id = str(b, "id");
          pending_[id] = {str(b, "name"), b.contains("input") ? b["input"] : json::object()};
          pending_order_.push_back(id);
        }
      }
    }
  } else if (type == "user" && j.contains("message") && j["message"].is_object()) {
    const json& c = j["message"].contains("content") ? j["message"]["content"] : json();
    if (c.is_array())
      for (const auto& b : c)
        if (str(b, "type") == "tool_result") on_tool_result(b);
  } else if (type == "system") {
    const std::string sub = str(j, "subtype");
    if (sub == "api_retry") sink_->emit({"retry", false, {{"source", "cli"}, {"record", j}}});
  } else if (type == "result") {
    saw_result_ = true;
    is_error_ = j.value("is_error", false);
    final_text_ = str(j, "result");
    if (final_text_.empty()) final_text_ = last_text_;
    if (j.contains("num_turns") && j["num_turns"].is_number()) turns_ = std::max(turns_, j["num_turns"].get<int>());
    const json& u = j.contains("usage") ? j["usage"] : json();
    usage_.input_tokens = num(u, "input_tokens");
    usage_.output_tokens = num(u, "output_tokens");
    usage_.cache_read_tokens = num(u, "cache_read_input_tokens");
    usage_.cache_write_tokens = num(u, "cache_creation_input_tokens");
    if (j.contains("total_cost_usd") && j["total_cost_usd"].is_number())
      usage_.cost_usd = j["total_cost_usd"].get<double>();
    usage_.requests = static_cast<int>(seen_message_ids_.size());
    if (j.contains("permission_denials") && j["permission_denials"].is_array())
      for (const auto& d : j["permission_denials"])
        sink_->emit({"denied",
                     false,
                     {{"source", "cli"},
                      {"tool", str(d, "tool_name")},
                      {"id", str(d, "tool_use_id")},
                      {"input", d.contains("tool_input") ? d["tool_input"] : json()}}});
    if (is_error_) {
      error_ = final_text_.empty() ? str(j, "subtype") : final_text_;
      sink_->emit({"error", false, {{"source", "cli"}, {"error", clip(error_)}, {"subtype", str(j, "subtype")}}});
    }
  }
}

void ClaudeStreamParser::finish() {
  for (const auto& id : pending_order_) {
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    AgentEvent e = tool_event(it->second.name, it->second.input, false, "no result (session ended)");
    e.detail["id"] = id;
    sink_->emit(std::move(e));
    pending_.erase(it);
  }
}

// ---------------------------------------------------------------------------------------------

namespace {

class ClaudeCodeBackend final : public Backend {
 public:
  explicit ClaudeCodeBackend(ClaudeCodeConfig c) : config_(std::move(c)) {}
  std::string name() const override { return "claude-code"; }
  Result<SessionResult> run_session(const SessionRequest& request) override;

 private:
  ClaudeCodeConfig config_;
};

std::string guard_command(const stdfs::path& kda, const SessionRequest& request, const SessionDirs& dirs) {
  std::string cmd = shell_quote(kda.string()) + " mcp guard";
  std::vector<stdfs::path> allowed;
  if (request.role == Role::kWriter) allowed = request.writable;
  allowed.push_back(dirs.home);
  allowed.push_back(dirs.tmp);
  for (const auto& p : allowed) cmd += " --allow " + shell_quote(p.string());
  return cmd;
}

Result<SessionResult> ClaudeCodeBackend::run_session(const SessionRequest& request) {
  KDA_ASSIGN_OR_RETURN(std::unique_ptr<CliSession> session,
                       CliSession::start(config_, request, "KDA_CLAUDE_BIN", "claude"));
  const stdfs::path& binary = session->binary;
  const stdfs::path& kda = session->kda;
  const SessionDirs& dirs = session->dirs;
  const bool reviewer = request.role == Role::kReviewer;

  std::vector<std::string> argv = {
      binary.string(), "-p", request.prompt, "--output-format", "stream-json", "--verbose", "--no-session-persistence"};
  const std::vector<std::string> mcp_args = session->mcp_args(config_, request);
  if (!mcp_args.empty()) {
    json mcp_config = {{"mcpServers", {{"kda", {{"type", "stdio"}, {"command", kda.string()}, {"args", mcp_args}}}}}};
    KDA_RETURN_IF_ERROR(fs::write_file_atomic(dirs.kda / "mcp.json", mcp_config.dump(2)));
    argv.insert(argv.end(), {"--mcp-config", (dirs.kda / "mcp.json").string(), "--strict-mcp-config"});
  }
  json settings = json::object();
  if (config_.guard_hook)
    settings["hooks"]["PreToolUse"] = json::array(
        {{{"matcher", "Write|Edit|MultiEdit|NotebookEdit"},
          {"hooks", json::array({{{"type", "command"}, {"command", guard_command(kda, request, dirs)}}})}}});
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(dirs.kda / "settings.json", settings.dump(2)));
  argv.insert(argv.end(), {"--settings", (dirs.kda / "settings.json").string()});
  if (reviewer) {
    argv.insert(argv.end(), {"--permission-mode", "dontAsk", "--allowedTools", "Read,Glob,Grep,Bash,mcp__kda",
                             "--disallowedTools", "Write,Edit,MultiEdit,NotebookEdit"});
  } else {
    argv.insert(argv.end(), {"--permission-mode", "acceptEdits", "--allowedTools",
                             "Read,Glob,Grep,Bash,Write,Edit,MultiEdit,mcp__kda"});
  }
  if (!config_.model.empty()) argv.insert(argv.end(), {"--model", config_.model});
  if (!request.system_prompt.empty()) argv.insert(argv.end(), {"--append-system-prompt", request.system_prompt});
  argv.insert(argv.end(), config_.extra_args.begin(), config_.extra_args.end());

  std::vector<std::string> env = base_cli_environment(dirs, config_);
  env.insert(env.end(),
             {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1",
              "DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_MAX_RETRIES=" + std::to_string(config_.api_retries)});
  if (!config_.base_url.empty()) env.push_back("ANTHROPIC_BASE_URL=" + config_.base_url);
  const std::string key_var = config_.api_key_env.empty() ? "ANTHROPIC_API_KEY" : config_.api_key_env;
  if (const std::string key = getenv_or_empty(key_var); !key.empty()) env.push_back("ANTHROPIC_API_KEY=" + key);

  KDA_ASSIGN_OR_RETURN(
      std::optional<sandbox::PreparedLandlock> landlock,
      prepare_cli_landlock(config_, request, dirs,
                           config_.base_url.empty() ? "https://api.anthropic.com" : config_.base_url, "claude-code"));
  // Claude reports an API error as a synthetic assistant turn, so count actions, not turns.
  return run_cli_attempts<ClaudeStreamParser>(
      "claude-code", config_, request, argv, env, landlock ? &*landlock : nullptr, session->sink, session->result,
      [](const ClaudeStreamParser& p) { return p.actions() > 0 || (p.saw_result() && !p.is_error()); });
}

}  // namespace

std::unique_ptr<Backend> make_claude_code_backend(ClaudeCodeConfig config) {
  return std::make_unique<ClaudeCodeBackend>(std::move(config));
}

}  // namespace kda::agent
