// The PreToolUse guard Claude Code runs before each Write/Edit/MultiEdit/NotebookEdit
// (`kda mcp guard --allow <path>...`, wired through --settings). Defence in depth only: Landlock
// enforces the same limits on every process of the session, shell commands included.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kda::agent {

// The reason to deny the hook's tool call, or nullopt to let it through. A file tool's target
// (file_path / notebook_path; relative paths resolve against the hook's cwd) must lie under one
// of `allowed` after resolving symlinks and "..". Malformed input is denied.
std::optional<std::string> guard_denial(const nlohmann::json& hook_input,
                                        const std::vector<std::filesystem::path>& allowed);

// The hook's stdout for a denial (Claude's hookSpecificOutput / permissionDecision "deny").
nlohmann::json guard_deny_output(const std::string& reason);

}  // namespace kda::agent
