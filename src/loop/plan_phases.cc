// The phases before the rounds (docs/run.md "States"): setup measures the starting solution, the
// writer drafts a plan, the reviewer approves or asks for a revision, and the plan is frozen with
// its criteria.
#include "loop/runner.h"
#include "util/strings.h"

namespace kda::loop::detail {

namespace {}  // namespace

Status Runner::setup_measure() {
  GitWorkspace ws = workspace();
  KDA_RETURN_IF_ERROR(ws.reset_to(state_.baseline_commit));
  KDA_ASSIGN_OR_RETURN(task::Solution s, task::load_solution(dir_ / "workspace"));
  KDA_ASSIGN_OR_RETURN(eval::EvalReport r, run_eval(s, "dev", std::nullopt, "starting solution"));
  KDA_RETURN_IF_ERROR(fs::ensure_dir(dir_ / "rounds" / "000"));
  std::string traces;
  for (const auto& w : r.workloads) traces += eval::trace_json(r, w, *pack_).dump() + "\n";
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(dir_ / "rounds/000/traces.jsonl", traces));
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(dir_ / "rounds/000/eval.json", eval::report_json(r, *pack_).dump(2)));
  if (!r.all_passed)
    return stop("the starting solution does not pass on the dev workloads:\n" + eval_table(eval_summary(r)));
  Candidate c;
  c.id = "c000";
  c.commit = state_.baseline_commit;
  c.solution_hash = task::solution_hash(s);
  c.eval = eval_summary(r);
  c.accepted = true;
  c.notes = "starting solution";
  ledger_.upsert(c);
  ledger_.incumbent = "c000";
  KDA_ASSIGN_OR_RETURN(state_.protected_files["ledger.json"], save_json(dir_ / "ledger.json", ledger_.to_json()));
  KDA_RETURN_IF_ERROR(protect("rounds/000/eval.json"));
  set_incumbent_score(r.score_geomean, r.geomean_ci);
  KDA_RETURN_IF_ERROR(state_.move_to(Phase::kPlan, Step::kDraft));
  state_.plan_draft = 1;
  KDA_RETURN_IF_ERROR(log("state", "kda", {{"event", "baseline measured"}, {"geomean", r.score_geomean}}));
  return save_state();
}

Status Runner::plan_draft() {
  const int k = state_.plan_draft;
  std::string prompt = fmt::format(
      "Plan phase, draft {}.\nTask: {} ({}). The sealed task pack is at {} (definition.json, workloads.jsonl, "
      "task.toml, reference/, baselines/). Your workspace ({}) holds the starting solution.\n\n"
      "Baseline measurement of the starting solution on the dev workloads (kda's evaluator):\n{}\n"
      "Machine acceptance criteria (checked by kda on all workloads with more trials): {}\n\n"
      "Write a plan: bottleneck hypotheses, ranked optimisation directions, risks, first steps. Write it to {} "
      "or give it as your final answer. Lines starting with 'CRITERION:' become reviewer-judged acceptance "
      "criteria.\n",
      k, pack_->definition.name, pack_->definition.description, (dir_ / "task").string(), (dir_ / "workspace").string(),
      eval_table(ledger_.find("c000")->eval), criteria_.to_json()["machine"].dump(),
      (dir_ / "scratch" / "plan.md").string());
  if (k > 1) {
    prompt += "\nThe reviewer asked for a revision of draft " + std::to_string(k - 1) + ":\n" +
              read_or_empty(dir_ / "plan" / fmt::format("review_{}.md", k - 1)) + "\n";
  }
  std::error_code ec;
  stdfs::remove(dir_ / "scratch" / "plan.md", ec);
  KDA_ASSIGN_OR_RETURN(agent::SessionResult r, session(agent::Role::kWriter, "plan", k, prompt));
  std::string text = read_or_empty(dir_ / "scratch" / "plan.md");
  if (util::trimmed(text).empty()) text = r.final_text;
  if (util::trimmed(text).empty()) {
    text = "(the writer gave no plan)";
    state_.complaints.push_back(fmt::format("plan draft {}: the writer gave no plan", k));
  }
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(dir_ / "plan" / fmt::format("draft_{}.md", k), text));
  KDA_RETURN_IF_ERROR(state_.move_to(Phase::kPlan, Step::kReview));
  return save_state();
}

Status Runner::plan_review() {
  const int k = state_.plan_draft;
  const std::string draft = read_or_empty(dir_ / "plan" / fmt::format("draft_{}.md", k));
  std::string prompt = fmt::format(
      "Plan review {} of at most {}. Challenge the writer's plan below: are the bottleneck hypotheses grounded in "
      "the baseline measurement, are the directions ranked sensibly, are risks named, are the first steps "
      "concrete? Machine criteria: {}.\n\nBaseline measurement:\n{}\n--- plan draft ---\n{}\n--- end ---\n"
      "End with exactly one line 'PLAN: APPROVE' or 'PLAN: REVISE' (with your requested changes above it).\n",
      k, state_.options.plan_reviews, criteria_.to_json()["machine"].dump(), eval_table(ledger_.find("c000")->eval),
      draft);
  KDA_ASSIGN_OR_RETURN(agent::SessionResult r, session(agent::Role::kReviewer, "plan_review", k, prompt));
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(dir_ / "plan" / fmt::format("review_{}.md", k), r.final_text));
  PlanVerdict v = parse_plan_verdict(r.final_text);
  if (!v.well_formed) {
    state_.complaints.push_back(fmt::format("plan review {}: {}", k, v.complaint));
    KDA_RETURN_IF_ERROR(log("complaint", "kda", {{"what", v.complaint}, {"plan_review", k}}));
  }
  KDA_RETURN_IF_ERROR(
      log("verdict", "reviewer", {{"plan_review", k}, {"approve", v.approve}, {"well_formed", v.well_formed}}));
  if (v.approve || k >= state_.options.plan_reviews) return freeze_plan();
  state_.plan_draft = k + 1;
  KDA_RETURN_IF_ERROR(state_.move_to(Phase::kPlan, Step::kDraft));
  return save_state();
}

Status Runner::freeze_plan() {
  const int k = state_.plan_draft;
  const std::string text = read_or_empty(dir_ / "plan" / fmt::format("draft_{}.md", k));
  Criteria c = criteria_;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = util::trimmed(text.substr(pos, end - pos));
    if (line.rfind("CRITERION:", 0) == 0) c.reviewer.push_back(util::trimmed(line.substr(10)));
    pos = end + 1;
  }
  c.reviewer.push_back(
      "The solution is a general kernel for the definition: no special-casing of the workloads, "
      "no caching of outputs across calls, no reliance on the harness's memory.");
  criteria_ = c;
  json plan = {{"draft", k}, {"plan", text}, {"criteria", c.to_json()}, {"baseline", ledger_.find("c000")->eval}};
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(dir_ / "plan" / "plan.json", plan.dump(2) + "\n"));
  std::string md = "# Frozen plan (draft " + std::to_string(k) + ")\n\n" + text + "\n\n## Acceptance criteria\n\n" +
                   fmt::format("- machine: every workload PASSED (all workloads, {} trials)\n", "more") +
                   fmt::format("- machine: geomean speedup vs the baseline >= {:.3f}x\n", c.min_geomean_speedup);
  for (const auto& r : c.regimes) md += "- machine: regime " + r.text() + "\n";
  for (const auto& r : c.reviewer) md += "- reviewer: " + r + "\n";
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(dir_ / "plan" / "plan.md", md));
  KDA_ASSIGN_OR_RETURN(task::Manifest pm, task::pack_manifest(dir_ / "plan"));
  state_.plan_digest = pm.digest();
  KDA_RETURN_IF_ERROR(log("state", "kda",
                          {{"event", "plan frozen"},
                           {"draft", k},
                           {"plan_digest", state_.plan_digest},
                           {"plan_json_sha256", sha256_hex(plan.dump(2) + "\n")}}));
  KDA_RETURN_IF_ERROR(state_.move_to(Phase::kRound, Step::kWriter));
  state_.round = 1;
  return save_state();
}

}  // namespace kda::loop::detail
