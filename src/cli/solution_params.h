// `--param NAME=VALUE` of kda eval, kda ncu profile and kda sanitize: one configuration of a tunable solution
// (its tunables.toml), built as kda tune builds it, in place of the solution as written.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "cli/command.h"
#include "task/definition.h"
#include "task/solution.h"
#include "tune/generate.h"
#include "util/status.h"

namespace kda::cli {

inline OptionSpec param_option() {
  return {.name = "param",
          .metavar = "NAME=VALUE",
          .help =
              "build the solution with its tunables.toml parameter NAME at VALUE, the others at their first values, "
              "as kda tune builds a configuration (NAME variant picks a variant)",
          .repeatable = true};
}

// Replaces `solution` (loaded from `solution_path`) by the configuration the --param options name, saying its
// label and any note on stderr; nothing when none is given.
inline Status apply_params(const Args& args, const std::string& solution_path, const task::Definition& def,
                           task::Solution& solution, Io& io, std::string_view command) {
  const auto params = args.values("param");
  if (params.empty()) return {};
  KDA_ASSIGN_OR_RETURN(tune::Configured c, tune::configured_solution(solution, solution_path, def, params));
  for (const auto& note : c.notes) io.err << command << ": note: " << note << "\n";
  io.err << command << ": configuration " << c.config.label() << " (" << c.config.id() << ") of " << solution.name
         << "\n";
  solution = std::move(c.solution);
  return {};
}

}  // namespace kda::cli
