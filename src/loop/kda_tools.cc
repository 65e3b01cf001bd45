#include "loop/kda_tools.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "agent/tool_args.h"
#include "eval/tool_run.h"
#include "ncu/analyze.h"
#include "ncu/load.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kda::loop {

nlohmann::ordered_json ledger_page(const nlohmann::json& ledger, int page, int per_page) {
  const std::string incumbent = ledger.value("incumbent", std::string());
  const nlohmann::json all = ledger.value("candidates", nlohmann::json::array());
  nlohmann::ordered_json out;
  out["incumbent"] = incumbent;
  for (const auto& c : all)
    if (c.value("id", std::string()) == incumbent) out["incumbent_record"] = nlohmann::ordered_json(c);
  const int total = static_cast<int>(all.size());
  const int pages = std::max(1, (total + per_page - 1) / per_page);
  out["candidates_total"] = total;
  out["page"] = page;
  out["pages"] = pages;
  nlohmann::ordered_json cs = nlohmann::ordered_json::array();
  for (int k = (page - 1) * per_page; k < std::min(total, page * per_page); ++k)
    cs.push_back(nlohmann::ordered_json(all[static_cast<size_t>(total - 1 - k)]));
  out["candidates_newest_first"] = std::move(cs);
  if (page < pages) out["older"] = fmt::format("call ledger with page {} for older candidates", page + 1);
  return out;
}

namespace {

// `s` as valid UTF-8 (invalid bytes become U+FFFD), at most `n` bytes cut at a character boundary,
// with a note when something was left out.
std::string bounded_text(const std::string& s, size_t n) {
  nlohmann::json j = s;
  std::string v =
      nlohmann::json::parse(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)).get<std::string>();
  if (v.size() <= n) return v;
  const size_t total = v.size();
  const size_t cut = util::utf8_cut(v, n);
  v.resize(cut);
  return v + fmt::format(
                 "\n[truncated: {} of {} characters shown; call ncu_analyze on the report with kernel (a "
                 "regex) or max_priorities for a smaller view]",
                 cut, total);
}

}  // namespace

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
  profiles_taken_ = 0;
  finished_.reset();
}

void KdaToolHost::end_round() { in_round_ = false; }

namespace {

// The tools' arguments, one declaration each (agent/tool_args.h). finish_round's claims are a
// structured list with their own reader (FinishRound::from_json) and schema below.
const std::vector<agent::ArgSpec>& evaluate_args() {
  static const std::vector<agent::ArgSpec> s;
  return s;
}
const std::vector<agent::ArgSpec>& profile_args() {
  static const std::vector<agent::ArgSpec> s = {
      agent::string_arg("workload", "workload uuid (default: the first dev workload)")};
  return s;
}
const std::vector<agent::ArgSpec>& ledger_args() {
  static const std::vector<agent::ArgSpec> s = {agent::integer_arg("page", "1 = the newest candidates").at_least(1),
                                                agent::integer_arg("per_page", "default 5").in_range(1, 20)};
  return s;
}

}  // namespace

std::vector<agent::ToolSpec> KdaToolHost::tools() const {
  std::vector<agent::ToolSpec> t;
  if (hooks_.evaluate && in_round_) {
    t.push_back({"evaluate",
                 "Evaluate the workspace's solution (solution.json and its sources) with kda's official evaluator "
                 "on the dev workloads, with fresh secret seeds: correctness verdict, latency and speedup vs the "
                 "baseline per workload, and the geomean speedup. Limited number of calls (per round in a kda run, per "
                 "session under kda mcp --task).",
                 agent::args_schema(evaluate_args()), false});
  }
  if (hooks_.profile && in_round_) {
    t.push_back(
        {"profile",
         fmt::format("Profile the workspace's solution (as it is now) on one workload under Nsight Compute (full "
                     "section set, source counters, PM sampling, only the solution's own kernels, one call after "
                     "warm-up). Returns the ranked priorities of the analysis (evidence, expected gain, effort) and "
                     "the report's path, which ncu_analyze and ncu_diff accept. workload: a uuid from the task's "
                     "workloads (default: the first dev workload). At most {} profiles per round; each takes GPU "
                     "time, so profile to decide what to change, not to measure (evaluate measures).",
                     hooks_.max_profiles_per_round),
         agent::args_schema(profile_args()), false});
  }
  if (hooks_.ledger) {
    t.push_back({"ledger",
                 "The run's ledger: the incumbent (the best verified solution) in full, then the candidates newest "
                 "first (round, parent, commit, measured speedup, verdicts), a page at a time. page: 1 (default) "
                 "is the newest; the reply says how many pages there are.",
                 agent::args_schema(ledger_args()), true});
  }
  if (in_round_ && hooks_.rounds) {
    t.push_back({"finish_round",
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
    if (auto bad = agent::ArgValues(evaluate_args(), arguments).refusal("evaluate")) return *bad;
    if (evals_left_ <= 0)
      return {
          hooks_.rounds ? "evaluate: no evaluations left this round" : "evaluate: no evaluations left in this session",
          true,
          {{"error", "eval_limit"}}};
    --evals_left_;
    auto r = hooks_.evaluate();
    if (!r.ok())
      return {fmt::format("evaluate: {}\n(evaluate calls left this {}: {})", r.status().message(),
                          hooks_.rounds ? "round" : "session", evals_left_),
              true,
              {{"error", r.status().message()}, {"evals_left", evals_left_}}};
    agent::ToolOutcome out = *r;
    out.text += fmt::format("\n(evaluate calls left this {}: {})", hooks_.rounds ? "round" : "session", evals_left_);
    if (out.data.is_object() || out.data.is_null()) out.data["evals_left"] = evals_left_;
    return out;
  }
  if (name == "profile" && hooks_.profile && in_round_) return profile(arguments);
  if (name == "ledger" && hooks_.ledger) {
    const agent::ArgValues a(ledger_args(), arguments);
    if (auto bad = a.refusal("ledger")) return *bad;
    const int page = static_cast<int>(a.integer("page").value_or(1));
    const int per_page = static_cast<int>(a.integer("per_page").value_or(kLedgerPerPage));
    return {ledger_page(hooks_.ledger(), page, per_page).dump(1), false, {}};
  }
  if (name == "finish_round" && in_round_ && hooks_.rounds) {
    auto f = FinishRound::from_json(arguments);
    if (!f) {
      return {"finish_round: expected {summary: string, claims: [{metric, value, workload?}]}",
              true,
              {{"error", "bad_arguments"}}};
    }
    if (finished_) return {"finish_round: already called this round", true, {{"error", "repeated"}}};
    finished_ = *f;
    return {
        "Round finished. kda will now verify your claims and the reviewer will read your summary. End your "
        "session.",
        false, f->to_json()};
  }
  return {"unknown tool: " + name, true, {{"error", "unknown_tool"}}};
}

agent::ToolOutcome KdaToolHost::profile(const nlohmann::json& arguments) {
  auto error = [](const std::string& message, const std::string& code, nlohmann::json data = nlohmann::json::object()) {
    data["error"] = code;
    return agent::ToolOutcome{"profile: " + message, true, std::move(data)};
  };
  // Phase: arguments, the budget, the tool. Nothing here uses up the budget.
  ProfileRequest req;
  const agent::ArgValues a(profile_args(), arguments);
  if (auto bad = a.refusal("profile")) return *bad;
  req.workload = a.string("workload").value_or("");
  const int limit = hooks_.max_profiles_per_round;
  if (profiles_taken_ >= limit)
    return error(fmt::format("no profiles left this round ({} per round); reuse the reports you have with "
                             "ncu_analyze / ncu_diff",
                             limit),
                 "profile_limit");
  auto ncu = eval::find_tool(hooks_.ncu, "ncu", "--ncu");
  if (!ncu.ok())
    return error("ncu not found: install Nsight Compute or pass --ncu (" + ncu.status().message() + ")",
                 "ncu_not_found");
  req.ncu = *ncu;
  req.index = profiles_taken_ + 1;

  // Phase: the run (the hook keeps the report in the round's directory and logs it).
  ++profiles_taken_;
  auto taken = hooks_.profile(req);
  if (!taken.ok()) {
    const bool input = taken.status().kind() == ErrorKind::kBadInput || taken.status().kind() == ErrorKind::kNotFound;
    if (input) --profiles_taken_;
    return error(bounded_text(taken.status().message(), hooks_.max_profile_chars),
                 input ? "bad_arguments" : "profile_failed", {{"workload", req.workload}});
  }
  const std::string shown = taken->shown_path.empty() ? taken->report.string() : taken->shown_path;
  nlohmann::json data = {{"workload", taken->workload}, {"report", shown}, {"profiles_left", limit - profiles_taken_}};

  // Phase: the report, read natively, and its ranked priorities (bounded).
  auto loaded = ncu::load_report(taken->report);
  if (!loaded.ok())
    return error("the report " + shown + " does not read: " + loaded.status().message(), "bad_report", data);
  auto analysis = ncu::analyze(*loaded, {});
  if (!analysis.ok())
    return error("analysis of " + shown + " failed: " + analysis.status().message(), "analyze_failed", data);
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& k : analysis->kernels) {
    nlohmann::json ps = nlohmann::json::array();
    for (const auto& p : k.priorities) ps.push_back({{"id", p.id}, {"expected_gain_pct", p.expected_gain_pct}});
    kernels.push_back({{"id", k.id}, {"name", bounded_text(k.name, 300)}, {"priorities", ps}});
  }
  data["kernels"] = kernels;
  std::string text = fmt::format(
      "Profiled workload {} (profile {} of {} this round).\nreport: {}\nncu_analyze (kernel, max_priorities) and "
      "ncu_diff (before, after) accept this path.\n\n{}",
      taken->workload, profiles_taken_, limit, shown, ncu::to_markdown(*analysis));
  return {bounded_text(text, hooks_.max_profile_chars), false, std::move(data)};
}

Result<ProfileRun> run_profile(const task::TaskPack& pack, const task::Solution& solution, const ProfileRequest& req,
                               const ProfileSetup& setup) {
  ProfileRun out;
  out.workload = !req.workload.empty() ? req.workload : pack.dev_uuids.empty() ? "" : pack.dev_uuids.front();
  if (std::none_of(pack.workloads.begin(), pack.workloads.end(),
                   [&](const task::Workload& w) { return w.uuid == out.workload; }))
    return Status::not_found("workload '" + out.workload + "' is not in the task's workloads.jsonl");
  KDA_RETURN_IF_ERROR(fs::ensure_dir(setup.dir));
  std::string stem = out.workload.substr(0, 8);
  std::error_code ec;
  if (std::filesystem::exists(setup.dir / (stem + ".ncu-rep"), ec) ||
      std::filesystem::exists(setup.dir / (stem + ".json"), ec))
    stem += "-" + std::to_string(req.index);  // the same workload again: keep both, for ncu_diff
  eval::NcuProfileOptions o;
  o.ncu = req.ncu;
  o.report = setup.dir / (stem + ".ncu-rep");
  o.workload = out.workload;
  o.runner_binary = setup.runner_binary;
  o.seed = setup.seed;
  o.cuda_arch = setup.cuda_arch;
  if (setup.starting) setup.starting(stem);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = eval::run_ncu_profile(pack, solution, o);
  out.status = r.ok() ? r->status : r.status();
  out.report = o.report;
  if (r.ok()) out.run = *r;
  out.record = setup.extra;
  out.record["workload"] = out.workload;
  out.record["solution_hash"] = task::solution_hash(solution);
  const std::filesystem::path shown =
      setup.record_relative_to.empty() ? o.report : o.report.lexically_relative(setup.record_relative_to);
  out.record["report"] = out.status.ok() ? nlohmann::json(shown.generic_string()) : nlohmann::json(nullptr);
  out.record["ok"] = out.status.ok();
  out.record["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!out.status.ok()) out.record["error"] = out.status.message();
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(setup.dir / (stem + ".json"), out.record.dump(2)));
  return out;
}

}  // namespace kda::loop
