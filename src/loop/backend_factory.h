// Backend specs on the command line (--writer / --reviewer) -> agent::Backend.
//   scripted:<file.json>                 agent::make_scripted_backend (tests, demos)
//   anthropic:<model>[?...], openai:..., openai-chat:..., openai-responses:...
//                                        agent::make_api_backend (llm/provider_config.h specs)
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
