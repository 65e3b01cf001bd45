// Backend specs on the command line (--writer / --reviewer) -> agent::Backend.
//   scripted:<file.json>                 agent::make_scripted_backend (tests, demos)
//   anthropic:<model>[?...], openai:..., openai-chat:..., openai-responses:...
//                                        agent::make_api_backend (llm/provider_config.h specs)
//   claude-code[:...], codex[:...]    the real CLIs (agent/cli_backend_spec.h)
//   tuner                                offline autotuning writer (loop/tuner_writer.h)
//   rules                                offline rule-based reviewer (loop/rules_reviewer.h)
// Other kinds register here, one line each, as their modules land (see backend_factory.cc).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/backend.h"
#include "util/status.h"

namespace kda::loop {

// Unknown kinds are a kBadInput error listing the known ones.
Result<std::unique_ptr<agent::Backend>> make_backend(const std::string& spec);
// "scripted:<file.json>", ... (for --help and errors).
std::vector<std::string> known_backend_kinds();

}  // namespace kda::loop
