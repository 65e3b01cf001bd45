#include "loop/run_loop.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "agent/workspace_tools.h"
#include "audit/audit_log.h"
#include "eval/ncu_profile.h"
#include "loop/backend_factory.h"
#include "loop/criteria.h"
#include "loop/git_workspace.h"
#include "loop/kda_tools.h"
#include "loop/round_outcome.h"
#include "loop/knowledge_tools.h"
#include "loop/verdict.h"
#include "task/manifest.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kda::loop {

namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

constexpr const char* kWriterSystem =
    "You are the writer in kda, a system that improves a kernel (a FlashInfer-Bench solution) for speed while "
    "keeping it correct. Your workspace is a git repository holding the solution: solution.json and the source "
    "files it lists. Change only those files (you may add sources if solution.json lists them); put notes and "
    "experiments in the scratch directory. kda measures every claim itself on fresh secret inputs: claim only "
    "what the evaluate tool showed you. Special-casing the workloads, reading the harness's buffers, caching "
    "outputs across calls or touching files outside the workspace are violations that end your round.";
constexpr const char* kReviewerSystem =
    "You are the reviewer in kda. You judge a writer's round from the plan, the round contract, the writer's "
    "summary, the diff and kda's own measurements (which you trust over the writer's words). Be strict: progress "
    "counts only when kda measured it. End your answer with exactly these two lines and no other lines starting "
    "with those words:\nDECISION: CONTINUE|COMPLETE|STOP\nPROGRESS: ADVANCED|STALLED|REGRESSED";

json eval_summary(const eval::EvalReport& r) {
  json ws = json::array();
  for (const auto& w : r.workloads) {
    ws.push_back({{"uuid", w.uuid},
                  {"axes", w.axes},
                  {"verdict", std::string(eval::verdict_name(w.verdict))},
                  {"reason", w.reason},
                  {"latency_ms", w.latency_ms},
                  {"baseline_ms", w.baseline_ms},
                  {"speedup", w.speedup}});
  }
  return {{"all_passed", r.all_passed}, {"geomean", r.score_geomean}, {"mean", r.score_mean},
          {"seed", r.seed},             {"wall_s", r.wall_s},         {"workloads", ws}};
}

std::string eval_table(const json& summary) {
  std::string out = fmt::format("{:<38} {:<26} {:>12} {:>12} {:>9}\n", "workload", "verdict", "latency_ms",
                                "baseline_ms", "speedup");
  for (const auto& w : summary["workloads"]) {
    out += fmt::format("{:<38} {:<26} {:>12.5f} {:>12.5f} {:>8.3f}x", w["uuid"].get<std::string>(),
                       w["verdict"].get<std::string>(), w["latency_ms"].get<double>(), w["baseline_ms"].get<double>(),
                       w["speedup"].get<double>());
    if (!w["reason"].get<std::string>().empty()) out += "  " + w["reason"].get<std::string>();
    out += "\n";
  }
  out += fmt::format("all passed: {}; geomean speedup vs baseline {:.3f}x; mean {:.3f}x\n",
                     summary["all_passed"].get<bool>() ? "yes" : "NO", summary["geomean"].get<double>(),
                     summary["mean"].get<double>());
  return out;
}

// Writes a solution in directory form (solution.json without inline content, sources beside it).
Status write_solution_dir(const task::Solution& s, const stdfs::path& dir) {
  json j = s.to_json();
  for (auto& src : j["sources"]) src.erase("content");
  for (const auto& src : s.sources) {
    KDA_RETURN_IF_ERROR(fs::ensure_dir((dir / src.path).parent_path()));
    KDA_RETURN_IF_ERROR(fs::write_file_atomic(dir / src.path, src.content));
  }
  return fs::write_file_atomic(dir / "solution.json", j.dump(2) + "\n");
}

std::string trim_copy(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::string read_or_empty(const stdfs::path& p) {
  auto r = fs::read_file(p);
  return r.ok() ? *r : std::string();
}

std::string human_tokens(int64_t n) {
  if (n >= 1000000) return fmt::format("{:.1f}M", n / 1e6);
  if (n >= 1000) return fmt::format("{:.1f}k", n / 1e3);
  return std::to_string(n);
}

// What kda measured for a claim's metric (geomean_speedup, speedup of the geomean or of one
// workload, latency_ms of one workload); nullopt when the report has no such value.
std::optional<double> claim_measurement(const eval::EvalReport& r, const std::string& metric, const std::string& workload) {
  if (metric == "geomean_speedup" || (metric == "speedup" && workload.empty())) return r.score_geomean;
  for (const auto& w : r.workloads) {
    if (w.uuid != workload) continue;
    if (metric == "speedup") return w.speedup;
    if (metric == "latency_ms") return w.latency_ms;
  }
  return std::nullopt;
}

// An interval as verify.json and state.json write it: [low, high].
json interval_json(const eval::Interval& i) { return json::array({i.low, i.high}); }

// The values a claim may take and still be confirmed by one measurement: its 95 % interval over
// trials, widened to at least +-tolerance around the measured value.
struct ClaimRange {
  double measured = 0, low = 0, high = 0;
  std::optional<eval::Interval> ci;
};
ClaimRange claim_range(const eval::EvalReport& r, const std::string& metric, const std::string& workload, double tol) {
  ClaimRange out;
  out.measured = claim_measurement(r, metric, workload).value_or(0);
  if (workload.empty()) {
    out.ci = r.geomean_ci;
  } else {
    for (const auto& w : r.workloads) {
      if (w.uuid != workload) continue;
      if (metric == "speedup") out.ci = eval::geomean_speedup_ci({w.trial_ms}, {w.baseline_trial_ms}, out.measured);
      if (metric == "latency_ms") out.ci = eval::mean_ci95(w.trial_ms);
    }
  }
  out.low = std::min(out.measured * (1 - tol), out.ci ? out.ci->low : out.measured);
  out.high = std::max(out.measured * (1 + tol), out.ci ? out.ci->high : out.measured);
  return out;
}

class Runner {
 public:
  Runner(stdfs::path dir, LoopEnv env) : dir_(std::move(dir)), env_(std::move(env)) {
    if (!env_.evaluate) env_.evaluate = eval::evaluate;
    if (!env_.make_backend) env_.make_backend = make_backend;
    started_ = std::chrono::steady_clock::now();
  }
  ~Runner() {
    if (lock_fd_ >= 0) ::close(lock_fd_);
  }

  Status create(const LoopOptions& options);
  Status open_existing();
  Status extend(const BudgetChange& budgets);
  Result<RunOutcome> drive();

 private:
  // --- phases
  Status setup_measure();
  Status plan_draft();
  Status plan_review();
  Status freeze_plan();
  Status round_writer();
  Status round_verify();
  Status round_review();
  Status round_decide();
  Status finalize();
  Status stop(const std::string& reason);

  // --- helpers
  Status lock();
  Status load_runtime();
  Status save_state();
  Status log(const std::string& type, const std::string& actor, const json& data);
  void status_line(const std::string& what);
  std::optional<std::string> budget_exceeded() const;
  Result<std::unique_ptr<agent::Backend>>& backend_for(agent::Role role);
  Result<agent::SessionResult> session(agent::Role role, const std::string& phase, int index, std::string prompt);
  eval::EvalOptions eval_options(const std::string& workloads, std::optional<int> trials) const;
  Result<eval::EvalReport> run_eval(const task::Solution& s, const std::string& workloads, std::optional<int> trials,
                                    const std::string& why, const task::Solution* baseline = nullptr);
  Result<agent::ToolOutcome> tool_evaluate();
  Result<ProfileTaken> tool_profile(const ProfileRequest& req);
  json round_profiles() const;
  Result<std::vector<std::string>> protected_problems();
  Status protect(const std::string& rel);
  Status write_final_solution(const task::Solution& s);
  std::optional<std::string> futile_completion(bool accepted) const;
  Status export_final(const std::optional<eval::EvalReport>& final_report);
  std::string round_dir_rel() const { return "rounds/" + round_name(state_.round); }
  stdfs::path round_dir() const { return dir_ / round_dir_rel(); }
  GitWorkspace workspace() const { return GitWorkspace(dir_ / "workspace", dir_ / "git"); }
  std::string contract_text() const;
  std::string previous_round_block() const;
  void set_incumbent_score(double geomean, const std::optional<eval::Interval>& ci) {
    state_.incumbent_speedup = geomean;
    state_.incumbent_ci_low = ci ? ci->low : 0;
    state_.incumbent_ci_high = ci ? ci->high : 0;
  }
  RoundExplanation explain_round(int round) const { return loop::explain_round(dir_, round, ledger_); }
  json rounds_json() const { return round_table(dir_, state_.round, ledger_); }
  std::string plan_text() const { return read_or_empty(dir_ / "plan" / "plan.md"); }
  RunOutcome outcome() const;

  stdfs::path dir_;
  LoopEnv env_;
  RunState state_;
  Ledger ledger_;
  std::optional<audit::AuditLog> audit_;
  std::optional<task::TaskPack> pack_;
  std::optional<task::Manifest> manifest_;
  Criteria criteria_;
  std::optional<Result<std::unique_ptr<agent::Backend>>> writer_, reviewer_;
  std::unique_ptr<KdaToolHost> tools_;
  std::string state_sha_;  // sha256 of the state.json we last wrote
  std::chrono::steady_clock::time_point started_;
  double elapsed_base_ = 0;
  int lock_fd_ = -1;
  std::string session_audit_error_;
};

// ---------------------------------------------------------------------------------------------
// Setup and persistence

Status Runner::lock() {
  lock_fd_ = ::open((dir_ / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) return Status::io("opening " + (dir_ / ".lock").string());
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0)
    return Status::bad_input(dir_.string() + ": another kda run is driving this run directory");
  return {};
}

Status Runner::create(const LoopOptions& options) {
  std::error_code ec;
  if (stdfs::exists(dir_, ec) && !stdfs::is_empty(dir_, ec))
    return Status::bad_input("--run-dir " + dir_.string() + ": exists and is not empty (use --resume to continue a run)");
  // Validate everything cheap before creating anything.
  auto source_pack = task::load_task_pack(options.task);
  if (!source_pack.ok()) return source_pack.status();
  KDA_ASSIGN_OR_RETURN(criteria_, parse_target(options.target));
  for (const auto* spec : {&options.writer, &options.reviewer}) {
    auto b = env_.make_backend(*spec);
    if (!b.ok()) return b.status();
  }
  task::Solution start;
  if (!options.start.empty()) {
    KDA_ASSIGN_OR_RETURN(start, task::load_solution(options.start));
  } else if (const auto* b = source_pack->baseline()) {
    start = *b;
  } else {
    return Status::bad_input(options.task.string() + ": the pack has no baseline; pass --start <solution>");
  }

  for (const char* sub : {"task", "workspace", "scratch", "plan", "rounds", "final"})
    KDA_RETURN_IF_ERROR(fs::ensure_dir(dir_ / sub));
  dir_ = stdfs::canonical(dir_, ec);
  if (ec) return Status::io("resolving the run directory: " + ec.message());
  KDA_RETURN_IF_ERROR(lock());

  // The sealed copy of the pack: the run evaluates this copy, against its manifest.
  stdfs::copy(options.task, dir_ / "task", stdfs::copy_options::recursive, ec);
  if (ec) return Status::io("copying the task pack: " + ec.message());
  // The hidden holdout workloads stay out of the run: the loop evaluates dev and all workloads
  // only, and what is not in the run directory no agent can read through kda's tools.
  stdfs::remove(dir_ / "task" / "holdout.jsonl", ec);
  KDA_ASSIGN_OR_RETURN(task::Manifest m, task::pack_manifest(dir_ / "task"));
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(dir_ / "task.manifest.json", m.to_json().dump(2) + "\n"));

  GitWorkspace ws = workspace();
  KDA_RETURN_IF_ERROR(ws.init());
  KDA_RETURN_IF_ERROR(write_solution_dir(start, dir_ / "workspace"));
  KDA_ASSIGN_OR_RETURN(std::string commit, ws.commit_all("c000: starting solution"));

  state_.options = options;
  state_.options.task = stdfs::absolute(options.task);
  state_.phase = "setup";
  state_.step = "measure";
  state_.task_digest = m.digest();
  state_.baseline_commit = commit;
  state_.incumbent_commit = commit;
  state_.incumbent_id = "c000";
  KDA_RETURN_IF_ERROR(load_runtime());
  KDA_RETURN_IF_ERROR(log("state", "kda", {{"event", "created"}, {"options", state_.options.to_json()},
                                           {"task_digest", state_.task_digest}, {"start_commit", commit}}));
  KDA_ASSIGN_OR_RETURN(std::string lsha, save_json(dir_ / "ledger.json", ledger_.to_json()));
  state_.protected_files["ledger.json"] = lsha;
  return save_state();
}

Status Runner::open_existing() {
  std::error_code ec;
  dir_ = stdfs::canonical(dir_, ec);
  if (ec) return Status::not_found("--resume: no run directory " + dir_.string());
  if (!stdfs::exists(dir_ / "state.json"))
    return Status::not_found("--resume " + dir_.string() + ": no state.json (not a run directory, or setup never finished)");
  KDA_RETURN_IF_ERROR(lock());
  KDA_ASSIGN_OR_RETURN(state_, load_state(dir_ / "state.json"));
  state_sha_ = sha256_hex(read_or_empty(dir_ / "state.json"));
  KDA_ASSIGN_OR_RETURN(ledger_, load_ledger(dir_ / "ledger.json"));
  elapsed_base_ = state_.elapsed_s;
  workspace().recover();
  // The log must verify and still contain the head the state recorded (records after it are fine:
  // they were appended before the kill, and a torn last line is an append the kill cut short).
  // Checked before anything is appended: an edited, deleted or reordered record breaks the chain,
  // which then cannot be extended, so the altered log is kept beside the run as evidence and a new
  // chain begins with the violation, the run stopped and its last verified incumbent exported.
  const stdfs::path log_path = dir_ / "audit.jsonl";
  std::string altered;
  json evidence = json::object();
  if (state_.phase != "done" && state_.phase != "stopped") {
    auto v = audit::verify(log_path, state_.audit_head);
    if (!v.ok() && v.status().kind() != ErrorKind::kNotFound) return v.status();
    if (!v.ok()) altered = "the log is missing; ";
    else
      for (size_t i = 0; i < v->problems.size(); ++i)
        if (!(v->torn_tail && i + 1 == v->problems.size() && v->problems[i].message.starts_with("torn last line")))
          altered += fmt::format("line {}: {}; ", v->problems[i].line, v->problems[i].message);
    if (!altered.empty() && stdfs::exists(log_path)) {
      stdfs::path kept = dir_ / "audit.altered.jsonl";
      for (int n = 2; stdfs::exists(kept); ++n) kept = dir_ / fmt::format("audit.altered.{}.jsonl", n);
      evidence = {{"kept_as", kept.filename().string()}, {"sha256", sha256_hex(read_or_empty(log_path))}};
      std::error_code ec;
      stdfs::rename(log_path, kept, ec);
      if (ec) return Status::io("keeping the altered audit log as " + kept.string() + ": " + ec.message());
    }
  }
  KDA_RETURN_IF_ERROR(load_runtime());
  KDA_RETURN_IF_ERROR(log("state", "kda", {{"event", "resumed"}, {"phase", state_.phase}, {"step", state_.step},
                                           {"round", state_.round}}));
  if (!altered.empty()) {
    evidence["what"] = "audit log";
    evidence["problems"] = altered;
    KDA_RETURN_IF_ERROR(log("violation", "kda", evidence));
    return stop("integrity violation: the audit log was altered (" + altered + ")");
  }
  return {};
}

Status Runner::load_runtime() {
  auto a = audit::AuditLog::open(dir_ / "audit.jsonl");
  if (!a.ok()) return a.status().with_context("audit log");
  audit_.emplace(std::move(*a));
  auto text = fs::read_file(dir_ / "task.manifest.json");
  if (!text.ok()) return text.status();
  auto mj = json::parse(*text, nullptr, false);
  auto m = task::Manifest::from_json(mj);
  if (!m.ok()) return m.status().with_context("task.manifest.json");
  manifest_ = *m;
  auto pack = task::load_task_pack(dir_ / "task");
  if (!pack.ok()) return pack.status().with_context("the run's sealed task");
  pack_ = std::move(*pack);
  if (!state_.plan_digest.empty()) {
    auto pj = json::parse(read_or_empty(dir_ / "plan" / "plan.json"), nullptr, false);
    auto c = Criteria::from_json(pj.is_object() && pj.contains("criteria") ? pj["criteria"] : json());
    if (c.ok()) criteria_ = *c;  // a tampered plan is caught by the plan digest in verify
  } else {
    KDA_ASSIGN_OR_RETURN(criteria_, parse_target(state_.options.target));
  }
  tools_ = std::make_unique<KdaToolHost>(KdaToolHost::Hooks{
      .evaluate = [this] { return tool_evaluate(); },
      .ledger = [this] { return ledger_.to_json(); },
      .profile = state_.options.max_profiles_per_round > 0
                     ? std::function<Result<ProfileTaken>(const ProfileRequest&)>(
                           [this](const ProfileRequest& req) { return tool_profile(req); })
                     : nullptr,
      .ncu = env_.ncu,
      .max_profiles_per_round = state_.options.max_profiles_per_round,
  });
  return {};
}

Status Runner::save_state() {
  state_.elapsed_s =
      elapsed_base_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  if (audit_) {
    state_.audit_head = audit_->last_hash();
    state_.audit_records = audit_->size();
  }
  KDA_ASSIGN_OR_RETURN(state_sha_, save_json(dir_ / "state.json", state_.to_json()));
  return {};
}

Status Runner::log(const std::string& type, const std::string& actor, const json& data) {
  if (!audit_) return Status::internal("audit log not open");
  return audit_->append(type, actor, data);
}

void Runner::status_line(const std::string& what) {
  if (!env_.status) return;
  const double elapsed =
      elapsed_base_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  const int64_t tokens = state_.usage.input_tokens + state_.usage.output_tokens;
  const int max_rounds = state_.options.max_rounds;
  std::string where = state_.phase == "round" ? (state_.round > max_rounds ? fmt::format("rounds {}/{} done", max_rounds, max_rounds)
                                                                           : fmt::format("round {}/{} {}", state_.round, max_rounds,
                                                                                         state_.step))
                                              : state_.phase + (state_.step.empty() ? "" : " " + state_.step);
  env_.status(fmt::format("kda run: {} | {} | incumbent {} {:.3f}x | tokens {} ${:.2f} | eval {:.1f} min | {:.0f}s",
                          where, what, state_.incumbent_id, state_.incumbent_speedup, human_tokens(tokens),
                          state_.usage.cost_usd, state_.eval_s / 60.0, elapsed));
}

std::optional<std::string> Runner::budget_exceeded() const {
  const auto& o = state_.options;
  const double elapsed =
      elapsed_base_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  if (o.hours > 0 && elapsed >= o.hours * 3600) return fmt::format("budget: wall time {:.2f} h used", o.hours);
  const int64_t tokens = state_.usage.input_tokens + state_.usage.output_tokens;
  if (o.budget_tokens > 0 && tokens >= o.budget_tokens)
    return fmt::format("budget: {} tokens used (limit {})", tokens, o.budget_tokens);
  if (o.budget_usd > 0 && state_.usage.cost_usd >= o.budget_usd)
    return fmt::format("budget: ${:.2f} spent (limit ${:.2f})", state_.usage.cost_usd, o.budget_usd);
  if (o.gpu_minutes > 0 && state_.eval_s >= o.gpu_minutes * 60)
    return fmt::format("budget: {:.1f} evaluator minutes used (limit {:.1f})", state_.eval_s / 60, o.gpu_minutes);
  return std::nullopt;
}

Status Runner::protect(const std::string& rel) {
  KDA_ASSIGN_OR_RETURN(std::string h, sha256_file_hex(dir_ / rel));
  state_.protected_files[rel] = h;
  return {};
}

// Files only kda writes: the sealed task, the frozen plan, state.json, the audit log, verdict
// files and the ledger. Anything changed behind kda's back is a violation.
Result<std::vector<std::string>> Runner::protected_problems() {
  std::vector<std::string> problems;
  KDA_ASSIGN_OR_RETURN(task::Manifest tm, task::pack_manifest(dir_ / "task"));
  if (tm.digest() != state_.task_digest)
    problems.push_back("task/ changed: " + describe(task::manifest_diff(*manifest_, tm)));
  if (!state_.plan_digest.empty()) {
    KDA_ASSIGN_OR_RETURN(task::Manifest pm, task::pack_manifest(dir_ / "plan"));
    if (pm.digest() != state_.plan_digest) problems.push_back("plan/ changed after it was frozen (plan hash violation)");
  }
  if (sha256_hex(read_or_empty(dir_ / "state.json")) != state_sha_) problems.push_back("state.json changed");
  for (const auto& [rel, hash] : state_.protected_files) {
    auto h = sha256_file_hex(dir_ / rel);
    if (!h.ok() || *h != hash) problems.push_back(rel + " changed or removed");
  }
  auto v = audit::verify(dir_ / "audit.jsonl", audit_->last_hash());
  if (!v.ok()) {
    problems.push_back("audit log unreadable: " + v.status().message());
  } else if (!v->ok() || v->head != audit_->last_hash()) {
    problems.push_back("audit log altered");
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// Sessions and evaluations

Result<std::unique_ptr<agent::Backend>>& Runner::backend_for(agent::Role role) {
  auto& slot = role == agent::Role::kWriter ? writer_ : reviewer_;
  if (!slot) slot.emplace(env_.make_backend(role == agent::Role::kWriter ? state_.options.writer : state_.options.reviewer));
  return *slot;
}

Result<agent::SessionResult> Runner::session(agent::Role role, const std::string& phase, int index, std::string prompt) {
  auto& backend = backend_for(role);
  if (!backend.ok()) return backend.status();
  agent::SessionRequest req;
  req.role = role;
  req.phase = phase;
  req.index = index;
  req.system_prompt = role == agent::Role::kWriter ? kWriterSystem : kReviewerSystem;
  req.prompt = std::move(prompt);
  req.workspace = dir_ / "workspace";
  if (role == agent::Role::kWriter) req.writable = {dir_ / "workspace", dir_ / "scratch"};
  req.readable = {dir_ / "task", dir_ / "plan", dir_ / "rounds", dir_ / "ledger.json", dir_ / "scratch"};
  // Every prompt names where its evidence is: the file tools take these absolute paths as given.
  req.prompt += fmt::format(
      "\n--- paths you can read (absolute; list_files, read_file and grep take them as given) ---\n"
      "task (definition.json, workloads.jsonl, reference/, baselines/): {}\nplan: {}\n"
      "rounds (rounds/NNN: contract.md, diff.patch, verify.json, eval.json, traces.jsonl, review.md, verdict.json, "
      "profiles/): {}\nledger: {}\nscratch: {}\nworkspace (the solution): {}\n",
      (dir_ / "task").string(), (dir_ / "plan").string(), (dir_ / "rounds").string(), (dir_ / "ledger.json").string(),
      (dir_ / "scratch").string(), (dir_ / "workspace").string());
  if (phase == "round" || phase == "review" || phase == "alignment")
    req.prompt += "this round: " + round_dir().string() + "\n";
  if (role == agent::Role::kWriter)
    req.prompt += "you may write: " + (dir_ / "workspace").string() + " and " + (dir_ / "scratch").string() + "\n";
  const std::string actor = agent::role_name(role);
  session_audit_error_.clear();
  req.on_event = [this, actor](const agent::AgentEvent& e) {
    Status st = log("agent_event", actor, {{"kind", e.kind}, {"ok", e.ok}, {"detail", e.detail}});
    if (!st.ok() && session_audit_error_.empty()) session_audit_error_ = st.message();
  };
  // The session's tools: workspace file tools (read-only for the reviewer; kda's own files are
  // protected even if a writable root ever contained them) in front of kda's tools.
  agent::WorkspaceTools files({.workspace = req.workspace,
                               .writable = req.writable,
                               .readable = req.readable,
                               .protected_paths = {dir_ / "task", dir_ / "plan", dir_ / "git", dir_ / "rounds",
                                                   dir_ / "final", dir_ / "state.json", dir_ / "audit.jsonl",
                                                   dir_ / "ledger.json", dir_ / "task.manifest.json"},
                               .read_only = role != agent::Role::kWriter,
                               .on_event = req.on_event});
  KnowledgeTools knowledge({.roots = {req.workspace, dir_}});  // wiki_search/show, ncu_analyze/diff (read-only)
  agent::CompositeToolHost all_tools;
  all_tools.add(&files);
  all_tools.add(tools_.get());
  all_tools.add(&knowledge);
  req.tools = &all_tools;
  KDA_RETURN_IF_ERROR(log("session", "kda", {{"event", "start"}, {"role", actor}, {"phase", phase}, {"index", index},
                                             {"backend", (*backend)->name()}, {"prompt_sha256", sha256_hex(req.prompt)}}));
  status_line(fmt::format("{} session ({})", actor, phase));
  auto r = (*backend)->run_session(req);
  if (!r.ok()) {
    (void)log("session", "kda", {{"event", "error"}, {"role", actor}, {"phase", phase}, {"error", r.status().message()}});
    return r.status().with_context(std::string(actor) + " backend");
  }
  if (!session_audit_error_.empty()) return Status::io("audit log: " + session_audit_error_);
  state_.usage += r->usage;
  KDA_RETURN_IF_ERROR(log("session", "kda",
                          {{"event", "end"}, {"role", actor}, {"phase", phase}, {"index", index}, {"turns", r->turns},
                           {"timed_out", r->timed_out}, {"input_tokens", r->usage.input_tokens},
                           {"output_tokens", r->usage.output_tokens}, {"cost_usd", r->usage.cost_usd},
                           {"final_text_sha256", sha256_hex(r->final_text)}}));
  return r;
}

eval::EvalOptions Runner::eval_options(const std::string& workloads, std::optional<int> trials) const {
  eval::EvalOptions o;
  o.runner_binary = env_.runner_binary;
  o.workloads = workloads;
  o.trials = trials ? trials : state_.options.eval_trials;
  o.iterations = state_.options.eval_iterations;
  o.warmup = state_.options.eval_warmup;
  o.sealed = manifest_;
  o.sandbox = state_.options.sandbox;
  o.cuda_arch = state_.options.cuda_arch;
  return o;
}

Result<eval::EvalReport> Runner::run_eval(const task::Solution& s, const std::string& workloads,
                                          std::optional<int> trials, const std::string& why,
                                          const task::Solution* baseline) {
  status_line("evaluating (" + why + ", " + workloads + ")");
  const auto t0 = std::chrono::steady_clock::now();
  eval::EvalOptions o = eval_options(workloads, trials);
  if (baseline != nullptr) o.baseline = *baseline;  // timed head-to-head in the baseline's place
  auto r = env_.evaluate(*pack_, s, o);
  state_.eval_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r.ok()) {
    (void)log("evaluation", "verifier", {{"why", why}, {"error", r.status().message()}});
    return r.status().with_context("evaluator");
  }
  KDA_RETURN_IF_ERROR(log("evaluation", "verifier",
                          {{"why", why}, {"workloads", workloads}, {"solution_hash", task::solution_hash(s)},
                           {"summary", eval_summary(*r)}}));
  return r;
}

Result<agent::ToolOutcome> Runner::tool_evaluate() {
  auto s = task::load_solution(dir_ / "workspace");
  if (!s.ok()) return agent::ToolOutcome{"the workspace solution does not load: " + s.status().message(), true, {}};
  KDA_ASSIGN_OR_RETURN(eval::EvalReport r, run_eval(*s, "dev", std::nullopt, "writer evaluate tool"));
  json summary = eval_summary(r);
  return agent::ToolOutcome{eval_table(summary), false, summary};
}

// The writer's `profile` tool: the workspace's solution on one workload under ncu, the report in
// rounds/NNN/profiles/<uuid8>[-<k>].ncu-rep with a record beside it (.json), one audit record.
// Counts as evaluator time for --gpu-minutes.
Result<ProfileTaken> Runner::tool_profile(const ProfileRequest& req) {
  auto s = task::load_solution(dir_ / "workspace");
  if (!s.ok()) return Status::bad_input("the workspace solution does not load: " + s.status().message());
  const std::string uuid = !req.workload.empty() ? req.workload : pack_->dev_uuids.empty() ? "" : pack_->dev_uuids.front();
  if (std::none_of(pack_->workloads.begin(), pack_->workloads.end(), [&](const task::Workload& w) { return w.uuid == uuid; }))
    return Status::not_found("workload '" + uuid + "' is not in the task's workloads.jsonl");
  const std::string rel_dir = round_dir_rel() + "/profiles";
  std::string stem = uuid.substr(0, 8);
  std::error_code ec;
  if (stdfs::exists(dir_ / rel_dir / (stem + ".ncu-rep"), ec) || stdfs::exists(dir_ / rel_dir / (stem + ".json"), ec))
    stem += "-" + std::to_string(req.index);  // the same workload again: keep both, for ncu_diff
  const std::string rel = rel_dir + "/" + stem + ".ncu-rep";

  eval::NcuProfileOptions o;
  o.ncu = req.ncu;
  o.report = dir_ / rel;
  o.workload = uuid;
  o.runner_binary = env_.runner_binary;
  o.seed = static_cast<uint64_t>(state_.round) * 100 + static_cast<uint64_t>(req.index);
  o.cuda_arch = state_.options.cuda_arch;
  status_line("profiling (writer profile tool, " + stem + ")");
  const auto t0 = std::chrono::steady_clock::now();
  auto r = eval::run_ncu_profile(*pack_, *s, o);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  state_.eval_s += wall;
  const Status st = r.ok() ? r->status : r.status();
  json record = {{"round", state_.round}, {"index", req.index}, {"workload", uuid},
                 {"solution_hash", task::solution_hash(*s)}, {"report", st.ok() ? json(rel) : json(nullptr)},
                 {"ok", st.ok()}, {"wall_s", wall}};
  if (!st.ok()) record["error"] = st.message();
  KDA_RETURN_IF_ERROR(log("profile", "verifier", record));
  KDA_RETURN_IF_ERROR(fs::ensure_dir(dir_ / rel_dir));
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(dir_ / rel_dir / (stem + ".json"), record.dump(2)));
  if (!st.ok()) return st;
  return ProfileTaken{uuid, r->report, r->report.string()};
}

// The round's profile records (profiles/*.json), in the order they were taken.
json Runner::round_profiles() const {
  std::vector<json> v;
  std::error_code ec;
  for (const auto& e : stdfs::directory_iterator(round_dir() / "profiles", ec)) {
    if (e.path().extension() != ".json") continue;
    json j = json::parse(read_or_empty(e.path()), nullptr, false);
    if (j.is_object()) v.push_back(j);
  }
  std::sort(v.begin(), v.end(), [](const json& a, const json& b) { return a.value("index", 0) < b.value("index", 0); });
  return json(v);
}

// ---------------------------------------------------------------------------------------------
// Phases

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
  if (!r.all_passed) return stop("the starting solution does not pass on the dev workloads:\n" + eval_table(eval_summary(r)));
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
  state_.phase = "plan";
  state_.step = "draft";
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
  if (trim_copy(text).empty()) text = r.final_text;
  if (trim_copy(text).empty()) {
    text = "(the writer gave no plan)";
    state_.complaints.push_back(fmt::format("plan draft {}: the writer gave no plan", k));
  }
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(dir_ / "plan" / fmt::format("draft_{}.md", k), text));
  state_.step = "review";
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
  KDA_RETURN_IF_ERROR(log("verdict", "reviewer", {{"plan_review", k}, {"approve", v.approve}, {"well_formed", v.well_formed}}));
  if (v.approve || k >= state_.options.plan_reviews) return freeze_plan();
  state_.plan_draft = k + 1;
  state_.step = "draft";
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
    std::string line = trim_copy(text.substr(pos, end - pos));
    if (line.rfind("CRITERION:", 0) == 0) c.reviewer.push_back(trim_copy(line.substr(10)));
    pos = end + 1;
  }
  c.reviewer.push_back("The solution is a general kernel for the definition: no special-casing of the workloads, "
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
  KDA_RETURN_IF_ERROR(log("state", "kda", {{"event", "plan frozen"}, {"draft", k}, {"plan_digest", state_.plan_digest},
                                           {"plan_json_sha256", sha256_hex(plan.dump(2) + "\n")}}));
  state_.phase = "round";
  state_.step = "writer";
  state_.round = 1;
  return save_state();
}


std::string Runner::previous_round_block() const {
  if (state_.round <= 1) return {};
  const RoundExplanation e = explain_round(state_.round - 1);
  if (!e.measured) return {};
  return fmt::format("\n## Previous round\nPREVIOUS_ROUND: {}\nOUTCOME: {}\nREASON: {}\nDETAIL: {}\nEVIDENCE: {}\n",
                     state_.round - 1, e.accepted ? "accepted" : "rejected", e.outcome.code,
                     e.outcome.what + std::string("; ") + e.detail,
                     (dir_ / "rounds" / round_name(state_.round - 1) / "verify.json").string());
}

std::string Runner::contract_text() const {
  const Candidate* inc = ledger_.find(state_.incumbent_id);
  std::string s = fmt::format(
      "# Round {} contract\n\nMainline objective: improve the geomean speedup of the incumbent {} ({:.3f}x vs the "
      "baseline) on the dev workloads, keeping every workload PASSED, following the frozen plan's next direction.\n\n"
      "Evidence required: call the `evaluate` tool on your final version, then `finish_round` with a summary and "
      "claims that match what evaluate showed (kda re-measures on fresh seeds; a claim off by more than {:.0f}% "
      "rejects the round). Change only the solution files in the workspace.\n",
      state_.round, state_.incumbent_id, state_.incumbent_speedup, state_.options.claim_tolerance * 100);
  if (inc != nullptr && inc->eval.contains("workloads")) s += "\nIncumbent measurement:\n" + eval_table(inc->eval);
  s += previous_round_block();
  if (state_.stalls >= 2)
    s += "\nREPLAN: the last " + std::to_string(state_.stalls) +
         " rounds stalled. Step back: re-read the plan, pick a different ranked direction, and say why the previous "
            "attempts failed. One more stalled round stops the run.\n";
  if (!state_.note.empty()) s += "\nNote from kda: " + state_.note + "\n";
  return s;
}

Status Runner::round_writer() {
  const std::string rel = round_dir_rel();
  // A restarted round starts clean from the incumbent: no half-written artifacts, no stale edits.
  for (auto it = state_.protected_files.begin(); it != state_.protected_files.end();)
    it = it->first.rfind(rel + "/", 0) == 0 ? state_.protected_files.erase(it) : std::next(it);
  std::error_code ec;
  stdfs::remove_all(round_dir(), ec);
  KDA_RETURN_IF_ERROR(fs::ensure_dir(round_dir()));
  GitWorkspace ws = workspace();
  KDA_RETURN_IF_ERROR(ws.reset_to(state_.incumbent_commit));
  const std::string contract = contract_text();
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(round_dir() / "contract.md", contract));
  KDA_RETURN_IF_ERROR(log("state", "kda", {{"event", "round started"}, {"round", state_.round},
                                           {"incumbent", state_.incumbent_id}, {"contract_sha256", sha256_hex(contract)}}));
  std::string prompt = contract + "\nThe frozen plan:\n" + plan_text() +
                       "\nYour workspace: " + (dir_ / "workspace").string() + "; scratch: " + (dir_ / "scratch").string() +
                       "; earlier rounds' evidence: " + (dir_ / "rounds").string() + ".\n";
  tools_->begin_round(state_.options.max_evals_per_round);
  auto r = session(agent::Role::kWriter, "round", state_.round, prompt);
  tools_->end_round();
  if (!r.ok()) return r.status();
  json writer = {{"final_text", r->final_text}, {"turns", r->turns}, {"timed_out", r->timed_out},
                 {"events", r->events.size()}};
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(round_dir() / "writer.json", writer.dump(2)));
  if (tools_->finished())
    KDA_RETURN_IF_ERROR(fs::write_file_atomic(round_dir() / "finish.json", tools_->finished()->to_json().dump(2)));
  KDA_ASSIGN_OR_RETURN(state_.candidate_commit, ws.commit_all(candidate_id(state_.round) + ": round " +
                                                              std::to_string(state_.round) + " candidate"));
  KDA_RETURN_IF_ERROR(log("state", "kda", {{"event", "writer done"}, {"round", state_.round},
                                           {"candidate_commit", state_.candidate_commit},
                                           {"finished", tools_->finished().has_value()}}));
  state_.step = "verify";
  return save_state();
}

Status Runner::round_verify() {
  GitWorkspace ws = workspace();
  json checks = json::array();
  std::vector<std::string> rejections;
  auto check = [&](const std::string& name, bool passed, const std::string& detail) {
    checks.push_back({{"name", name}, {"passed", passed}, {"detail", detail}});
    if (!passed) rejections.push_back(name + ": " + detail);
  };

  // 1. Protected files: an integrity violation stops the run (the agent escaped its sandbox).
  KDA_ASSIGN_OR_RETURN(std::vector<std::string> tampered, protected_problems());
  if (!tampered.empty()) {
    std::string what;
    for (const auto& t : tampered) what += (what.empty() ? "" : "; ") + t;
    check("protected_files", false, what);
    json verify = {{"checks", checks}, {"verified", false}, {"violation", what}};
    KDA_RETURN_IF_ERROR(fs::write_file_atomic(round_dir() / "verify.json", verify.dump(2)));
    KDA_RETURN_IF_ERROR(log("violation", "verifier", {{"round", state_.round}, {"what", what}}));
    KDA_RETURN_IF_ERROR(ws.reset_to(state_.incumbent_commit));
    return stop("integrity violation in round " + std::to_string(state_.round) + ": " + what);
  }
  check("protected_files", true, "task/, plan/, state.json, audit log, verdicts and ledger unchanged");
  KDA_RETURN_IF_ERROR(ws.reset_to(state_.candidate_commit));

  // 2. The round's own evidence.
  std::optional<FinishRound> finish;
  if (auto t = fs::read_file(round_dir() / "finish.json"); t.ok())
    finish = FinishRound::from_json(json::parse(*t, nullptr, false));
  check("finish_round", finish.has_value(), finish ? "called" : "the writer did not call finish_round");

  // 3. Diff scope: only the solution's files.
  KDA_ASSIGN_OR_RETURN(std::vector<std::string> changed, ws.changed_paths(state_.incumbent_commit, state_.candidate_commit));
  KDA_ASSIGN_OR_RETURN(std::string diff, ws.diff(state_.incumbent_commit, state_.candidate_commit));
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(round_dir() / "diff.patch", diff));
  auto solution = task::load_solution(dir_ / "workspace");
  check("solution_loads", solution.ok(), solution.ok() ? "solution.json loads" : solution.status().message());
  if (solution.ok())
    check("definition", solution->definition == pack_->definition.name,
          "solution.definition is '" + solution->definition + "'");
  std::vector<std::string> out_of_scope;
  for (const auto& p : changed) {
    bool ok = p == "solution.json" || (solution.ok() && solution->source(p) != nullptr);
    if (!ok) out_of_scope.push_back(p);
  }
  std::string scope_detail = fmt::format("{} file(s) changed", changed.size());
  if (!out_of_scope.empty()) {
    scope_detail = "changed files outside the solution:";
    for (const auto& p : out_of_scope) scope_detail += " " + p;
  }
  check("diff_scope", out_of_scope.empty(), scope_detail);

  // 4. The official evaluation, fresh seeds, dev set.
  json summary;
  std::optional<eval::EvalReport> report;
  if (solution.ok()) {
    KDA_ASSIGN_OR_RETURN(report, run_eval(*solution, "dev", std::nullopt, "round " + std::to_string(state_.round)));
    summary = eval_summary(*report);
    std::string traces;
    for (const auto& w : report->workloads) traces += eval::trace_json(*report, w, *pack_).dump() + "\n";
    KDA_RETURN_IF_ERROR(fs::write_file_atomic(round_dir() / "traces.jsonl", traces));
    KDA_RETURN_IF_ERROR(fs::write_file_atomic(round_dir() / "eval.json", eval::report_json(*report, *pack_).dump(2)));
    size_t passed = 0;
    for (const auto& w : report->workloads) passed += w.verdict == eval::Verdict::kPassed;
    check("all_passed", report->all_passed, fmt::format("{}/{} PASSED", passed, report->workloads.size()));
  }

  // 5. Claims against the measurement.
  json claims = json::array();
  std::optional<eval::EvalReport> second;  // a re-measurement, taken only for a claim that looks false
  if (finish && report) {
    for (const auto& c : finish->claims) {
      std::optional<double> measured = claim_measurement(*report, c.metric, c.workload);
      json cj = {{"metric", c.metric}, {"claimed", c.value}, {"workload", c.workload}};
      // A claim kda cannot check because it names what finish_round's schema does not offer (a
      // metric, or a workload the round was not measured on) is not evidence: it rejects the round.
      const bool known_metric = c.metric == "geomean_speedup" || c.metric == "speedup" || c.metric == "latency_ms";
      const bool known_workload =
          c.workload.empty() ? c.metric != "latency_ms"
                             : std::any_of(report->workloads.begin(), report->workloads.end(),
                                           [&](const eval::WorkloadResult& w) { return w.uuid == c.workload; });
      if (!known_metric || !known_workload) {
        cj["status"] = "invalid";
        cj["detail"] = !known_metric ? fmt::format("metric '{}' is not geomean_speedup, speedup or latency_ms", c.metric)
                       : c.workload.empty() ? std::string("latency_ms needs a workload uuid")
                                            : fmt::format("workload '{}' is not one of the round's dev workloads", c.workload);
        check("claim", false, cj["detail"].get<std::string>());
      } else if (!measured || !(*measured > 0)) {
        cj["status"] = "unverifiable";
        cj["detail"] = "kda has no measurement for this claim";
      } else {
        // The accepted range: the measurement's 95 % interval over trials, at least +-tolerance. A
        // claim outside it is measured once more before it is called false (two evaluations on the
        // 2-core host once differed by 27 %, each with a tight interval): the ranges are joined.
        const double tol = state_.options.claim_tolerance;
        ClaimRange range = claim_range(*report, c.metric, c.workload, tol);
        bool remeasured = false;
        if (!(c.value >= range.low && c.value <= range.high)) {
          if (!second) {
            KDA_ASSIGN_OR_RETURN(second, run_eval(*solution, "dev", std::nullopt,
                                                  "round " + std::to_string(state_.round) + " claim re-measure"));
          }
          if (second->all_passed) {
            const ClaimRange again = claim_range(*second, c.metric, c.workload, tol);
            cj["remeasured"] = again.measured;
            range.low = std::min(range.low, again.low);
            range.high = std::max(range.high, again.high);
            remeasured = true;
          }
        }
        cj["measured"] = *measured;
        cj["accepted_range"] = {range.low, range.high};
        if (range.ci) cj["measured_ci95"] = interval_json(*range.ci);
        cj["status"] = c.value >= range.low && c.value <= range.high ? "confirmed" : "false";
        cj["detail"] = fmt::format("claimed {:.4g}, measured {:.4g} ({:+.0f}%); accepted {:.4g}..{:.4g}{}{}", c.value,
                                   *measured, (c.value / *measured - 1) * 100, range.low, range.high,
                                   range.ci ? fmt::format(" (the 95% interval over trials {:.4g}..{:.4g}, at least +-{:.0f}%)",
                                                          range.ci->low, range.ci->high, tol * 100)
                                            : fmt::format(" (+-{:.0f}%)", tol * 100),
                                   remeasured ? fmt::format("; measured again: {:.4g}", cj["remeasured"].get<double>())
                                              : std::string());
        if (cj["status"] == "false") check("claim", false, c.metric + " " + cj["detail"].get<std::string>());
      }
      claims.push_back(cj);
    }
  }
  bool verified = rejections.empty();
  // An improvement: the geomean gains min_improvement, and where both have 95 % intervals over
  // trials the candidate's lies above the incumbent's (noise must not decide).
  const bool gain = report && report->score_geomean > state_.incumbent_speedup * (1 + state_.options.min_improvement);
  const bool intervals = report && report->geomean_ci && state_.incumbent_ci_high > 0;
  const bool clears = !intervals || report->geomean_ci->low > state_.incumbent_ci_high;
  bool improvement = verified && gain && clears;
  // Two evaluations can disagree by more than their intervals (on the 2-core host an A/A of the
  // baseline once read 0.73x with a tight interval: the runner processes, not the kernels), so a
  // gain that looks real is confirmed head-to-head: the candidate timed against the incumbent in
  // the baseline's place, interleaved in one evaluation, must be min_improvement faster, its
  // interval above 1.
  json head_to_head;
  std::string head_to_head_detail;
  if (improvement && intervals) {
    GitWorkspace iws = workspace();
    KDA_RETURN_IF_ERROR(iws.reset_to(state_.incumbent_commit));
    auto incumbent = task::load_solution(dir_ / "workspace");
    KDA_RETURN_IF_ERROR(iws.reset_to(state_.candidate_commit));
    if (incumbent.ok()) {
      KDA_ASSIGN_OR_RETURN(eval::EvalReport h, run_eval(*solution, "dev", std::nullopt,
                                                        "round " + std::to_string(state_.round) + " against the incumbent",
                                                        &*incumbent));
      const bool faster = h.all_passed && h.score_geomean > 1 + state_.options.min_improvement &&
                          (!h.geomean_ci || h.geomean_ci->low > 1);
      head_to_head = {{"geomean", h.score_geomean}, {"all_passed", h.all_passed}, {"faster", faster}};
      if (h.geomean_ci) head_to_head["geomean_ci95"] = interval_json(*h.geomean_ci);
      head_to_head_detail = fmt::format(
          "; head-to-head against the incumbent {:.4g}x{}: {}", h.score_geomean,
          h.geomean_ci ? fmt::format(" ({:.4g}..{:.4g})", h.geomean_ci->low, h.geomean_ci->high) : std::string(),
          faster ? "faster" : "not faster beyond the noise");
      improvement = faster;
    }
  }
  std::string improvement_detail =
      !report ? "not measured"
      : !gain ? fmt::format("geomean {:.4g} is not {:.0f}% above the incumbent's {:.4g}", report->score_geomean,
                            state_.options.min_improvement * 100, state_.incumbent_speedup)
      : !intervals ? fmt::format("geomean {:.4g} against the incumbent's {:.4g} (no interval to compare)",
                                 report->score_geomean, state_.incumbent_speedup)
      : fmt::format("95% intervals: candidate {:.4g}..{:.4g}, incumbent {:.4g}..{:.4g}: {}{}", report->geomean_ci->low,
                    report->geomean_ci->high, state_.incumbent_ci_low, state_.incumbent_ci_high,
                    clears ? "apart" : "overlapping (within noise)", head_to_head_detail);
  json verify = {{"checks", checks},
                 {"claims", claims},
                 {"verified", verified},
                 {"improvement", improvement},
                 {"improvement_detail", improvement_detail},
                 {"incumbent_speedup", state_.incumbent_speedup},
                 {"geomean", report ? report->score_geomean : 0.0},
                 {"eval", summary},
                 {"rejections", rejections},
                 {"profiles", round_profiles()}};
  if (report && report->geomean_ci) verify["geomean_ci95"] = interval_json(*report->geomean_ci);
  if (state_.incumbent_ci_high > 0) verify["incumbent_ci95"] = interval_json({state_.incumbent_ci_low, state_.incumbent_ci_high});
  if (head_to_head.is_object()) verify["head_to_head"] = head_to_head;
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(round_dir() / "verify.json", verify.dump(2)));
  KDA_RETURN_IF_ERROR(protect(round_dir_rel() + "/verify.json"));
  KDA_RETURN_IF_ERROR(log("verdict", "verifier", {{"round", state_.round}, {"verified", verified},
                                                  {"improvement", improvement}, {"rejections", rejections},
                                                  {"claims", claims}}));
  for (const auto& c : claims)
    if (c["status"] == "false")
      KDA_RETURN_IF_ERROR(log("false_claim", "verifier", {{"round", state_.round}, {"claim", c}}));
  state_.step = "review";
  return save_state();
}

Status Runner::round_review() {
  const bool alignment = state_.options.alignment_every > 0 && state_.round % state_.options.alignment_every == 0;
  const std::string verify_text = read_or_empty(round_dir() / "verify.json");
  json verify = json::parse(verify_text, nullptr, false);
  std::string finish = read_or_empty(round_dir() / "finish.json");
  std::string diff = read_or_empty(round_dir() / "diff.patch");
  if (diff.size() > 30000) diff = diff.substr(0, 30000) + "\n[diff truncated]\n";
  std::string evidence;
  if (verify.is_object()) {
    for (const auto& c : verify["checks"])
      evidence += fmt::format("- {} {}: {}\n", c["passed"].get<bool>() ? "pass" : "FAIL", c["name"].get<std::string>(),
                              c["detail"].get<std::string>());
    for (const auto& c : verify["claims"])
      evidence += fmt::format("- claim {} {}: {}\n", c["metric"].get<std::string>(), c["status"].get<std::string>(),
                              c["detail"].get<std::string>());
    if (verify.contains("eval") && verify["eval"].is_object() && verify["eval"].contains("workloads"))
      evidence += "\nkda's measurement (dev workloads, fresh seeds):\n" + eval_table(verify["eval"]);
    evidence += fmt::format("\nverified: {}; improvement over the incumbent ({:.3f}x): {}\n",
                            verify["verified"].get<bool>() ? "yes" : "NO", state_.incumbent_speedup,
                            verify["improvement"].get<bool>() ? "yes" : "no");
  }
  std::string history;
  int shown = 0;
  for (auto it = ledger_.candidates.rbegin(); it != ledger_.candidates.rend() && shown < (alignment ? 100 : 3);
       ++it, ++shown)
    history += fmt::format("- {} (round {}, parent {}): geomean {:.3f}x, accepted {}; {}\n", it->id, it->round,
                           it->parent, it->eval.value("geomean", 0.0), it->accepted ? "yes" : "no",
                           it->notes.substr(0, 300));
  std::string prompt = fmt::format(
      "{} of round {}.\n\n--- frozen plan ---\n{}\n--- round contract ---\n{}\n--- writer's finish_round ---\n{}\n"
      "--- verifier evidence ---\n{}\n--- diff (incumbent -> candidate) ---\n{}\n--- recent candidates ---\n{}\n"
      "COMPLETE asks kda to run the completion check (all workloads, more trials, the machine criteria); STOP "
      "ends the run with the incumbent. ADVANCED accepts the candidate as the new incumbent if kda verified an "
      "improvement.\nEnd with exactly:\nDECISION: CONTINUE|COMPLETE|STOP\nPROGRESS: ADVANCED|STALLED|REGRESSED\n",
      alignment ? "Alignment review (is the run still on the plan's course? judge the whole trajectory)" : "Review",
      state_.round, plan_text(), read_or_empty(round_dir() / "contract.md"),
      finish.empty() ? "(none: the writer did not call finish_round)" : finish, evidence, diff, history);
  KDA_ASSIGN_OR_RETURN(agent::SessionResult r,
                       session(agent::Role::kReviewer, alignment ? "alignment" : "review", state_.round, prompt));
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(round_dir() / "review.md", r.final_text));
  ReviewVerdict v = parse_review_verdict(r.final_text);
  json vj = {{"decision", decision_name(v.decision)}, {"progress", progress_name(v.progress)},
             {"well_formed", v.well_formed}, {"complaint", v.complaint}, {"alignment", alignment}};
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(round_dir() / "verdict.json", vj.dump(2)));
  KDA_RETURN_IF_ERROR(protect(round_dir_rel() + "/verdict.json"));
  KDA_RETURN_IF_ERROR(log("verdict", "reviewer", {{"round", state_.round}, {"verdict", vj}}));
  if (!v.well_formed) {
    state_.complaints.push_back(fmt::format("round {}: {}", state_.round, v.complaint));
    KDA_RETURN_IF_ERROR(log("complaint", "kda", {{"round", state_.round}, {"what", v.complaint}}));
  }
  state_.step = "decide";
  return save_state();
}

// Deterministic from the round's files and the state, so a kill before the state is saved just
// makes the resumed run decide the same way again.
Status Runner::round_decide() {
  json verify = json::parse(read_or_empty(round_dir() / "verify.json"), nullptr, false);
  json verdict = json::parse(read_or_empty(round_dir() / "verdict.json"), nullptr, false);
  if (!verify.is_object() || !verdict.is_object())
    return Status::internal("round " + std::to_string(state_.round) + ": verify.json or verdict.json unreadable");
  const bool verified = verify.value("verified", false);
  const bool improvement = verify.value("improvement", false);
  const std::string decision = verdict.value("decision", "CONTINUE");
  const std::string progress = verdict.value("progress", "STALLED");
  const bool accepted = verified && improvement && progress == "ADVANCED";

  Candidate c;
  c.id = candidate_id(state_.round);
  c.parent = state_.incumbent_id;
  c.round = state_.round;
  c.commit = state_.candidate_commit;
  if (auto s = task::load_solution(dir_ / "workspace"); s.ok()) c.solution_hash = task::solution_hash(*s);
  c.eval = verify.value("eval", json::object());
  c.verdicts = {{"verify", {{"verified", verified}, {"improvement", improvement},
                            {"rejections", verify.value("rejections", json::array())}}},
                {"review", verdict}};
  c.accepted = accepted;
  json finish = json::parse(read_or_empty(round_dir() / "finish.json"), nullptr, false);
  c.notes = finish.is_object() ? finish.value("summary", "") : "";
  ledger_.upsert(c);
  if (accepted) {
    state_.incumbent_id = c.id;
    state_.incumbent_commit = c.commit;
    std::optional<eval::Interval> ci;
    if (const auto it = verify.find("geomean_ci95"); it != verify.end() && it->is_array() && it->size() == 2)
      ci = eval::Interval{(*it)[0].get<double>(), (*it)[1].get<double>()};
    set_incumbent_score(verify.value("geomean", 0.0), ci);
  }
  ledger_.incumbent = state_.incumbent_id;
  KDA_ASSIGN_OR_RETURN(state_.protected_files["ledger.json"], save_json(dir_ / "ledger.json", ledger_.to_json()));
  state_.stalls = progress == "ADVANCED" ? 0 : state_.stalls + 1;
  state_.note.clear();
  KDA_RETURN_IF_ERROR(log("state", "kda", {{"event", "round decided"}, {"round", state_.round}, {"accepted", accepted},
                                           {"incumbent", state_.incumbent_id}, {"decision", decision},
                                           {"progress", progress}, {"stalls", state_.stalls}}));
  GitWorkspace ws = workspace();
  KDA_RETURN_IF_ERROR(ws.reset_to(state_.incumbent_commit));
  if (accepted) {
    status_line(fmt::format("round {} accepted: geomean {:.3f}x (reviewer {}, {})", state_.round, state_.incumbent_speedup,
                            decision, progress));
  } else {
    const RoundExplanation e = explain_round(state_.round);
    status_line(fmt::format("round {} not accepted: {}: {} (reviewer {})", state_.round, e.outcome.code,
                            e.detail.substr(0, 300), e.review));
  }
  state_.round += 1;
  state_.step = "writer";
  state_.candidate_commit.clear();
  if (state_.stalls >= 3) return stop("three stalled rounds in a row");
  if (decision == "STOP") return stop("the reviewer decided STOP");
  if (decision == "COMPLETE") {
    if (auto futile = futile_completion(accepted)) {
      // The round changed nothing the check would measure: say why instead of spending it.
      KDA_RETURN_IF_ERROR(log("state", "kda", {{"event", "completion check skipped"}, {"why", *futile}}));
      state_.note = "the reviewer asked for COMPLETE, but no completion check was run: " + *futile;
      state_.complaints.push_back("COMPLETE on round " + std::to_string(state_.round - 1) + ": " + *futile);
      status_line("completion check skipped: " + *futile);
      if (state_.round > state_.options.max_rounds) return stop("the reviewer asked for COMPLETE and no rounds are left: " + *futile);
      return save_state();
    }
    state_.phase = "finalize";
    state_.step = "check";
  }
  return save_state();
}

// Why a completion check after a round that was not accepted could not pass, if it could not: the
// incumbent is the one the last failed check measured, or its geomean (with its interval, widened
// by the claim tolerance) is below the target. nullopt: run the check.
std::optional<std::string> Runner::futile_completion(bool accepted) const {
  if (accepted) return std::nullopt;
  const json last = json::parse(read_or_empty(dir_ / "final" / "check.json"), nullptr, false);
  if (last.is_object() && !last.value("met", false) && last.value("incumbent", "") == state_.incumbent_id)
    return fmt::format("the incumbent {} is unchanged since the last completion check, which failed", state_.incumbent_id);
  const double bound = std::max(state_.incumbent_ci_high, state_.incumbent_speedup * (1 + state_.options.claim_tolerance));
  if (bound < criteria_.min_geomean_speedup)
    return fmt::format("this round was not accepted, and the incumbent {} measured {:.3f}x (at most {:.3f}x within its "
                       "interval and the claim tolerance) against the target {:.3f}x",
                       state_.incumbent_id, state_.incumbent_speedup, bound, criteria_.min_geomean_speedup);
  return std::nullopt;
}

Status Runner::finalize() {
  GitWorkspace ws = workspace();
  KDA_RETURN_IF_ERROR(ws.reset_to(state_.incumbent_commit));
  KDA_ASSIGN_OR_RETURN(task::Solution s, task::load_solution(dir_ / "workspace"));
  std::optional<int> trials = state_.options.final_trials;
  if (!trials) trials = 2 * state_.options.eval_trials.value_or(pack_->settings.trials);
  KDA_ASSIGN_OR_RETURN(eval::EvalReport r, run_eval(s, "all", trials, "completion check"));
  auto results = check_criteria(criteria_, r);
  const bool met = all_met(results);
  KDA_RETURN_IF_ERROR(log("verdict", "verifier", {{"completion_check", criteria_results_json(results)}, {"met", met}}));
  json check = {{"incumbent", state_.incumbent_id}, {"criteria", criteria_results_json(results)}, {"met", met},
                {"eval", eval_summary(r)}};
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(dir_ / "final" / "check.json", check.dump(2)));
  if (met) {
    KDA_RETURN_IF_ERROR(export_final(r));
    state_.phase = "done";
    state_.step = "";
    state_.stop_reason.clear();
    KDA_RETURN_IF_ERROR(log("state", "kda", {{"event", "done"}, {"incumbent", state_.incumbent_id}, {"geomean", r.score_geomean}}));
    set_incumbent_score(r.score_geomean, r.geomean_ci);
    status_line("done");
    return save_state();
  }
  std::string why;
  for (const auto& x : results)
    if (!x.met) why += (why.empty() ? "" : "; ") + x.id + ": " + x.detail;
  state_.finalize_attempts += 1;
  state_.note = "the reviewer asked for COMPLETE but the completion check failed: " + why;
  state_.complaints.push_back("completion check failed: " + why);
  state_.phase = "round";
  state_.step = "writer";
  if (state_.round > state_.options.max_rounds) return stop("completion check failed and no rounds are left: " + why);
  return save_state();
}

// final/ is a solution directory: solution.json naming the sources and the sources beside it (a
// source whose path is one of kda's own files in final/ stays inline). Files of an earlier export
// that the solution no longer has are removed first.
Status Runner::write_final_solution(const task::Solution& s) {
  const stdfs::path final_dir = dir_ / "final";
  static const std::set<std::string> kOwn = {"solution.json", "traces.jsonl", "check.json", "report.html"};
  KDA_RETURN_IF_ERROR(fs::ensure_dir(final_dir));
  std::error_code ec;
  for (const auto& e : stdfs::directory_iterator(final_dir, ec))
    if (!kOwn.count(e.path().filename().string())) stdfs::remove_all(e.path(), ec);
  nlohmann::json j = s.to_json();
  for (auto& src : j["sources"]) {
    const std::string path = src.value("path", "");
    if (kOwn.count(path)) continue;
    const stdfs::path file = final_dir / path;
    KDA_RETURN_IF_ERROR(fs::ensure_dir(file.parent_path()));
    KDA_RETURN_IF_ERROR(fs::write_file_atomic(file, src.value("content", "")));
    src.erase("content");
  }
  return fs::write_file_atomic(final_dir / "solution.json", j.dump(2) + "\n");
}

Status Runner::export_final(const std::optional<eval::EvalReport>& final_report) {
  GitWorkspace ws = workspace();
  KDA_RETURN_IF_ERROR(ws.reset_to(state_.incumbent_commit));
  KDA_ASSIGN_OR_RETURN(task::Solution s, task::load_solution(dir_ / "workspace"));
  KDA_RETURN_IF_ERROR(write_final_solution(s));
  std::string traces;
  if (final_report) {
    for (const auto& w : final_report->workloads) traces += eval::trace_json(*final_report, w, *pack_).dump() + "\n";
  } else {
    const Candidate* c = ledger_.find(state_.incumbent_id);
    traces = read_or_empty(dir_ / "rounds" / round_name(c != nullptr ? c->round : 0) / "traces.jsonl");
  }
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(dir_ / "final" / "traces.jsonl", traces));
  return {};
}

Status Runner::stop(const std::string& reason) {
  state_.stopped_from = state_.phase + "/" + state_.step;
  state_.phase = "stopped";
  state_.step = "";
  state_.stop_reason = reason;
  KDA_RETURN_IF_ERROR(log("state", "kda", {{"event", "stopped"}, {"reason", reason}, {"incumbent", state_.incumbent_id}}));
  if (!state_.incumbent_commit.empty() && ledger_.find(state_.incumbent_id) != nullptr)
    KDA_RETURN_IF_ERROR(export_final(std::nullopt));
  status_line("stopped: " + reason);
  return save_state();
}

Status Runner::extend(const BudgetChange& b) {
  if (!b.any()) return {};
  if (state_.phase == "done")
    return Status::bad_input("--resume " + dir_.string() + ": the run is done (its acceptance criteria were met on all "
                             "workloads); new budgets do not reopen it: start a new run with --start " +
                             (dir_ / "final").string());
  const bool budget_stop = state_.stop_reason.starts_with("budget:") || state_.stop_reason.starts_with("max rounds") ||
                           state_.stop_reason.starts_with("completion check failed and no rounds are left");
  if (state_.phase == "stopped" && (!budget_stop || state_.stopped_from.empty()))
    return Status::bad_input("--resume " + dir_.string() + ": the run stopped for \"" + state_.stop_reason +
                             "\", which new budgets do not change");
  LoopOptions& o = state_.options;
  json changes = json::object();
  auto change = [&](const char* name, auto& field, const auto& value) {
    if (!value) return;
    changes[name] = {{"from", field}, {"to", *value}};
    field = *value;
  };
  change("max_rounds", o.max_rounds, b.max_rounds);
  change("budget_tokens", o.budget_tokens, b.budget_tokens);
  change("hours", o.hours, b.hours);
  change("budget_usd", o.budget_usd, b.budget_usd);
  change("gpu_minutes", o.gpu_minutes, b.gpu_minutes);
  json event = {{"event", "budgets_changed"}, {"changes", changes}, {"phase", state_.phase}};
  if (state_.phase == "stopped") {
    // Back where it stopped; drive() checks the budgets again before any new work.
    const auto slash = state_.stopped_from.find('/');
    event["reopened_at"] = state_.stopped_from;
    event["was_stopped_for"] = state_.stop_reason;
    state_.phase = state_.stopped_from.substr(0, slash);
    state_.step = slash == std::string::npos ? "" : state_.stopped_from.substr(slash + 1);
    state_.stop_reason.clear();
    state_.stopped_from.clear();
  }
  KDA_RETURN_IF_ERROR(log("state", "kda", event));
  return save_state();
}

RunOutcome Runner::outcome() const {
  RunOutcome o;
  o.run_dir = dir_;
  o.phase = state_.phase;
  o.stop_reason = state_.stop_reason;
  o.incumbent = state_.incumbent_id;
  o.incumbent_speedup = state_.incumbent_speedup;
  o.rounds = state_.phase == "plan" || state_.phase == "setup" ? 0 : state_.round - 1;
  o.criteria_met = state_.phase == "done";
  o.round_rows = rounds_json();
  return o;
}

Result<RunOutcome> Runner::drive() {
  while (true) {
    const std::string phase = state_.phase, step = state_.step;
    if (phase == "done" || phase == "stopped") return outcome();
    // Budgets are checked where new work would start (a session or the completion check), never
    // in the middle of a round, so a round that was paid for is still verified and decided.
    const bool starts_work = phase == "plan" || phase == "finalize" || (phase == "round" && step == "writer");
    if (starts_work) {
      if (auto b = budget_exceeded()) {
        KDA_RETURN_IF_ERROR(log("budget", "kda", {{"exceeded", *b}}));
        KDA_RETURN_IF_ERROR(stop(*b));
        continue;
      }
    }
    status_line("start");
    if (phase == "setup") {
      KDA_RETURN_IF_ERROR(setup_measure());
    } else if (phase == "plan") {
      KDA_RETURN_IF_ERROR(step == "review" ? plan_review() : plan_draft());
    } else if (phase == "round") {
      if (step == "writer" && state_.round > state_.options.max_rounds) {
        KDA_RETURN_IF_ERROR(stop(fmt::format("max rounds ({}) reached", state_.options.max_rounds)));
      } else if (step == "writer") {
        KDA_RETURN_IF_ERROR(round_writer());
      } else if (step == "verify") {
        KDA_RETURN_IF_ERROR(round_verify());
      } else if (step == "review") {
        KDA_RETURN_IF_ERROR(round_review());
      } else if (step == "decide") {
        KDA_RETURN_IF_ERROR(round_decide());
      } else {
        return Status::internal("state.json: unknown round step '" + step + "'");
      }
    } else if (phase == "finalize") {
      KDA_RETURN_IF_ERROR(finalize());
    } else {
      return Status::internal("state.json: unknown phase '" + phase + "'");
    }
  }
}

}  // namespace

nlohmann::json RunOutcome::to_json() const {
  return {{"run_dir", run_dir.string()}, {"phase", phase},         {"stop_reason", stop_reason},
          {"incumbent", incumbent},      {"speedup", incumbent_speedup}, {"rounds", rounds},
          {"criteria_met", criteria_met}, {"round_table", round_rows}};
}

Result<RunOutcome> start_run(const std::filesystem::path& run_dir, const LoopOptions& options, const LoopEnv& env) {
  Runner r(run_dir, env);
  KDA_RETURN_IF_ERROR(r.create(options));
  return r.drive();
}

Result<RunOutcome> resume_run(const std::filesystem::path& run_dir, const LoopEnv& env, const BudgetChange& budgets) {
  Runner r(run_dir, env);
  KDA_RETURN_IF_ERROR(r.open_existing());
  KDA_RETURN_IF_ERROR(r.extend(budgets));
  return r.drive();
}

}  // namespace kda::loop
