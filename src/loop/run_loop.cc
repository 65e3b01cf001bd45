#include "loop/run_loop.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "loop/runner.h"
#include "util/strings.h"

namespace kda::loop {

namespace detail {

namespace {

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

std::string human_tokens(int64_t n) {
  if (n >= 1000000) return fmt::format("{:.1f}M", n / 1e6);
  if (n >= 1000) return fmt::format("{:.1f}k", n / 1e3);
  return std::to_string(n);
}

}  // namespace

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
  json summary = {{"all_passed", r.all_passed}, {"geomean", r.score_geomean},
                  {"mean", r.score_mean},       {"seed", r.seed},
                  {"wall_s", r.wall_s},         {"workloads", ws}};
  // What the candidate's build runs: a round whose code is the incumbent's cannot be faster than it,
  // whatever the timings say (Runner::same_code_as_incumbent).
  if (std::string digest = candidate_code_digest(r); !digest.empty()) summary["code_digest"] = std::move(digest);
  return summary;
}

std::string candidate_code_digest(const eval::EvalReport& r) {
  return r.build.value("candidate", json::object()).value("code_digest", "");
}

std::string eval_table(const json& summary) {
  std::string out =
      fmt::format("{:<38} {:<26} {:>12} {:>12} {:>9}\n", "workload", "verdict", "latency_ms", "baseline_ms", "speedup");
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

std::string read_or_empty(const stdfs::path& p) {
  auto r = fs::read_file(p);
  return r.ok() ? *r : std::string();
}

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
    return Status::bad_input("--run-dir " + dir_.string() +
                             ": exists and is not empty (use --resume to continue a run)");
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
  state_.phase = Phase::kSetup;  // where a new run starts (not a move)
  state_.step = Step::kMeasure;
  state_.task_digest = m.digest();
  state_.baseline_commit = commit;
  state_.incumbent_commit = commit;
  state_.incumbent_id = "c000";
  KDA_RETURN_IF_ERROR(load_runtime());
  KDA_RETURN_IF_ERROR(log("state", "kda",
                          {{"event", "created"},
                           {"options", state_.options.to_json()},
                           {"task_digest", state_.task_digest},
                           {"start_commit", commit}}));
  KDA_ASSIGN_OR_RETURN(std::string lsha, save_json(dir_ / "ledger.json", ledger_.to_json()));
  state_.protected_files["ledger.json"] = lsha;
  return save_state();
}

Status Runner::open_existing() {
  std::error_code ec;
  dir_ = stdfs::canonical(dir_, ec);
  if (ec) return Status::not_found("--resume: no run directory " + dir_.string());
  if (!stdfs::exists(dir_ / "state.json"))
    return Status::not_found("--resume " + dir_.string() +
                             ": no state.json (not a run directory, or setup never finished)");
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
  if (!is_terminal(state_.phase)) {
    auto v = audit::verify(log_path, state_.audit_head);
    if (!v.ok() && v.status().kind() != ErrorKind::kNotFound) return v.status();
    if (!v.ok())
      altered = "the log is missing; ";
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
  KDA_RETURN_IF_ERROR(log("state", "kda",
                          {{"event", "resumed"},
                           {"phase", phase_name(state_.phase)},
                           {"step", step_name(state_.step)},
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
  tools_ = make_tools(0, dir_ / "workspace");
  return {};
}

std::unique_ptr<KdaToolHost> Runner::make_tools(int lane, const stdfs::path& workspace) {
  return std::make_unique<KdaToolHost>(KdaToolHost::Hooks{
      .evaluate = [this, lane, workspace] { return tool_evaluate(lane, workspace); },
      .ledger = [this] { return ledger_.to_json(); },
      .profile = state_.options.max_profiles_per_round > 0 ? std::function<Result<ProfileTaken>(const ProfileRequest&)>(
                                                                 [this, lane, workspace](const ProfileRequest& req) {
                                                                   return tool_profile(req, lane, workspace);
                                                                 })
                                                           : nullptr,
      .ncu = env_.ncu,
      .max_profiles_per_round = state_.options.max_profiles_per_round,
  });
}

Status Runner::save_state() {
  state_.elapsed_s = elapsed_base_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  if (audit_) {
    state_.audit_head = audit_->last_hash();
    state_.audit_records = audit_->size();
  }
  KDA_ASSIGN_OR_RETURN(state_sha_, save_json(dir_ / "state.json", state_.to_json()));
  return {};
}

Status Runner::log(const std::string& type, const std::string& actor, const json& data) {
  std::lock_guard<std::mutex> hold(shared_);
  if (!audit_) return Status::internal("audit log not open");
  return audit_->append(type, actor, data);
}

void Runner::status_line(const std::string& what) {
  if (!env_.status) return;
  std::lock_guard<std::mutex> hold(shared_);
  const double elapsed =
      elapsed_base_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  const int64_t tokens = state_.usage.input_tokens + state_.usage.output_tokens;
  const int max_rounds = state_.options.max_rounds;
  std::string where = state_.phase == Phase::kRound
                          ? (state_.round > max_rounds
                                 ? fmt::format("rounds {}/{} done", max_rounds, max_rounds)
                                 : fmt::format("round {}/{} {}", state_.round, max_rounds, step_name(state_.step)))
                          : std::string(phase_name(state_.phase)) +
                                (state_.step == Step::kNone ? "" : " " + std::string(step_name(state_.step)));
  env_.status(fmt::format("kda run: {} | {} | incumbent {} {:.3f}x | tokens {} ${:.2f} | eval {:.1f} min | {:.0f}s",
                          where, what, state_.incumbent_id, state_.incumbent_speedup, human_tokens(tokens),
                          state_.usage.cost_usd, state_.eval_s / 60.0, elapsed));
}

std::optional<std::string> Runner::budget_exceeded() const {
  return exceeded_budget(
      state_, elapsed_base_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
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
    if (pm.digest() != state_.plan_digest)
      problems.push_back("plan/ changed after it was frozen (plan hash violation)");
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
  if (!slot)
    slot.emplace(env_.make_backend(role == agent::Role::kWriter ? state_.options.writer : state_.options.reviewer));
  return *slot;
}

Result<agent::SessionResult> Runner::session(agent::Role role, const std::string& phase, int index, std::string prompt,
                                             Lane* lane) {
  agent::Backend* backend = lane != nullptr ? lane->backend.get() : nullptr;
  if (backend == nullptr) {
    auto& made = backend_for(role);
    if (!made.ok()) return made.status();
    backend = made->get();
  }
  const stdfs::path scratch = lane != nullptr ? lane->scratch : dir_ / "scratch";
  agent::SessionRequest req;
  req.role = role;
  req.phase = phase;
  req.index = index;
  req.system_prompt = role == agent::Role::kWriter ? kWriterSystem : kReviewerSystem;
  req.prompt = std::move(prompt);
  req.workspace = lane != nullptr ? lane->workspace() : dir_ / "workspace";
  if (role == agent::Role::kWriter) req.writable = {req.workspace, scratch};
  req.readable = {dir_ / "task", dir_ / "plan", dir_ / "rounds", dir_ / "ledger.json", dir_ / "scratch"};
  // Every prompt names where its evidence is: the file tools take these absolute paths as given.
  req.prompt += fmt::format(
      "\n--- paths you can read (absolute; list_files, read_file and grep take them as given) ---\n"
      "task (definition.json, workloads.jsonl, reference/, baselines/): {}\nplan: {}\n"
      "rounds (rounds/NNN: contract.md, diff.patch, verify.json, eval.json, traces.jsonl, review.md, verdict.json, "
      "profiles/): {}\nledger: {}\nscratch: {}\nworkspace (the solution): {}\n",
      (dir_ / "task").string(), (dir_ / "plan").string(), (dir_ / "rounds").string(), (dir_ / "ledger.json").string(),
      scratch.string(), req.workspace.string());
  const int k = lane != nullptr ? lane->k : lane_;
  if (phase.starts_with("round") || phase == "review" || phase == "alignment")  // "round.lane2" too
    req.prompt += "this round: " + round_dir(k).string() + "\n";
  if (role == agent::Role::kWriter)
    req.prompt += "you may write: " + req.workspace.string() + " and " + scratch.string() + "\n";
  const std::string actor = agent::role_name(role);
  std::string audit_error;  // the first append of this session's events that failed
  req.on_event = [this, actor, k, &audit_error](const agent::AgentEvent& e) {
    json record = {{"kind", e.kind}, {"ok", e.ok}, {"detail", e.detail}};
    if (k > 0) record["lane"] = k;
    Status st = log("agent_event", actor, record);
    if (!st.ok() && audit_error.empty()) audit_error = st.message();
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
  all_tools.add(lane != nullptr ? lane->tools.get() : tools_.get());
  all_tools.add(&knowledge);
  req.tools = &all_tools;
  KDA_RETURN_IF_ERROR(log("session", "kda",
                          {{"event", "start"},
                           {"role", actor},
                           {"phase", phase},
                           {"index", index},
                           {"backend", backend->name()},
                           {"prompt_sha256", sha256_hex(req.prompt)}}));
  status_line(fmt::format("{} session ({})", actor, phase));
  auto r = backend->run_session(req);
  if (!r.ok()) {
    (void)log("session", "kda",
              {{"event", "error"}, {"role", actor}, {"phase", phase}, {"error", r.status().message()}});
    return r.status().with_context(std::string(actor) + " backend");
  }
  if (!audit_error.empty()) return Status::io("audit log: " + audit_error);
  {
    std::lock_guard<std::mutex> hold(shared_);
    state_.usage += r->usage;
  }
  KDA_RETURN_IF_ERROR(log("session", "kda",
                          {{"event", "end"},
                           {"role", actor},
                           {"phase", phase},
                           {"index", index},
                           {"turns", r->turns},
                           {"timed_out", r->timed_out},
                           {"input_tokens", r->usage.input_tokens},
                           {"output_tokens", r->usage.output_tokens},
                           {"cost_usd", r->usage.cost_usd},
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
  std::unique_lock<std::mutex> turn(device_);
  auto r = env_.evaluate(*pack_, s, o);
  turn.unlock();
  {
    std::lock_guard<std::mutex> hold(shared_);
    state_.eval_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (!r.ok()) {
    (void)log("evaluation", "verifier", {{"why", why}, {"error", r.status().message()}});
    return r.status().with_context("evaluator");
  }
  KDA_RETURN_IF_ERROR(log("evaluation", "verifier",
                          {{"why", why},
                           {"workloads", workloads},
                           {"solution_hash", task::solution_hash(s)},
                           {"summary", eval_summary(*r)}}));
  return r;
}

Result<agent::ToolOutcome> Runner::tool_evaluate(int lane, const stdfs::path& workspace) {
  auto s = task::load_solution(workspace);
  if (!s.ok()) return agent::ToolOutcome{"the workspace solution does not load: " + s.status().message(), true, {}};
  KDA_ASSIGN_OR_RETURN(eval::EvalReport r, run_eval(*s, "dev", std::nullopt,
                                                    lane > 0 ? fmt::format("writer evaluate tool, lane {}", lane)
                                                             : std::string("writer evaluate tool")));
  json summary = eval_summary(r);
  return agent::ToolOutcome{eval_table(summary), false, summary};
}

// The writer's `profile` tool: the workspace's solution on one workload under ncu, the report in
// rounds/NNN/profiles/<uuid8>[-<k>].ncu-rep with a record beside it (.json), one audit record.
// Counts as evaluator time for --gpu-minutes.
Result<ProfileTaken> Runner::tool_profile(const ProfileRequest& req, int lane, const stdfs::path& workspace) {
  auto s = task::load_solution(workspace);
  if (!s.ok()) return Status::bad_input("the workspace solution does not load: " + s.status().message());
  ProfileSetup setup;
  setup.dir = round_dir(lane) / "profiles";
  setup.runner_binary = env_.runner_binary;
  setup.seed = static_cast<uint64_t>(state_.round) * 100 + static_cast<uint64_t>(req.index);
  setup.cuda_arch = state_.options.cuda_arch;
  setup.extra = {{"round", state_.round}, {"index", req.index}};
  setup.record_relative_to = dir_;
  setup.starting = [this](const std::string& stem) { status_line("profiling (writer profile tool, " + stem + ")"); };
  std::unique_lock<std::mutex> turn(device_);
  KDA_ASSIGN_OR_RETURN(ProfileRun run, run_profile(*pack_, *s, req, setup));
  turn.unlock();
  {
    std::lock_guard<std::mutex> hold(shared_);
    state_.eval_s += run.record["wall_s"].get<double>();
  }
  KDA_RETURN_IF_ERROR(log("profile", "verifier", run.record));
  if (!run.status.ok()) return run.status;
  return ProfileTaken{run.workload, run.run.report, run.run.report.string()};
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
// Finalize and stop (the plan phases: plan_phases.cc; a round: round_phases.cc)

Status Runner::finalize() {
  GitWorkspace ws = workspace();
  KDA_RETURN_IF_ERROR(ws.reset_to(state_.incumbent_commit));
  KDA_ASSIGN_OR_RETURN(task::Solution s, task::load_solution(dir_ / "workspace"));
  KDA_ASSIGN_OR_RETURN(eval::EvalReport r, run_eval(s, "all", completion_trials(), "completion check"));
  auto results = check_criteria(criteria_, r);
  const bool met = all_met(results);
  KDA_RETURN_IF_ERROR(log("verdict", "verifier", {{"completion_check", criteria_results_json(results)}, {"met", met}}));
  json check = {{"incumbent", state_.incumbent_id},
                {"criteria", criteria_results_json(results)},
                {"met", met},
                {"eval", eval_summary(r)}};
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(dir_ / "final" / "check.json", check.dump(2)));
  if (met) {
    KDA_RETURN_IF_ERROR(export_final(r));
    KDA_RETURN_IF_ERROR(state_.move_to(Phase::kDone, Step::kNone));
    state_.stop_reason.clear();
    KDA_RETURN_IF_ERROR(
        log("state", "kda", {{"event", "done"}, {"incumbent", state_.incumbent_id}, {"geomean", r.score_geomean}}));
    set_incumbent_score(r.score_geomean, r.geomean_ci);
    status_line("done");
    return save_state();
  }
  std::string why;
  for (const auto& x : results)
    if (!x.met)
      why += (why.empty() ? "" : "; ") + x.id + ": " + x.detail +
             (x.workloads.empty() ? "" : " (failing workloads: " + util::join(x.workloads, ", ") + ")");
  state_.finalize_attempts += 1;
  // Where a failed criterion names its workloads, every later contract says a repair is accepted
  // (contract_text, verify_repair) while this incumbent stands.
  state_.note = "the reviewer asked for COMPLETE but the completion check failed: " + why;
  state_.complaints.push_back("completion check failed: " + why);
  KDA_RETURN_IF_ERROR(state_.move_to(Phase::kRound, Step::kWriter));
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
  state_.stopped_from = state_.at().str();
  KDA_RETURN_IF_ERROR(state_.move_to(Phase::kStopped, Step::kNone));
  state_.stop_reason = reason;
  KDA_RETURN_IF_ERROR(
      log("state", "kda", {{"event", "stopped"}, {"reason", reason}, {"incumbent", state_.incumbent_id}}));
  if (!state_.incumbent_commit.empty() && ledger_.find(state_.incumbent_id) != nullptr)
    KDA_RETURN_IF_ERROR(export_final(std::nullopt));
  status_line("stopped: " + reason);
  return save_state();
}

Status Runner::extend(const BudgetChange& b) {
  if (!b.any()) return {};
  if (state_.phase == Phase::kDone)
    return Status::bad_input("--resume " + dir_.string() +
                             ": the run is done (its acceptance criteria were met on all "
                             "workloads); new budgets do not reopen it: start a new run with --start " +
                             (dir_ / "final").string());
  const bool budget_stop = state_.stop_reason.starts_with("budget:") || state_.stop_reason.starts_with("max rounds") ||
                           state_.stop_reason.starts_with("completion check failed and no rounds are left");
  const auto stopped_at = Position::parse(state_.stopped_from);
  if (state_.phase == Phase::kStopped && (!budget_stop || !stopped_at))
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
  json event = {{"event", "budgets_changed"}, {"changes", changes}, {"phase", phase_name(state_.phase)}};
  if (state_.phase == Phase::kStopped) {
    // Back where it stopped; drive() checks the budgets again before any new work.
    event["reopened_at"] = state_.stopped_from;
    event["was_stopped_for"] = state_.stop_reason;
    KDA_RETURN_IF_ERROR(state_.move_to(stopped_at->phase, stopped_at->step));
    state_.stop_reason.clear();
    state_.stopped_from.clear();
  }
  KDA_RETURN_IF_ERROR(log("state", "kda", event));
  return save_state();
}

RunOutcome Runner::outcome() const {
  RunOutcome o;
  o.run_dir = dir_;
  o.phase = phase_name(state_.phase);
  o.stop_reason = state_.stop_reason;
  o.incumbent = state_.incumbent_id;
  o.incumbent_speedup = state_.incumbent_speedup;
  o.rounds = state_.phase == Phase::kPlan || state_.phase == Phase::kSetup ? 0 : state_.round - 1;
  o.criteria_met = state_.phase == Phase::kDone;
  o.round_rows = rounds_json();
  return o;
}

// One step of the loop, by where the run is (state.json's phase and step, checked when it was read).
Status Runner::run_step(Phase phase, Step step) {
  switch (phase) {
    case Phase::kSetup: return setup_measure();
    case Phase::kPlan: return step == Step::kReview ? plan_review() : plan_draft();
    case Phase::kRound:
      switch (step) {
        case Step::kWriter:
          if (state_.round > state_.options.max_rounds)
            return stop(fmt::format("max rounds ({}) reached", state_.options.max_rounds));
          return round_writer();
        case Step::kVerify: return round_verify();
        case Step::kReview: return round_review();
        case Step::kDecide: return round_decide();
        default: break;
      }
      break;
    case Phase::kFinalize: return finalize();
    case Phase::kDone:
    case Phase::kStopped: return {};
  }
  return Status::internal("loop: no step at " + Position{phase, step}.str());
}

Result<RunOutcome> Runner::drive() {
  while (true) {
    const Phase phase = state_.phase;
    const Step step = state_.step;
    if (is_terminal(phase)) return outcome();
    // Budgets are checked where new work would start (a session or the completion check), never
    // in the middle of a round, so a round that was paid for is still verified and decided.
    const bool starts_work =
        phase == Phase::kPlan || phase == Phase::kFinalize || (phase == Phase::kRound && step == Step::kWriter);
    if (starts_work) {
      if (auto b = budget_exceeded()) {
        KDA_RETURN_IF_ERROR(log("budget", "kda", {{"exceeded", *b}}));
        KDA_RETURN_IF_ERROR(stop(*b));
        continue;
      }
    }
    status_line("start");
    KDA_RETURN_IF_ERROR(run_step(phase, step));
  }
}

}  // namespace detail

using detail::Runner;

nlohmann::json RunOutcome::to_json() const {
  return {
      {"run_dir", run_dir.string()},  {"phase", phase},   {"stop_reason", stop_reason},   {"incumbent", incumbent},
      {"speedup", incumbent_speedup}, {"rounds", rounds}, {"criteria_met", criteria_met}, {"round_table", round_rows}};
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
