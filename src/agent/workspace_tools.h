// The agent's workspace tools: list, read, grep, write and edit files, and run a command, all
// confined to the paths the loop allows. Served to every backend (native API agents in-process,
// CLI agents over `kda mcp`), so one set of rules holds whatever drives the agent.
//
// Path rules (every tool): a path is taken relative to the workspace unless absolute; `..` and
// symlinks are resolved (std::filesystem::weakly_canonical, then each existing component is
// checked) and the result must lie inside the allowed roots — reads: workspace, readable roots
// and writable paths; writes: a writable path (a file, or anything under a directory) and never
// a protected path or anything under one, nor anything inside a `.git` directory (hooks and config
// there would run outside the sandbox when kda runs git). A refusal is an is_error outcome saying why, plus an
// AgentEvent "denied" with ok = false. read_file, write_file and edit_file then open the file
// one component at a time with O_NOFOLLOW (a symlink swapped in after the check is refused), and
// writes replace the file atomically (temp file + rename, permission bits kept).
//
// run_command runs `bash -c COMMAND` in the workspace, in its own process group, stdin from
// /dev/null, output capped, under Landlock prepared in the parent and applied in the child:
// write = the writable paths and a private scratch dir (TMPDIR, HOME); read/execute = system
// directories, the workspace and the readable roots; no TCP at all. The environment is rebuilt
// (PATH, LANG, CUDA_HOME..., no API keys). Without Landlock the command is refused (fails closed).
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/backend.h"
#include "agent/tool.h"
#include "util/status.h"

namespace kda::agent {

struct WorkspaceToolsOptions {
  std::filesystem::path workspace;                     // root; relative paths and commands start here
  std::vector<std::filesystem::path> writable;         // files or directories (relative: to the workspace)
  std::vector<std::filesystem::path> readable;         // extra read-only roots (sealed pack, plan, evidence)
  std::vector<std::filesystem::path> protected_paths;  // never writable, even inside a writable directory
  bool read_only = false;                              // reviewer: list_files, read_file, grep only
  std::chrono::seconds command_timeout{600};           // default and maximum for run_command
  size_t max_output_bytes = 30000;                     // per tool result text (the rest is cut, and said so)
  std::function<void(const AgentEvent&)> on_event;     // file_write, command, denied; may be empty
};

class WorkspaceTools final : public ToolHost {
 public:
  explicit WorkspaceTools(WorkspaceToolsOptions options);
  ~WorkspaceTools() override;  // removes the scratch directory
  WorkspaceTools(const WorkspaceTools&) = delete;
  WorkspaceTools& operator=(const WorkspaceTools&) = delete;

  // list_files, read_file, grep (read_only) and, unless options.read_only, write_file, edit_file,
  // run_command.
  std::vector<ToolSpec> tools() const override;
  ToolOutcome call(const std::string& name, const nlohmann::json& arguments) override;

  // The path checks, for other hosts that touch workspace files. `path` is relative to the
  // workspace unless absolute. Errors are kBadInput with a message fit for the model.
  Result<std::filesystem::path> resolve_for_read(const std::string& path) const;
  Result<std::filesystem::path> resolve_for_write(const std::string& path) const;

  // How paths are shown to the model and in events: relative to the workspace when inside it.
  std::string display_path(const std::filesystem::path& resolved) const;

 private:
  ToolOutcome list_files(const nlohmann::json& args);
  ToolOutcome read_file(const nlohmann::json& args);
  ToolOutcome grep(const nlohmann::json& args);
  ToolOutcome write_file(const nlohmann::json& args);
  ToolOutcome edit_file(const nlohmann::json& args);
  ToolOutcome run_command(const nlohmann::json& args);
  ToolOutcome deny(const std::string& tool, const std::string& path, const std::string& reason);
  void emit(AgentEvent event);
  std::string cap(std::string text) const;

  WorkspaceToolsOptions options_;
  std::filesystem::path root_;                    // canonical workspace
  std::vector<std::filesystem::path> writable_;   // canonical
  std::vector<std::filesystem::path> readable_;   // canonical
  std::vector<std::filesystem::path> protected_;  // canonical
  std::filesystem::path scratch_;                 // private TMPDIR/HOME for commands
};

}  // namespace kda::agent
