// kda's own tools for agents in a run: `evaluate` (the official evaluator on the dev workloads,
// fresh seeds, on the workspace as it is now), `profile` (the workspace's solution on one workload
// under Nsight Compute, the report kept in the round's directory and analysed), `ledger`
// (candidates and the incumbent) and `finish_round` (ends a writer's round with a summary and
// claims kda will check). A plain
// agent::ToolHost, so the native API agent calls it in-process and `kda mcp` can serve it to CLI
// agents; compose it with the workspace file tools through agent::CompositeToolHost.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/tool.h"
#include "eval/ncu_profile.h"
#include "task/solution.h"
#include "task/task_pack.h"
#include "util/status.h"

namespace kda::loop {

// A measurable claim in finish_round. metric: "geomean_speedup" (workload ignored), "speedup" or
// "latency_ms" (with a workload uuid; "speedup" without one means the geomean).
struct Claim {
  std::string metric;
  double value = 0;
  std::string workload;
};

struct FinishRound {
  std::string summary;
  std::vector<Claim> claims;
  nlohmann::json to_json() const;
  static std::optional<FinishRound> from_json(const nlohmann::json& j);
};

// What the `profile` tool asks its hook for.
struct ProfileRequest {
  std::string workload;       // uuid; "" = the first dev workload
  std::filesystem::path ncu;  // the ncu binary, found and absolute
  int index = 1;              // 1-based number of this profile in the round
};

// What the hook made: the report (an existing .ncu-rep) and how the model should name it.
// One run of the `profile` tool's hook, as the loop and `kda mcp --workspace --task` both take it:
// the workload (the request's, default the first dev one; workloads.jsonl only, never the holdout),
// the report at dir/<uuid8>.ncu-rep (-<index> added when that name is taken, so ncu_diff has both),
// and the record kept beside it as <stem>.json, which `extra` fields join.
struct ProfileRun {
  std::string workload;
  std::filesystem::path report;  // absolute, in dir
  nlohmann::json record;         // workload, solution_hash, report (or null), ok, wall_s, error
  Status status;                 // the ncu run's
  eval::NcuProfileRun run;       // when status is ok
};
struct ProfileSetup {
  std::filesystem::path dir;  // where the report and its record go
  std::filesystem::path runner_binary;
  uint64_t seed = 1;
  std::string cuda_arch = "90a";
  nlohmann::json extra = nlohmann::json::object();        // fields the record starts with
  std::filesystem::path record_relative_to;               // the record names the report relative to this ("": absolute)
  std::function<void(const std::string& stem)> starting;  // told the report's name before ncu runs
};
// Errors: an unknown or holdout workload (kNotFound), a directory that cannot be written.
Result<ProfileRun> run_profile(const task::TaskPack& pack, const task::Solution& solution, const ProfileRequest& req,
                               const ProfileSetup& setup);

struct ProfileTaken {
  std::string workload;  // the uuid profiled
  std::filesystem::path report;
  std::string shown_path;  // e.g. the run-relative path; "" = report
};

// The ledger tool's reply: the incumbent's id and full record first, then one page of candidates
// newest first (page 1 = the newest), with the page count, so no reply is ever cut.
inline constexpr int kLedgerPerPage = 5;
nlohmann::ordered_json ledger_page(const nlohmann::json& ledger, int page, int per_page = kLedgerPerPage);

class KdaToolHost final : public agent::ToolHost {
 public:
  struct Hooks {
    // Evaluates the workspace's solution on the dev workloads; the text the model sees plus the
    // structured report. Empty: the tool is not offered.
    std::function<Result<agent::ToolOutcome>()> evaluate;
    std::function<nlohmann::json()> ledger;  // ledger summary; empty: not offered
    // Runs the workspace's solution on req.workload under req.ncu and keeps the report (see
    // ProfileRequest); returns the report's path. An error is shown to the model as an is_error
    // outcome; kBadInput / kNotFound (e.g. an unknown workload) do not use up the round's budget.
    // Empty: the tool is not offered.
    std::function<Result<ProfileTaken>(const ProfileRequest&)> profile;
    std::string ncu;                 // the ncu binary (--ncu); "": ncu on PATH, else /usr/local/cuda/bin/ncu
    int max_profiles_per_round = 2;  // `profile` calls per writer round
    // false: a session without rounds (kda mcp --workspace --task): begin_round() opens the session's
    // evaluation budget once and finish_round is never offered.
    bool rounds = true;
    size_t max_profile_chars = 16000;  // the analysis text shown to the model
  };
  explicit KdaToolHost(Hooks hooks) : hooks_(std::move(hooks)) {}

  // Opens a writer round: finish_round and profile are offered, `evaluate` may be called max_evals
  // times and `profile` Hooks::max_profiles_per_round times.
  void begin_round(int max_evals);
  // Closes it (reviewer sessions get only read-only tools).
  void end_round();
  const std::optional<FinishRound>& finished() const { return finished_; }

  std::vector<agent::ToolSpec> tools() const override;
  agent::ToolOutcome call(const std::string& name, const nlohmann::json& arguments) override;

 private:
  agent::ToolOutcome profile(const nlohmann::json& arguments);

  Hooks hooks_;
  bool in_round_ = false;
  int evals_left_ = 0;
  int profiles_taken_ = 0;
  std::optional<FinishRound> finished_;
};

}  // namespace kda::loop
