// kda's own tools for agents in a run: `evaluate` (the official evaluator on the dev workloads,
// fresh seeds, on the workspace as it is now), `ledger` (candidates and the incumbent) and
// `finish_round` (ends a writer's round with a summary and claims kda will check). A plain
// agent::ToolHost, so the native API agent calls it in-process and `kda mcp` can serve it to CLI
// agents; compose it with the workspace file tools through agent::CompositeToolHost.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/tool.h"
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

class KdaToolHost final : public agent::ToolHost {
 public:
  struct Hooks {
    // Evaluates the workspace's solution on the dev workloads; the text the model sees plus the
    // structured report. Empty: the tool is not offered.
    std::function<Result<agent::ToolOutcome>()> evaluate;
    std::function<nlohmann::json()> ledger;  // ledger summary; empty: not offered
  };
  explicit KdaToolHost(Hooks hooks) : hooks_(std::move(hooks)) {}

  // Opens a writer round: finish_round is offered and `evaluate` may be called max_evals times.
  void begin_round(int max_evals);
  // Closes it (reviewer sessions get only read-only tools).
  void end_round();
  const std::optional<FinishRound>& finished() const { return finished_; }

  std::vector<agent::ToolSpec> tools() const override;
  agent::ToolOutcome call(const std::string& name, const nlohmann::json& arguments) override;

 private:
  Hooks hooks_;
  bool in_round_ = false;
  int evals_left_ = 0;
  std::optional<FinishRound> finished_;
};

}  // namespace kda::loop
