#include "loop/kda_tools.h"

namespace kda::loop {

nlohmann::json FinishRound::to_json() const {
  nlohmann::json cs = nlohmann::json::array();
  for (const auto& c : claims) {
    nlohmann::json cj = {{"metric", c.metric}, {"value", c.value}};
    if (!c.workload.empty()) cj["workload"] = c.workload;
    cs.push_back(cj);
  }
  return {{"summary", summary}, {"claims", cs}};
}

std::optional<FinishRound> FinishRound::from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("summary") || !j["summary"].is_string()) return std::nullopt;
  FinishRound f;
  f.summary = j["summary"].get<std::string>();
  if (j.contains("claims")) {
    if (!j["claims"].is_array()) return std::nullopt;
    for (const auto& c : j["claims"]) {
      if (!c.is_object() || !c.contains("metric") || !c["metric"].is_string() || !c.contains("value") ||
          !c["value"].is_number())
        return std::nullopt;
      Claim claim{c["metric"].get<std::string>(), c["value"].get<double>(), ""};
      if (c.contains("workload")) {
        if (!c["workload"].is_string()) return std::nullopt;
        claim.workload = c["workload"].get<std::string>();
      }
      f.claims.push_back(claim);
    }
  }
  return f;
}

void KdaToolHost::begin_round(int max_evals) {
  in_round_ = true;
  evals_left_ = max_evals;
  finished_.reset();
}

void KdaToolHost::end_round() { in_round_ = false; }

std::vector<agent::ToolSpec> KdaToolHost::tools() const {
  std::vector<agent::ToolSpec> t;
  if (hooks_.evaluate && in_round_) {
    t.push_back({"evaluate",
                 "Evaluate the workspace's solution (solution.json and its sources) with kda's official evaluator "
                 "on the dev workloads, with fresh secret seeds: correctness verdict, latency and speedup vs the "
                 "baseline per workload, and the geomean speedup. Limited number of calls per round.",
                 {{"type", "object"}, {"properties", nlohmann::json::object()}, {"additionalProperties", false}},
                 false});
  }
  if (hooks_.ledger) {
    t.push_back({"ledger",
                 "The run's ledger: every candidate so far (round, parent, commit, measured speedup, verdicts), "
                 "and the incumbent (the best verified solution).",
                 {{"type", "object"}, {"properties", nlohmann::json::object()}, {"additionalProperties", false}},
                 true});
  }
  if (in_round_) {
    t.push_back(
        {"finish_round",
         "End this round. summary: what you changed and why, what you measured. claims: measurable claims kda "
         "checks against its own measurement (a false claim rejects the round), each {metric: "
         "\"geomean_speedup\"|\"speedup\"|\"latency_ms\", value: number, workload: uuid (for per-workload "
         "metrics)}. Call it once, as your last action.",
         {{"type", "object"},
          {"properties",
           {{"summary", {{"type", "string"}}},
            {"claims",
             {{"type", "array"},
              {"items",
               {{"type", "object"},
                {"properties",
                 {{"metric", {{"type", "string"}, {"enum", {"geomean_speedup", "speedup", "latency_ms"}}}},
                  {"value", {{"type", "number"}}},
                  {"workload", {{"type", "string"}}}}},
                {"required", {"metric", "value"}}}}}}}},
          {"required", {"summary"}}},
         false});
  }
  return t;
}

agent::ToolOutcome KdaToolHost::call(const std::string& name, const nlohmann::json& arguments) {
  if (name == "evaluate" && hooks_.evaluate && in_round_) {
    if (evals_left_ <= 0) return {"evaluate: no evaluations left this round", true, {{"error", "eval_limit"}}};
    --evals_left_;
    auto r = hooks_.evaluate();
    if (!r.ok()) return {"evaluate: " + r.status().message(), true, {{"error", r.status().message()}}};
    return *r;
  }
  if (name == "ledger" && hooks_.ledger) {
    nlohmann::json l = hooks_.ledger();
    std::string text = l.dump(1);
    if (text.size() > 30000) text = text.substr(0, 30000) + "\n[truncated]";
    return {text, false, {}};
  }
  if (name == "finish_round" && in_round_) {
    auto f = FinishRound::from_json(arguments);
    if (!f) {
      return {"finish_round: expected {summary: string, claims: [{metric, value, workload?}]}", true,
              {{"error", "bad_arguments"}}};
    }
    if (finished_) return {"finish_round: already called this round", true, {{"error", "repeated"}}};
    finished_ = *f;
    return {"Round finished. kda will now verify your claims and the reviewer will read your summary. End your "
            "session.",
            false, f->to_json()};
  }
  return {"unknown tool: " + name, true, {{"error", "unknown_tool"}}};
}

}  // namespace kda::loop
