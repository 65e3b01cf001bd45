#include "loop/run_state.h"

#include <fmt/format.h>

#include "util/fs.h"
#include "util/sha256.h"

namespace kda::loop {

namespace {

nlohmann::json opt_int(const std::optional<int>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }
std::optional<int> get_opt_int(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<int>();
}

nlohmann::json usage_json(const agent::Usage& u) {
  return {{"input_tokens", u.input_tokens},
          {"output_tokens", u.output_tokens},
          {"cache_read_tokens", u.cache_read_tokens},
          {"cache_write_tokens", u.cache_write_tokens},
          {"cost_usd", u.cost_usd},
          {"requests", u.requests}};
}
agent::Usage usage_from(const nlohmann::json& j) {
  agent::Usage u;
  u.input_tokens = j.value("input_tokens", int64_t{0});
  u.output_tokens = j.value("output_tokens", int64_t{0});
  u.cache_read_tokens = j.value("cache_read_tokens", int64_t{0});
  u.cache_write_tokens = j.value("cache_write_tokens", int64_t{0});
  u.cost_usd = j.value("cost_usd", 0.0);
  u.requests = j.value("requests", 0);
  return u;
}

}  // namespace

nlohmann::json LoopOptions::to_json() const {
  return {{"task", task.string()},
          {"writer", writer},
          {"reviewer", reviewer},
          {"target", target},
          {"start", start.string()},
          {"max_rounds", max_rounds},
          {"hours", hours},
          {"budget_tokens", budget_tokens},
          {"budget_usd", budget_usd},
          {"gpu_minutes", gpu_minutes},
          {"eval_trials", opt_int(eval_trials)},
          {"eval_iterations", opt_int(eval_iterations)},
          {"eval_warmup", opt_int(eval_warmup)},
          {"final_trials", opt_int(final_trials)},
          {"plan_reviews", plan_reviews},
          {"alignment_every", alignment_every},
          {"claim_tolerance", claim_tolerance},
          {"min_improvement", min_improvement},
          {"confirm_pairs", confirm_pairs},
          {"max_evals_per_round", max_evals_per_round},
          {"lanes", lanes},
          {"max_profiles_per_round", max_profiles_per_round},
          {"sandbox", sandbox},
          {"cuda_arch", cuda_arch}};
}

Result<LoopOptions> LoopOptions::from_json(const nlohmann::json& j) {
  LoopOptions o;
  try {
    o.task = j.at("task").get<std::string>();
    o.writer = j.at("writer").get<std::string>();
    o.reviewer = j.at("reviewer").get<std::string>();
    o.target = j.at("target").get<std::string>();
    o.start = j.value("start", "");
    o.max_rounds = j.at("max_rounds").get<int>();
    o.hours = j.value("hours", 0.0);
    o.budget_tokens = j.value("budget_tokens", int64_t{0});
    o.budget_usd = j.value("budget_usd", 0.0);
    o.gpu_minutes = j.value("gpu_minutes", 0.0);
    o.eval_trials = get_opt_int(j, "eval_trials");
    o.eval_iterations = get_opt_int(j, "eval_iterations");
    o.eval_warmup = get_opt_int(j, "eval_warmup");
    o.final_trials = get_opt_int(j, "final_trials");
    o.plan_reviews = j.value("plan_reviews", 2);
    o.alignment_every = j.value("alignment_every", 0);
    o.claim_tolerance = j.value("claim_tolerance", 0.25);
    o.min_improvement = j.value("min_improvement", 0.02);
    o.confirm_pairs = j.value("confirm_pairs", 3);
    o.max_evals_per_round = j.value("max_evals_per_round", 8);
    o.lanes = j.value("lanes", 1);
    if (o.lanes < 1 || o.lanes > kMaxLanes)
      return Status::bad_input(fmt::format("options.lanes: {} is not in 1..{}", o.lanes, kMaxLanes));
    o.max_profiles_per_round = j.value("max_profiles_per_round", 0);
    o.sandbox = j.value("sandbox", true);
    o.cuda_arch = j.value("cuda_arch", "90a");
  } catch (const nlohmann::json::exception& e) {
    return Status::bad_input(std::string("options: ") + e.what());
  }
  return o;
}

nlohmann::json RunState::to_json() const {
  return {{"version", version},
          {"options", options.to_json()},
          {"phase", phase_name(phase)},
          {"step", step_name(step)},
          {"plan_draft", plan_draft},
          {"round", round},
          {"candidate_commit", candidate_commit},
          {"lane_commits", lane_commits},
          {"incumbent",
           {{"id", incumbent_id},
            {"commit", incumbent_commit},
            {"speedup", incumbent_speedup},
            {"ci95", {incumbent_ci_low, incumbent_ci_high}}}},
          {"baseline_commit", baseline_commit},
          {"task_digest", task_digest},
          {"plan_digest", plan_digest},
          {"protected_files", protected_files},
          {"stalls", stalls},
          {"usage", usage_json(usage)},
          {"elapsed_s", elapsed_s},
          {"eval_s", eval_s},
          {"finalize_attempts", finalize_attempts},
          {"note", note},
          {"stop_reason", stop_reason},
          {"stopped_from", stopped_from},
          {"complaints", complaints},
          {"audit_head", audit_head},  // `kda audit verify <run>` reads this key
          {"audit_records", audit_records}};
}

Status RunState::move_to(Phase p, Step s) {
  const Position to{p, s};
  if (!may_move(at(), to)) return Status::internal("loop: no move from " + at().str() + " to " + to.str());
  phase = p;
  step = s;
  return {};
}

Result<RunState> RunState::from_json(const nlohmann::json& j) {
  RunState s;
  try {
    s.version = j.at("version").get<int>();
    if (s.version != 1) return Status::bad_input("state.json: unsupported version " + std::to_string(s.version));
    KDA_ASSIGN_OR_RETURN(s.options, LoopOptions::from_json(j.at("options")));
    const std::string phase = j.at("phase").get<std::string>(), step = j.at("step").get<std::string>();
    const auto at = Position::parse(phase + "/" + step);
    if (!at) return Status::bad_input("state.json: unknown phase/step '" + phase + "/" + step + "'");
    s.phase = at->phase;
    s.step = at->step;
    s.plan_draft = j.at("plan_draft").get<int>();
    s.round = j.at("round").get<int>();
    s.candidate_commit = j.at("candidate_commit").get<std::string>();
    s.lane_commits = j.value("lane_commits", std::vector<std::string>{});
    s.incumbent_id = j.at("incumbent").at("id").get<std::string>();
    s.incumbent_commit = j.at("incumbent").at("commit").get<std::string>();
    s.incumbent_speedup = j.at("incumbent").at("speedup").get<double>();
    if (const auto& inc = j.at("incumbent"); inc.contains("ci95")) {  // absent in states of older runs
      s.incumbent_ci_low = inc.at("ci95").at(0).get<double>();
      s.incumbent_ci_high = inc.at("ci95").at(1).get<double>();
    }
    s.baseline_commit = j.at("baseline_commit").get<std::string>();
    s.task_digest = j.at("task_digest").get<std::string>();
    s.plan_digest = j.at("plan_digest").get<std::string>();
    s.protected_files = j.at("protected_files").get<std::map<std::string, std::string>>();
    s.stalls = j.at("stalls").get<int>();
    s.usage = usage_from(j.at("usage"));
    s.elapsed_s = j.at("elapsed_s").get<double>();
    s.eval_s = j.at("eval_s").get<double>();
    s.finalize_attempts = j.value("finalize_attempts", 0);
    s.note = j.value("note", "");
    s.stop_reason = j.value("stop_reason", "");
    s.stopped_from = j.value("stopped_from", "");
    s.complaints = j.value("complaints", std::vector<std::string>{});
    s.audit_head = j.at("audit_head").get<std::string>();
    s.audit_records = j.at("audit_records").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    return Status::bad_input(std::string("state.json: ") + e.what());
  }
  return s;
}

void Ledger::upsert(Candidate c) {
  for (auto& x : candidates) {
    if (x.id == c.id) {
      x = std::move(c);
      return;
    }
  }
  candidates.push_back(std::move(c));
}

const Candidate* Ledger::find(const std::string& id) const {
  for (const auto& c : candidates)
    if (c.id == id) return &c;
  return nullptr;
}

nlohmann::json Ledger::to_json() const {
  nlohmann::json cs = nlohmann::json::array();
  for (const auto& c : candidates) {
    cs.push_back({{"id", c.id},
                  {"parent", c.parent},
                  {"round", c.round},
                  {"commit", c.commit},
                  {"solution_hash", c.solution_hash},
                  {"eval", c.eval},
                  {"verdicts", c.verdicts},
                  {"accepted", c.accepted},
                  {"notes", c.notes}});
  }
  return {{"incumbent", incumbent}, {"candidates", cs}};
}

Result<Ledger> Ledger::from_json(const nlohmann::json& j) {
  Ledger l;
  try {
    l.incumbent = j.at("incumbent").get<std::string>();
    for (const auto& c : j.at("candidates")) {
      Candidate x;
      x.id = c.at("id").get<std::string>();
      x.parent = c.at("parent").get<std::string>();
      x.round = c.at("round").get<int>();
      x.commit = c.at("commit").get<std::string>();
      x.solution_hash = c.value("solution_hash", "");
      x.eval = c.value("eval", nlohmann::json::object());
      x.verdicts = c.value("verdicts", nlohmann::json::object());
      x.accepted = c.at("accepted").get<bool>();
      x.notes = c.value("notes", "");
      l.candidates.push_back(std::move(x));
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::bad_input(std::string("ledger.json: ") + e.what());
  }
  return l;
}

namespace {
Result<nlohmann::json> read_json(const std::filesystem::path& file) {
  KDA_ASSIGN_OR_RETURN(std::string text, fs::read_file(file));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::bad_input(file.string() + ": not valid JSON");
  return j;
}
}  // namespace

Result<RunState> load_state(const std::filesystem::path& file) {
  KDA_ASSIGN_OR_RETURN(nlohmann::json j, read_json(file));
  auto s = RunState::from_json(j);
  if (!s.ok()) return s.status().with_context(file.string());
  return s;
}

Result<Ledger> load_ledger(const std::filesystem::path& file) {
  KDA_ASSIGN_OR_RETURN(nlohmann::json j, read_json(file));
  auto l = Ledger::from_json(j);
  if (!l.ok()) return l.status().with_context(file.string());
  return l;
}

Result<std::string> save_json(const std::filesystem::path& file, const nlohmann::json& j) {
  const std::string text = j.dump(2) + "\n";
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(file, text));
  return sha256_hex(text);
}

std::optional<std::string> exceeded_budget(const RunState& state, double elapsed_s) {
  const auto& o = state.options;
  if (o.hours > 0 && elapsed_s >= o.hours * 3600) return fmt::format("budget: wall time {:.2f} h used", o.hours);
  const int64_t tokens = state.usage.input_tokens + state.usage.output_tokens;
  if (o.budget_tokens > 0 && tokens >= o.budget_tokens)
    return fmt::format("budget: {} tokens used (limit {})", tokens, o.budget_tokens);
  if (o.budget_usd > 0 && state.usage.cost_usd >= o.budget_usd)
    return fmt::format("budget: ${:.2f} spent (limit ${:.2f})", state.usage.cost_usd, o.budget_usd);
  if (o.gpu_minutes > 0 && state.eval_s >= o.gpu_minutes * 60)
    return fmt::format("budget: {:.1f} evaluator minutes used (limit {:.1f})", state.eval_s / 60, o.gpu_minutes);
  return std::nullopt;
}

}  // namespace kda::loop
