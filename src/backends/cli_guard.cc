#include "backends/cli_guard.h"

namespace kda::agent {

namespace stdfs = std::filesystem;
using nlohmann::json;

namespace {

stdfs::path resolved(const stdfs::path& p) {
  std::error_code ec;
  stdfs::path r = stdfs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : r;
}

bool under(const stdfs::path& path, const stdfs::path& root) {
  auto [root_end, path_it] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  (void)path_it;
  return root_end == root.end() || (std::next(root_end) == root.end() && root_end->empty());
}

}  // namespace

std::optional<std::string> guard_denial(const json& hook_input, const std::vector<stdfs::path>& allowed) {
  if (!hook_input.is_object()) return "kda guard: hook input is not a JSON object";
  const std::string tool = hook_input.value("tool_name", "");
  if (tool != "Write" && tool != "Edit" && tool != "MultiEdit" && tool != "NotebookEdit") return std::nullopt;
  const json input = hook_input.contains("tool_input") ? hook_input["tool_input"] : json();
  std::string target;
  for (const char* key : {"file_path", "notebook_path", "path"})
    if (input.is_object() && input.contains(key) && input[key].is_string()) {
      target = input[key].get<std::string>();
      break;
    }
  if (target.empty()) return "kda guard: " + tool + " without a file path";
  stdfs::path p(target);
  if (p.is_relative()) {
    std::string cwd = hook_input.value("cwd", "");
    if (cwd.empty()) return "kda guard: relative path without a cwd: " + target;
    p = stdfs::path(cwd) / p;
  }
  const stdfs::path rp = resolved(p);
  for (const auto& a : allowed)
    if (under(rp, resolved(a))) return std::nullopt;
  return "kda guard: " + tool + " to " + rp.string() + " is outside the paths this session may write";
}

json guard_deny_output(const std::string& reason) {
  return {{"hookSpecificOutput",
           {{"hookEventName", "PreToolUse"}, {"permissionDecision", "deny"}, {"permissionDecisionReason", reason}}}};
}

}  // namespace kda::agent
