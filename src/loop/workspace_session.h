// kda's evaluator for an agent kda does not drive: `kda mcp --workspace DIR --task PACK` gives your
// own Claude Code or Codex kda's `evaluate` and `ledger` tools on DIR's solution (and with
// --profiles, `profile`: ncu on one workload, the report kept there, its ranked advice returned). kda, not the
// agent, owns the evaluation: it runs in the kda mcp process (outside the agent's sandbox), on the
// pack sealed when the session started (a changed pack file fails every later evaluation), on
// fresh secret seeds, with the pack's baseline interleaved. The ledger lists this session's
// evaluations, the best fully passing one as the incumbent.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/evaluator.h"
#include "loop/kda_tools.h"
#include "task/manifest.h"
#include "task/task_pack.h"
#include "util/status.h"

namespace kda::loop {

struct WorkspaceSessionOptions {
  std::filesystem::path workspace;      // holds solution.json and its sources
  std::filesystem::path pack;           // the task pack
  std::filesystem::path runner_binary;  // kda-runner
  std::string workloads = "dev";        // what `evaluate` runs on (dev | all | uuids)
  int max_evals = 20;                   // `evaluate` calls in the session
  std::string cuda_arch = "90a";
  // Appended with one JSON line per evaluation (outside the workspace; "" = none).
  std::filesystem::path log;
  // Where `profile` keeps its reports (<uuid8>[-k].ncu-rep and a .json record beside each); "" =
  // no profile tool. The profiled runner is not sandboxed (ncu must attach to it).
  std::filesystem::path profiles_dir;
  int max_profiles = 5;  // `profile` calls in the session
  std::string ncu;       // the ncu binary; "": ncu on PATH, else /usr/local/cuda/bin/ncu
};

class WorkspaceSession {
 public:
  // Errors: the pack does not load (kBadInput / kNotFound naming the file), the workspace is not a
  // directory, max_evals < 1.
  static Result<std::unique_ptr<WorkspaceSession>> open(WorkspaceSessionOptions options);

  // The hooks of a KdaToolHost: evaluate, ledger and (with profiles_dir) profile; no rounds, no
  // finish_round.
  KdaToolHost::Hooks hooks();
  int max_evals() const { return options_.max_evals; }
  const task::TaskPack& pack() const { return pack_; }

  // One evaluation of the workspace's solution as it is now (what the `evaluate` tool calls).
  Result<agent::ToolOutcome> evaluate();
  nlohmann::json ledger() const;
  // The workspace's solution on one workload under ncu (what the `profile` tool calls).
  Result<ProfileTaken> profile(const ProfileRequest& req);

 private:
  WorkspaceSession(WorkspaceSessionOptions o, task::TaskPack p, task::Manifest m)
      : options_(std::move(o)), pack_(std::move(p)), manifest_(std::move(m)) {}

  WorkspaceSessionOptions options_;
  task::TaskPack pack_;
  task::Manifest manifest_;
  std::vector<nlohmann::json> evaluations_;  // ledger candidates, oldest first
};

}  // namespace kda::loop
