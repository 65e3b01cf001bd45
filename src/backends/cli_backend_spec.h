// Command-line specs for the CLI agents (kda run --writer/--reviewer):
//   claude-code[:<model>][?base_url=URL&key_env=VAR&api_retries=N&sessions_dir=DIR&pass_env=A,B&guard_hook=0]
//   codex[:<model>][?...same keys...]
// Values may be %-encoded. An empty model leaves the CLI's default; an empty base_url the
// provider's public API. Errors (kBadInput) name the spec and the key.
#pragma once

#include <memory>
#include <string>

#include "agent/backend.h"
#include "backends/cli_claude.h"
#include "backends/cli_codex.h"
#include "util/status.h"

namespace kda::agent {

// `kind` is "claude-code" or "codex"; `arg` is what follows "<kind>:" (may be empty).
Result<ClaudeCodeConfig> parse_claude_code_spec(const std::string& arg);
Result<CodexConfig> parse_codex_spec(const std::string& arg);
// For backend factories: "claude-code:..." or "codex:..." -> the backend.
Result<std::unique_ptr<Backend>> make_cli_backend(const std::string& kind, const std::string& arg);

}  // namespace kda::agent
