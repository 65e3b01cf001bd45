// Turns a scripted step call ({"tool": "write", "input": {...}}) into the call the client can run,
// resolving the name against the tools the request offers: generic aliases (write, edit, shell,
// read) per client, then the exact name, then a unique name suffix (docs/fake-llm.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fakellm/conversation.h"
#include "util/status.h"

namespace kda::fakellm {

struct ToolCall {
  std::string name;
  bool custom = false;  // Responses custom_tool_call: `input` is a string (the patch)
  nlohmann::json input = nlohmann::json::object();
  bool search = false;  // a tool-search call issued to load a deferred tool (Responses tool_search_call)
  std::string ns;       // Responses namespace of the called function ("" = none)
};

// Replaces ${workdir} and ${last_tool_result} in a string.
std::string substitute(const std::string& text, const std::string& workdir, const std::string& last_tool_result);
// The same in every string inside a JSON value.
nlohmann::json substitute_json(const nlohmann::json& value, const std::string& workdir,
                               const std::string& last_tool_result);

// kNotFound when the name cannot be resolved (the message lists the offered tools). When it
// cannot be resolved but the request offers a tool-search tool, the result is a search call for
// the name instead (the tool is deferred; the next request, same step, offers it).
// `workdir` may be empty (unknown).
Result<ToolCall> resolve_call(const std::string& tool, const nlohmann::json& input,
                              const std::vector<OfferedTool>& offered, const std::string& workdir);

// apply_patch texts (Codex freeform grammar).
std::string patch_add_file(const std::string& path, const std::string& content);
std::string patch_update_file(const std::string& path, const std::string& old_block, const std::string& new_block);

}  // namespace kda::fakellm
