#include "fakellm/resolve.h"

#include <filesystem>
#include <initializer_list>

#include "util/fs.h"
#include "util/strings.h"

namespace kda::fakellm {
namespace {

using nlohmann::json;
namespace stdfs = std::filesystem;

const OfferedTool* find_exact(const std::vector<OfferedTool>& offered, const std::string& name) {
  for (const OfferedTool& t : offered) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// Exact name, else the unique offered tool whose name ends with `name`. `ambiguous` set when
// several end with it.
const OfferedTool* find_suffix(const std::vector<OfferedTool>& offered, const std::string& name, bool* ambiguous) {
  if (const OfferedTool* t = find_exact(offered, name)) return t;
  const OfferedTool* found = nullptr;
  int count = 0;
  for (const OfferedTool& t : offered) {
    if (t.name.size() > name.size() && t.name.compare(t.name.size() - name.size(), name.size(), name) == 0) {
      found = &t;
      ++count;
    }
  }
  if (count > 1) {
    if (ambiguous) *ambiguous = true;
    return nullptr;
  }
  return found;
}

std::string get_string(const json& input, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = input.find(k);
    if (it != input.end() && it->is_string()) return it->get<std::string>();
  }
  return {};
}

// The first of `candidates` that the tool's schema declares, else the first candidate.
std::string param(const OfferedTool& tool, std::initializer_list<const char*> candidates) {
  auto props = tool.schema.find("properties");
  if (props != tool.schema.end() && props->is_object()) {
    for (const char* c : candidates) {
      if (props->contains(c)) return c;
    }
  }
  return *candidates.begin();
}

std::string absolute_path(const std::string& path, const std::string& workdir) {
  if (path.empty() || path[0] == '/' || workdir.empty()) return path;
  return (stdfs::path(workdir) / path).lexically_normal().string();
}

// Relative to the workdir when inside it; otherwise unchanged.
std::string relative_path(const std::string& path, const std::string& workdir) {
  if (path.empty() || path[0] != '/' || workdir.empty()) return path;
  stdfs::path rel = stdfs::path(path).lexically_normal().lexically_relative(stdfs::path(workdir).lexically_normal());
  if (rel.empty() || *rel.begin() == "..") return path;
  return rel.string();
}

std::optional<std::string> read_in_workdir(const std::string& path, const std::string& workdir) {
  std::string abs = absolute_path(path, workdir);
  if (abs.empty() || abs[0] != '/') return std::nullopt;
  auto r = fs::read_file(abs);
  if (!r.ok()) return std::nullopt;
  return std::move(r).value();
}

void add_lines(std::string& patch, const std::string& text, char prefix) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string::npos ? text.size() : nl;
    patch += prefix;
    patch.append(text, pos, end - pos);
    patch += '\n';
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
}

ToolCall patch_call(const OfferedTool& tool, const std::string& patch) {
  ToolCall call;
  call.name = tool.name;
  if (tool.custom) {
    call.custom = true;
    call.input = patch;
  } else {
    call.input = json{{param(tool, {"input", "patch"}), patch}};
  }
  return call;
}

std::optional<ToolCall> resolve_write(const json& in, const std::vector<OfferedTool>& offered, const std::string& wd) {
  std::string path = get_string(in, {"path", "file_path"});
  std::string content = get_string(in, {"content", "contents", "text"});
  if (const OfferedTool* t = find_exact(offered, "Write")) {
    return ToolCall{t->name, false, json{{"file_path", absolute_path(path, wd)}, {"content", content}}};
  }
  if (const OfferedTool* t = find_exact(offered, "apply_patch")) {
    std::string rel = relative_path(path, wd);
    auto existing = read_in_workdir(path, wd);
    std::string patch =
        existing && !existing->empty() ? patch_update_file(rel, *existing, content) : patch_add_file(rel, content);
    return patch_call(*t, patch);
  }
  if (const OfferedTool* t = find_suffix(offered, "write_file", nullptr)) {
    return ToolCall{t->name, false,
                    json{{param(*t, {"path", "file_path", "file"}), relative_path(path, wd)},
                         {param(*t, {"content", "contents", "text"}), content}}};
  }
  if (const OfferedTool* t = find_exact(offered, "Edit")) {
    return ToolCall{t->name, false,
                    json{{"file_path", absolute_path(path, wd)}, {"old_string", ""}, {"new_string", content}}};
  }
  return std::nullopt;
}

std::optional<ToolCall> resolve_edit(const json& in, const std::vector<OfferedTool>& offered, const std::string& wd) {
  std::string path = get_string(in, {"path", "file_path"});
  std::string old_text = get_string(in, {"old", "old_string", "old_text"});
  std::string new_text = get_string(in, {"new", "new_string", "new_text"});
  if (const OfferedTool* t = find_exact(offered, "Edit")) {
    return ToolCall{t->name, false,
                    json{{"file_path", absolute_path(path, wd)}, {"old_string", old_text}, {"new_string", new_text}}};
  }
  if (const OfferedTool* t = find_exact(offered, "apply_patch")) {
    // apply_patch replaces whole lines: widen old/new to the lines they touch in the file on disk.
    std::string old_block = old_text, new_block = new_text;
    if (auto file = read_in_workdir(path, wd)) {
      size_t at = file->find(old_text);
      if (at != std::string::npos && !old_text.empty()) {
        size_t start = file->rfind('\n', at == 0 ? 0 : at - 1);
        start = (at == 0 || start == std::string::npos) ? 0 : start + 1;
        size_t stop = at + old_text.size();
        if (stop > start && (*file)[stop - 1] == '\n') {
          --stop;  // old ends a line
        } else {
          stop = file->find('\n', stop);
          if (stop == std::string::npos) stop = file->size();
        }
        old_block = file->substr(start, stop - start);
        new_block = file->substr(start, at - start) + new_text +
                    file->substr(at + old_text.size(), stop > at + old_text.size() ? stop - at - old_text.size() : 0);
        if (!new_text.empty() && new_text.back() == '\n' && (*file)[at + old_text.size() - 1] == '\n') {
          new_block.pop_back();
        }
      }
    }
    return patch_call(*t, patch_update_file(relative_path(path, wd), old_block, new_block));
  }
  if (const OfferedTool* t = find_suffix(offered, "edit_file", nullptr)) {
    return ToolCall{t->name, false,
                    json{{param(*t, {"path", "file_path", "file"}), relative_path(path, wd)},
                         {param(*t, {"old_string", "old_text", "old"}), old_text},
                         {param(*t, {"new_string", "new_text", "new"}), new_text}}};
  }
  return std::nullopt;
}

std::optional<ToolCall> resolve_shell(const json& in, const std::vector<OfferedTool>& offered) {
  std::string command = get_string(in, {"command", "cmd"});
  if (const OfferedTool* t = find_exact(offered, "Bash")) return ToolCall{t->name, false, json{{"command", command}}};
  if (const OfferedTool* t = find_exact(offered, "exec_command")) {
    return ToolCall{t->name, false, json{{"cmd", command}}};
  }
  if (const OfferedTool* t = find_exact(offered, "shell")) {
    return ToolCall{t->name, false, json{{"command", json::array({"bash", "-lc", command})}}};
  }
  if (const OfferedTool* t = find_suffix(offered, "run_command", nullptr)) {
    return ToolCall{t->name, false, json{{param(*t, {"command", "cmd"}), command}}};
  }
  return std::nullopt;
}

std::optional<ToolCall> resolve_read(const json& in, const std::vector<OfferedTool>& offered, const std::string& wd) {
  std::string path = get_string(in, {"path", "file_path"});
  if (const OfferedTool* t = find_exact(offered, "Read")) {
    return ToolCall{t->name, false, json{{"file_path", absolute_path(path, wd)}}};
  }
  if (const OfferedTool* t = find_suffix(offered, "read_file", nullptr)) {
    return ToolCall{t->name, false, json{{param(*t, {"path", "file_path", "file"}), relative_path(path, wd)}}};
  }
  json shell_in = {{"command", "cat " + util::shell_quote(relative_path(path, wd))}};
  return resolve_shell(shell_in, offered);
}

std::string offered_names(const std::vector<OfferedTool>& offered) {
  std::string out;
  for (const OfferedTool& t : offered) out += (out.empty() ? "" : ", ") + t.name;
  return out.empty() ? "none" : out;
}

}  // namespace

std::string substitute(const std::string& text, const std::string& workdir, const std::string& last_tool_result) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    if (text.compare(pos, 10, "${workdir}") == 0) {
      out += workdir;
      pos += 10;
    } else if (text.compare(pos, 19, "${last_tool_result}") == 0) {
      out += last_tool_result;
      pos += 19;
    } else {
      out += text[pos++];
    }
  }
  return out;
}

json substitute_json(const json& value, const std::string& workdir, const std::string& last_tool_result) {
  if (value.is_string()) return substitute(value.get<std::string>(), workdir, last_tool_result);
  if (value.is_object()) {
    json out = json::object();
    for (const auto& [k, v] : value.items()) out[k] = substitute_json(v, workdir, last_tool_result);
    return out;
  }
  if (value.is_array()) {
    json out = json::array();
    for (const json& v : value) out.push_back(substitute_json(v, workdir, last_tool_result));
    return out;
  }
  return value;
}

std::string patch_add_file(const std::string& path, const std::string& content) {
  std::string patch = "*** Begin Patch\n*** Add File: " + path + "\n";
  add_lines(patch, content, '+');
  return patch + "*** End Patch\n";
}

std::string patch_update_file(const std::string& path, const std::string& old_block, const std::string& new_block) {
  std::string patch = "*** Begin Patch\n*** Update File: " + path + "\n@@\n";
  add_lines(patch, old_block, '-');
  add_lines(patch, new_block, '+');
  return patch + "*** End Patch\n";
}

Result<ToolCall> resolve_call(const std::string& tool, const json& input, const std::vector<OfferedTool>& offered,
                              const std::string& workdir) {
  std::optional<ToolCall> call;
  if (tool == "write")
    call = resolve_write(input, offered, workdir);
  else if (tool == "edit")
    call = resolve_edit(input, offered, workdir);
  else if (tool == "shell")
    call = resolve_shell(input, offered);
  else if (tool == "read")
    call = resolve_read(input, offered, workdir);
  if (call) return *call;
  bool ambiguous = false;
  if (const OfferedTool* t = find_suffix(offered, tool, &ambiguous)) {
    ToolCall c;
    c.name = t->call_name.empty() ? t->name : t->call_name;
    c.ns = t->ns;
    if (t->custom) {
      c.custom = true;
      // A freeform tool takes a string: the step's "input" string field, or the JSON text.
      c.input = input.contains("input") && input["input"].is_string() ? input["input"] : json(input.dump());
    } else {
      c.input = input;
    }
    return c;
  }
  if (!ambiguous) {
    for (const OfferedTool& t : offered) {
      if (!t.search) continue;
      ToolCall c;
      c.name = t.name;
      c.search = true;
      c.input =
          t.name == "ToolSearch" ? json{{"query", tool}, {"max_results", 5}} : json{{"query", tool}, {"limit", 8}};
      return c;
    }
  }
  return Status::not_found("cannot resolve tool \"" + tool + "\"" + (ambiguous ? " (ambiguous)" : "") +
                           " (offered: " + offered_names(offered) + ")");
}

}  // namespace kda::fakellm
