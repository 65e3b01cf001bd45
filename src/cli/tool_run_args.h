// The options `kda ncu profile` and `kda sanitize` share for their run under a tool: --warmup (>= 0),
// --seed and --timeout (> 0 seconds), parsed and checked in one place.
#pragma once

#include <optional>

#include "cli/command.h"
#include "util/status.h"

namespace kda::cli {

struct ToolRunArgs {
  std::optional<long long> warmup, seed;
  std::optional<double> timeout_s;
};

inline Result<ToolRunArgs> parse_tool_run_args(const Args& args) {
  ToolRunArgs a;
  KDA_ASSIGN_OR_RETURN(a.warmup, args.integer("warmup"));
  KDA_ASSIGN_OR_RETURN(a.seed, args.integer("seed"));
  KDA_ASSIGN_OR_RETURN(a.timeout_s, args.number("timeout"));
  if (a.warmup.value_or(0) < 0) return Status::bad_input("--warmup: must be >= 0");
  if (a.timeout_s.value_or(1) <= 0) return Status::bad_input("--timeout: must be > 0 seconds");
  return a;
}

}  // namespace kda::cli
