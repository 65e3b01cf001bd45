// Tools an agent can call: a name, a description, a JSON-Schema for the arguments, and a host that
// runs them. The same ToolHost serves the native API agent (in-process) and the CLI agents (over
// `kda mcp`), so a writer sees one set of tools whatever drives it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kda::agent {

struct ToolSpec {
  std::string name;             // [a-z_]+, e.g. "read_file", "evaluate", "finish_round"
  std::string description;      // what the model reads
  nlohmann::json input_schema;  // JSON Schema (type "object")
  bool read_only = true;        // reviewers get only read-only tools
};

// What a tool call produced. A denied or failed action is is_error = true, never a success.
struct ToolOutcome {
  std::string text;  // what the model sees (bounded; hosts truncate long output)
  bool is_error = false;
  nlohmann::json data = nlohmann::json::object();  // structured detail for the audit log
};

class ToolHost {
 public:
  virtual ~ToolHost() = default;
  virtual std::vector<ToolSpec> tools() const = 0;
  // Unknown tool or arguments that do not fit the schema: is_error outcome, never a crash.
  virtual ToolOutcome call(const std::string& name, const nlohmann::json& arguments) = 0;
};

// Several hosts behind one (e.g. workspace file tools + kda tools). First host naming a tool wins.
class CompositeToolHost final : public ToolHost {
 public:
  void add(ToolHost* host) { hosts_.push_back(host); }
  std::vector<ToolSpec> tools() const override;
  ToolOutcome call(const std::string& name, const nlohmann::json& arguments) override;

 private:
  std::vector<ToolHost*> hosts_;
};

}  // namespace kda::agent
