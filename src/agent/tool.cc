#include "agent/tool.h"

namespace kda::agent {

std::vector<ToolSpec> CompositeToolHost::tools() const {
  std::vector<ToolSpec> all;
  for (const ToolHost* h : hosts_) {
    for (auto& t : h->tools()) {
      bool seen = false;
      for (const auto& a : all) seen = seen || a.name == t.name;
      if (!seen) all.push_back(std::move(t));
    }
  }
  return all;
}

ToolOutcome CompositeToolHost::call(const std::string& name, const nlohmann::json& arguments) {
  for (ToolHost* h : hosts_) {
    for (const auto& t : h->tools()) {
      if (t.name == name) return h->call(name, arguments);
    }
  }
  return {"unknown tool: " + name, true, {{"error", "unknown_tool"}}};
}

}  // namespace kda::agent
