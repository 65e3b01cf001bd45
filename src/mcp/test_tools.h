// A tiny ToolHost for the mcp tests: "echo" (read-only) and "bump" (writes: counts calls).
#pragma once

#include <string>
#include <vector>

#include "agent/tool.h"

namespace kda::mcp::testing {

class TestTools final : public agent::ToolHost {
 public:
  std::vector<agent::ToolSpec> tools() const override {
    return {{"echo",
             "Returns its text argument.",
             {{"type", "object"}, {"properties", {{"text", {{"type", "string"}}}}}},
             true},
            {"bump", "Counts calls.", {{"type", "object"}}, false}};
  }
  agent::ToolOutcome call(const std::string& name, const nlohmann::json& arguments) override {
    if (name == "echo") {
      if (!arguments.contains("text") || !arguments["text"].is_string()) return {"echo needs text", true, {}};
      return {arguments["text"].get<std::string>(), false, {{"len", arguments["text"].get<std::string>().size()}}};
    }
    if (name == "bump") return {"bumped " + std::to_string(++bumps), false, {}};
    return {"unknown tool: " + name, true, {}};
  }
  int bumps = 0;
};

}  // namespace kda::mcp::testing
