// kda monitor: a live terminal view of a run directory, drawn from its files alone (state.json,
// ledger.json, rounds/, audit.jsonl), so it watches a run that another process (or machine, over a
// shared file system) drives, and never touches it.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace kda::report {

struct MonitorSnapshot {
  std::string phase, step;  // "round", "verify"; "done" / "stopped" when the run ended
  bool finished = false;    // done or stopped
  nlohmann::json json;      // what the frame shows, for --json
  std::string frame;        // the text frame, `width` columns at most
};

// One frame of the run in `run_dir`; kNotFound while its state.json does not exist yet.
Result<MonitorSnapshot> monitor_snapshot(const std::filesystem::path& run_dir, int width, int activity_lines);

}  // namespace kda::report
