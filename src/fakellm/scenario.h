// The scenarios document of the fake LLM server, parsed and validated (format: docs/fake-llm.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace kda::fakellm {

struct Fault {
  enum class Kind { kStatus, kCut, kMalformed, kDelay };
  Kind kind = Kind::kStatus;
  int status = 0;                   // kStatus
  int retry_after = -1;             // kStatus: seconds for Retry-After; -1 = no header
  std::string cut = "after_start";  // kCut: "after_start" | "before_response"
  int delay_ms = 0;                 // kDelay
  int times = 1;                    // fires on attempts 1..times at a step; -1 = always
  bool fires(int attempt) const { return times < 0 || attempt <= times; }
};

struct StepCall {
  std::string tool;
  nlohmann::json input = nlohmann::json::object();
};

struct Step {
  std::optional<std::string> text;
  std::vector<StepCall> calls;
  std::vector<Fault> faults;
};

struct Scenario {
  std::string name;
  std::string match;
  std::optional<std::string> workdir;
  std::vector<Fault> faults;
  std::vector<Step> steps;
};

struct Script {
  std::vector<Scenario> scenarios;
  std::vector<Fault> faults;  // global
  std::optional<std::string> workdir;
  bool responses_full = false;  // "responses_stream": "full"
  int chunk_chars = 24;
};

// Validates and converts the document; errors name the JSON pointer of the bad field.
Result<Script> parse_script(const nlohmann::json& doc);

// The first scenario whose match is a substring of user_text; nullptr if none.
const Scenario* match_scenario(const Script& script, const std::string& user_text);

// The step that answers at index `index`: steps[index], or past the end the last text step
// (a synthetic "done" text step when the scenario has none).
Step step_at(const Scenario& scenario, int index);

}  // namespace kda::fakellm
