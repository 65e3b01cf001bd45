// A backend that plays a script instead of a model: for each session (role, phase, index) a list
// of steps — file writes into the workspace and tool calls through request.tools — and a final
// text. Tests drive the loop with it; `kda run --writer scripted:<file.json>` uses it too.
//
// Script (JSON):
//   {"sessions": [
//     {"role": "writer", "phase": "round", "index": 2,          // index omitted: any index
//      "steps": [
//        {"write_file": {"path": "kernel.cc", "content": "..."}},        // relative to the workspace
//        {"write_file": {"path": "kernel.cc", "content_file": "k.cc"}},  // read beside the script
//        {"tool": "evaluate", "arguments": {}},
//        {"tool": "finish_round", "arguments": {"summary": "...", "claims": []}},
//        {"sleep_ms": 50},
//        {"fail": "simulated API outage"}                                // run_session returns an error
//      ],
//      "final_text": "DECISION: CONTINUE\nPROGRESS: ADVANCED",
//      "usage": {"input_tokens": 1000, "output_tokens": 100, "cost_usd": 0.01}}]}
// A session with an exact (role, phase, index) entry uses it; otherwise the first entry with the
// same role and phase and no index; otherwise run_session fails naming the missing entry.
// Writes go only under request.writable (resolved, no escaping through ".."); a write step with
// "unconfined": true bypasses that, to model an agent that escaped its sandbox.
#pragma once

#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "agent/backend.h"
#include "util/status.h"

namespace kda::agent {

// `script` as described above; `base_dir` resolves "content_file" paths. Errors name the field.
Result<std::unique_ptr<Backend>> make_scripted_backend(const nlohmann::json& script,
                                                       const std::filesystem::path& base_dir = {});
// Reads the script from a JSON file (content_file paths are relative to its directory).
Result<std::unique_ptr<Backend>> make_scripted_backend(const std::filesystem::path& script_file);

}  // namespace kda::agent
