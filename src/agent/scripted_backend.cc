#include "agent/scripted_backend.h"

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "util/fs.h"
#include "util/sha256.h"

namespace kda::agent {

namespace {

namespace stdfs = std::filesystem;

struct Step {
  enum Kind { kWrite, kTool, kSleep, kFail } kind = kTool;
  std::string path;     // kWrite
  std::string content;  // kWrite
  bool unconfined = false;
  std::string tool;  // kTool
  nlohmann::json arguments = nlohmann::json::object();
  int sleep_ms = 0;     // kSleep
  std::string message;  // kFail
};

struct Session {
  Role role = Role::kWriter;
  std::string phase;
  std::optional<int> index;
  std::vector<Step> steps;
  std::string final_text;
  Usage usage;
};

Result<Step> parse_step(const nlohmann::json& j, const std::string& where, const stdfs::path& base_dir) {
  if (!j.is_object() || j.size() != 1) return Status::bad_input(where + ": a step is an object with exactly one key");
  Step s;
  const auto& [key, v] = *j.items().begin();
  if (key == "write_file") {
    s.kind = Step::kWrite;
    if (!v.is_object() || !v.contains("path") || !v["path"].is_string())
      return Status::bad_input(where + ".write_file.path: expected a string");
    s.path = v["path"].get<std::string>();
    if (v.contains("content") && v["content"].is_string()) {
      s.content = v["content"].get<std::string>();
    } else if (v.contains("content_file") && v["content_file"].is_string()) {
      stdfs::path p = v["content_file"].get<std::string>();
      if (p.is_relative()) p = base_dir / p;
      auto text = fs::read_file(p);
      if (!text.ok()) return text.status().with_context(where + ".write_file.content_file");
      s.content = *text;
    } else {
      return Status::bad_input(where + ".write_file: needs \"content\" or \"content_file\" (a string)");
    }
    s.unconfined = v.value("unconfined", false);
  } else if (key == "sleep_ms") {
    s.kind = Step::kSleep;
    if (!v.is_number_integer() || v.get<int>() < 0)
      return Status::bad_input(where + ".sleep_ms: expected an integer >= 0");
    s.sleep_ms = v.get<int>();
  } else if (key == "fail") {
    s.kind = Step::kFail;
    if (!v.is_string()) return Status::bad_input(where + ".fail: expected a string");
    s.message = v.get<std::string>();
  } else {
    return Status::bad_input(where + ": unknown step \"" + key + "\" (write_file, tool, sleep_ms, fail)");
  }
  return s;
}

Result<Step> parse_any_step(const nlohmann::json& j, const std::string& where, const stdfs::path& base_dir) {
  if (j.is_object() && j.contains("tool")) {
    Step s;
    s.kind = Step::kTool;
    if (!j["tool"].is_string()) return Status::bad_input(where + ".tool: expected a string");
    s.tool = j["tool"].get<std::string>();
    for (const auto& [k, v] : j.items()) {
      if (k != "tool" && k != "arguments")
        return Status::bad_input(where + ": unknown key \"" + k + "\" in a tool step");
    }
    if (j.contains("arguments")) {
      if (!j["arguments"].is_object()) return Status::bad_input(where + ".arguments: expected an object");
      s.arguments = j["arguments"];
    }
    return s;
  }
  return parse_step(j, where, base_dir);
}

Result<Usage> parse_usage(const nlohmann::json& j, const std::string& where) {
  Usage u;
  if (!j.is_object()) return Status::bad_input(where + ": expected an object");
  for (const auto& [k, v] : j.items()) {
    if (!v.is_number()) return Status::bad_input(where + "." + k + ": expected a number");
    if (k == "input_tokens")
      u.input_tokens = v.get<int64_t>();
    else if (k == "output_tokens")
      u.output_tokens = v.get<int64_t>();
    else if (k == "cache_read_tokens")
      u.cache_read_tokens = v.get<int64_t>();
    else if (k == "cache_write_tokens")
      u.cache_write_tokens = v.get<int64_t>();
    else if (k == "cost_usd")
      u.cost_usd = v.get<double>();
    else
      return Status::bad_input(where + ": unknown field \"" + k + "\"");
  }
  return u;
}

Result<std::vector<Session>> parse_script(const nlohmann::json& script, const stdfs::path& base_dir) {
  if (!script.is_object() || !script.contains("sessions") || !script["sessions"].is_array())
    return Status::bad_input("script: expected {\"sessions\": [...]}");
  std::vector<Session> out;
  int i = 0;
  for (const auto& sj : script["sessions"]) {
    const std::string where = "sessions[" + std::to_string(i++) + "]";
    if (!sj.is_object()) return Status::bad_input(where + ": expected an object");
    Session s;
    const std::string role = sj.value("role", "");
    if (role == "writer")
      s.role = Role::kWriter;
    else if (role == "reviewer")
      s.role = Role::kReviewer;
    else
      return Status::bad_input(where + ".role: expected \"writer\" or \"reviewer\"");
    if (!sj.contains("phase") || !sj["phase"].is_string())
      return Status::bad_input(where + ".phase: expected a string");
    s.phase = sj["phase"].get<std::string>();
    if (sj.contains("index")) {
      if (!sj["index"].is_number_integer()) return Status::bad_input(where + ".index: expected an integer");
      s.index = sj["index"].get<int>();
    }
    if (sj.contains("steps")) {
      if (!sj["steps"].is_array()) return Status::bad_input(where + ".steps: expected an array");
      int k = 0;
      for (const auto& st : sj["steps"]) {
        auto step = parse_any_step(st, where + ".steps[" + std::to_string(k++) + "]", base_dir);
        if (!step.ok()) return step.status();
        s.steps.push_back(std::move(*step));
      }
    }
    if (sj.contains("final_text")) {
      if (!sj["final_text"].is_string()) return Status::bad_input(where + ".final_text: expected a string");
      s.final_text = sj["final_text"].get<std::string>();
    }
    if (sj.contains("usage")) {
      auto u = parse_usage(sj["usage"], where + ".usage");
      if (!u.ok()) return u.status();
      s.usage = *u;
    }
    out.push_back(std::move(s));
  }
  return out;
}

// True when `p` (already weakly canonical) lies under one of `roots`.
bool under_any(const stdfs::path& p, const std::vector<stdfs::path>& roots) {
  for (const auto& r : roots) {
    std::error_code ec;
    const stdfs::path root = stdfs::weakly_canonical(r, ec);
    if (ec) continue;
    auto rel = p.lexically_relative(root);
    if (!rel.empty() && *rel.begin() != "..") return true;
  }
  return false;
}

class ScriptedBackend final : public Backend {
 public:
  explicit ScriptedBackend(std::vector<Session> sessions) : sessions_(std::move(sessions)) {}
  std::string name() const override { return "scripted"; }

  Result<SessionResult> run_session(const SessionRequest& request) override {
    const Session* chosen = nullptr;
    for (const auto& s : sessions_) {
      if (s.role == request.role && s.phase == request.phase && s.index && *s.index == request.index) {
        chosen = &s;
        break;
      }
    }
    for (size_t i = 0; chosen == nullptr && i < sessions_.size(); ++i) {
      const auto& s = sessions_[i];
      if (s.role == request.role && s.phase == request.phase && !s.index) chosen = &s;
    }
    if (chosen == nullptr)
      return Status::not_found(std::string("scripted backend: no session for role ") + role_name(request.role) +
                               ", phase " + request.phase + ", index " + std::to_string(request.index));
    SessionResult result;
    auto emit = [&](AgentEvent e) {
      if (request.on_event) request.on_event(e);
      result.events.push_back(std::move(e));
    };
    for (const auto& step : chosen->steps) {
      switch (step.kind) {
        case Step::kWrite: {
          stdfs::path target = stdfs::path(step.path);
          if (target.is_relative()) target = request.workspace / target;
          std::error_code ec;
          target = stdfs::weakly_canonical(target, ec);
          const std::string hash = sha256_hex(step.content);
          if (ec || (!step.unconfined && !under_any(target, request.writable))) {
            emit({"denied",
                  false,
                  {{"action", "write_file"}, {"path", step.path}, {"reason", "outside the writable paths"}}});
            break;
          }
          Status st = fs::ensure_dir(target.parent_path());
          if (st.ok()) st = fs::write_file_atomic(target, step.content);
          emit({"file_write",
                st.ok(),
                {{"path", step.path}, {"sha256", hash}, {"bytes", step.content.size()}, {"error", st.message()}}});
          break;
        }
        case Step::kTool: {
          ToolOutcome out;
          if (request.tools == nullptr) {
            out = {"no tools in this session", true, {}};
          } else {
            out = request.tools->call(step.tool, step.arguments);
          }
          emit({"tool_call",
                !out.is_error,
                {{"name", step.tool}, {"arguments", step.arguments}, {"result", out.text.substr(0, 2000)}}});
          break;
        }
        case Step::kSleep: std::this_thread::sleep_for(std::chrono::milliseconds(step.sleep_ms)); break;
        case Step::kFail: return Status::io("scripted backend: " + step.message);
      }
      ++result.turns;
    }
    result.final_text = chosen->final_text;
    result.usage = chosen->usage;
    result.usage.requests += 1;
    ++result.turns;
    emit({"message", true, {{"text", result.final_text.substr(0, 2000)}}});
    return result;
  }

 private:
  std::vector<Session> sessions_;
};

}  // namespace

Result<std::unique_ptr<Backend>> make_scripted_backend(const nlohmann::json& script,
                                                       const std::filesystem::path& base_dir) {
  auto sessions = parse_script(script, base_dir);
  if (!sessions.ok()) return sessions.status();
  return std::unique_ptr<Backend>(new ScriptedBackend(std::move(*sessions)));
}

Result<std::unique_ptr<Backend>> make_scripted_backend(const std::filesystem::path& script_file) {
  auto text = fs::read_file(script_file);
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return Status::bad_input(script_file.string() + ": not valid JSON");
  auto b = make_scripted_backend(j, script_file.parent_path());
  if (!b.ok()) return b.status().with_context(script_file.string());
  return b;
}

}  // namespace kda::agent
