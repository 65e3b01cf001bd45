#include "loop/workspace_session.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>

#include <fmt/format.h>

#include "loop/runner.h"
#include "eval/ncu_profile.h"
#include "task/solution.h"
#include "util/fs.h"

namespace kda::loop {

namespace stdfs = std::filesystem;
using nlohmann::json;

Result<std::unique_ptr<WorkspaceSession>> WorkspaceSession::open(WorkspaceSessionOptions options) {
  std::error_code ec;
  if (!stdfs::is_directory(options.workspace, ec))
    return Status::bad_input("--workspace " + options.workspace.string() + " is not a directory");
  if (options.max_evals < 1)
    return Status::bad_input(fmt::format("--max-evals must be >= 1, not {}", options.max_evals));
  if (!options.profiles_dir.empty() && options.max_profiles < 1)
    return Status::bad_input(fmt::format("--max-profiles must be >= 1 with --profiles, not {}", options.max_profiles));
  KDA_ASSIGN_OR_RETURN(task::TaskPack pack, task::load_task_pack(options.pack));
  KDA_ASSIGN_OR_RETURN(task::Manifest manifest, task::pack_manifest(options.pack));
  return std::unique_ptr<WorkspaceSession>(
      new WorkspaceSession(std::move(options), std::move(pack), std::move(manifest)));
}

KdaToolHost::Hooks WorkspaceSession::hooks() {
  KdaToolHost::Hooks h;
  h.evaluate = [this] { return evaluate(); };
  h.ledger = [this] { return ledger(); };
  h.rounds = false;
  if (!options_.profiles_dir.empty()) {
    h.profile = [this](const ProfileRequest& req) { return profile(req); };
    h.ncu = options_.ncu;
    h.max_profiles_per_round = options_.max_profiles;  // the session is one round
  }
  return h;
}

// The workspace's solution under ncu (run_profile), the report and its record in profiles_dir.
Result<ProfileTaken> WorkspaceSession::profile(const ProfileRequest& req) {
  auto solution = task::load_solution(options_.workspace);
  if (!solution.ok())
    return Status::bad_input("the workspace's solution does not load: " + solution.status().message());
  ProfileSetup setup;
  setup.dir = options_.profiles_dir;
  setup.runner_binary = options_.runner_binary;
  setup.seed = static_cast<uint64_t>(req.index);
  setup.cuda_arch = options_.cuda_arch;
  KDA_ASSIGN_OR_RETURN(ProfileRun run, run_profile(pack_, *solution, req, setup));
  if (!run.status.ok()) return run.status;
  return ProfileTaken{run.workload, run.run.report, run.run.report.string()};
}

// Phases: load the workspace's solution -> the official evaluation (sealed pack, fresh seed) ->
// the ledger entry (and the log line) -> the table the model reads.
Result<agent::ToolOutcome> WorkspaceSession::evaluate() {
  auto solution = task::load_solution(options_.workspace);
  if (!solution.ok())
    return agent::ToolOutcome{
        "the workspace's solution does not load: " + solution.status().message(), true, {{"error", "bad_solution"}}};
  eval::EvalOptions o;
  o.runner_binary = options_.runner_binary;
  o.workloads = options_.workloads;
  o.sealed = manifest_;
  o.cuda_arch = options_.cuda_arch;
  const auto t0 = std::chrono::steady_clock::now();
  KDA_ASSIGN_OR_RETURN(eval::EvalReport report, eval::evaluate(pack_, *solution, o));
  json summary = detail::eval_summary(report);
  const std::string id = fmt::format("e{}", evaluations_.size() + 1);
  json entry = {{"id", id},
                {"solution_hash", task::solution_hash(*solution)},
                {"all_passed", report.all_passed},
                {"geomean_speedup", report.score_geomean},
                {"workloads", options_.workloads},
                {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
                {"time", static_cast<int64_t>(std::time(nullptr))},
                {"summary", summary}};
  evaluations_.push_back(entry);
  if (!options_.log.empty()) {
    std::ofstream log(options_.log, std::ios::app);
    log << entry.dump() << "\n";
    if (!log.flush()) return Status::io("--log " + options_.log.string() + ": cannot append");
  }
  return agent::ToolOutcome{
      fmt::format("evaluation {} (solution {}):\n{}", id, entry["solution_hash"].get<std::string>().substr(0, 12),
                  detail::eval_table(summary)),
      false, entry};
}

json WorkspaceSession::ledger() const {
  std::string incumbent;
  double best = 0;
  json candidates = json::array();
  for (const auto& e : evaluations_) {
    json c = e;
    c.erase("summary");  // the per-workload table is in the evaluate reply
    candidates.push_back(c);
    if (e["all_passed"].get<bool>() && e["geomean_speedup"].get<double>() > best) {
      best = e["geomean_speedup"].get<double>();
      incumbent = e["id"].get<std::string>();
    }
  }
  return {{"incumbent", incumbent}, {"candidates", candidates}};
}

}  // namespace kda::loop
