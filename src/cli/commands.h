// The one table of kda's subcommands. Each module's commands are declared here and defined in
// src/cli/<area>_commands.cc; command_table.cc lists them in the order `kda --help` shows.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "cli/command.h"

namespace kda::cli {

const std::vector<CommandSpec>& all_commands();

// Runs `kda <argv...>` (argv excludes the program name). Returns the exit code.
int dispatch(std::span<const std::string> argv, Io& io);

// Markdown reference of every command, generated from the specs (docs/cli.md).
std::string commands_markdown();

// Factories, one per command, grouped by area.
std::vector<CommandSpec> audit_commands();  // audit verify
CommandSpec docs_command();
CommandSpec eval_command();                    // eval
CommandSpec report_command();                  // report (HTML pages, src/report)
CommandSpec monitor_command();                 // monitor (a live view of a run, src/report)
CommandSpec run_command();                     // run (the agent loop, src/loop)
std::vector<CommandSpec> mcp_commands();       // mcp, mcp guard
std::vector<CommandSpec> ncu_commands();       // ncu analyze|diff
std::vector<CommandSpec> solution_commands();  // solution init (src/task/scaffold.h)
CommandSpec sanitize_command();                // sanitize (the compute-sanitizer gate)
std::vector<CommandSpec> cluster_commands();   // cluster up|status|down (src/exec), only with KDA_HAVE_EXEC
CommandSpec serve_command();                   // serve (src/serve), only with KDA_HAVE_SERVE (cpp-httplib found)
std::vector<CommandSpec> task_commands();      // task validate|list|show
CommandSpec tune_command();                    // tune (src/tune)
std::vector<CommandSpec> wiki_commands();      // only with KDA_HAVE_WIKI (SQLite found)

}  // namespace kda::cli
