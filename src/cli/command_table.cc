#include "cli/commands.h"

namespace kda::cli {

const std::vector<CommandSpec>& all_commands() {
  static const std::vector<CommandSpec> kCommands = [] {
    std::vector<CommandSpec> v;
    [[maybe_unused]] auto add = [&v](std::vector<CommandSpec> group) {
      for (auto& c : group) v.push_back(std::move(c));
    };
    add(task_commands());
    add(solution_commands());
    v.push_back(eval_command());
    v.push_back(sanitize_command());
    v.push_back(tune_command());
    v.push_back(run_command());
    v.push_back(report_command());
    v.push_back(monitor_command());
    add(ncu_commands());
    add(mcp_commands());
    add(audit_commands());
#ifdef KDA_HAVE_WIKI
    add(wiki_commands());
#endif
#ifdef KDA_HAVE_SERVE
    v.push_back(serve_command());
#endif
#ifdef KDA_HAVE_EXEC
    add(cluster_commands());
#endif
    v.push_back(docs_command());
    return v;
  }();
  return kCommands;
}

}  // namespace kda::cli
