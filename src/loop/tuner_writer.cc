#include "loop/tuner_writer.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "eval/evaluator.h"
#include "eval/tool_run.h"
#include "loop/criteria.h"
#include "loop/run_state.h"
#include "task/solution.h"
#include "task/task_pack.h"
#include "tune/guard.h"
#include "tune/regimes.h"
#include "tune/tunables.h"
#include "tune/tune.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kda::loop {

namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

// The search measures nothing new when its time budget is this small: every configuration it
// needs is already in state.json, so it only rebuilds the map and the dispatcher.
constexpr double kNoNewMeasurements = 1e-9;

const stdfs::path* named(const std::vector<stdfs::path>& paths, const std::string& name) {
  for (const auto& p : paths)
    if (p.filename() == name) return &p;
  return nullptr;
}

// The run directory's parts, from the session's paths (the loop's layout: <run>/workspace,
// <run>/task, <run>/scratch, <run>/state.json).
struct RunPaths {
  stdfs::path run, workspace, task, scratch;
  stdfs::path source() const { return scratch / "tuner" / "source"; }
  stdfs::path search() const { return scratch / "tuner" / "search"; }
};

RunPaths paths_of(const agent::SessionRequest& req) {
  RunPaths p;
  p.workspace = req.workspace;
  p.run = req.workspace.parent_path();
  const auto* t = named(req.readable, "task");
  p.task = t != nullptr ? *t : p.run / "task";
  const auto* s = named(req.writable, "scratch");
  p.scratch = s != nullptr ? *s : p.run / "scratch";
  return p;
}

bool safe_relative(const std::string& rel) {
  const stdfs::path p(rel);
  if (p.empty() || p.is_absolute()) return false;
  for (const auto& part : p)
    if (part == "..") return false;
  return true;
}

// Writes solution `dir` (solution.json + its sources, and tunables.toml when asked) into `to`,
// file by file: files of `to` that the new solution does not list stay (deleting one would be a
// change outside the solution, which the verifier's diff-scope check rejects).
Result<std::vector<std::string>> copy_solution(const stdfs::path& dir, const stdfs::path& to, bool with_tunables) {
  KDA_ASSIGN_OR_RETURN(task::Solution s, task::load_solution(dir));
  std::vector<std::string> written;
  for (const auto& src : s.sources) {
    if (!safe_relative(src.path))
      return Status::bad_input(dir.string() + "/solution.json: source path '" + src.path + "' leaves the solution");
    KDA_RETURN_IF_ERROR(fs::ensure_dir((to / src.path).parent_path()));
    KDA_RETURN_IF_ERROR(fs::write_file_atomic(to / src.path, src.content));
    written.push_back(src.path);
  }
  json j = s.to_json();
  for (auto& src : j["sources"]) src.erase("content");
  KDA_RETURN_IF_ERROR(fs::ensure_dir(to));
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(to / "solution.json", j.dump(2) + "\n"));
  written.push_back("solution.json");
  if (with_tunables) {
    KDA_ASSIGN_OR_RETURN(std::string t, fs::read_file(dir / tune::kTunablesFile));
    KDA_RETURN_IF_ERROR(fs::write_file_atomic(to / tune::kTunablesFile, t));
    written.push_back(tune::kTunablesFile);
  }
  return written;
}

std::string param_values(const tune::Parameter& p) {
  std::string v;
  for (const auto& x : p.values) v += (v.empty() ? "" : ",") + tune::macro_text(x);
  return p.name + "={" + v + "}";
}

std::string config_label(const json& config) {
  auto c = tune::Config::from_json(config);
  return c.ok() ? c->label() : config.dump();
}

// The tune of one round, on the loop's dev workloads and timing, resumed from the run's search
// directory (a missing state.json starts empty; an existing one is never re-measured).
tune::TuneOptions tune_options(const LoopOptions& lo, const stdfs::path& search_dir) {
  tune::TuneOptions o;
  o.eval.runner_binary = eval::default_runner_binary();
  o.eval.workloads = "dev";  // what the loop verifies on
  o.eval.trials = lo.eval_trials;
  o.eval.iterations = lo.eval_iterations;
  o.eval.warmup = lo.eval_warmup;
  o.eval.sandbox = lo.sandbox;
  o.eval.cuda_arch = lo.cuda_arch;
  o.out_dir = search_dir;
  o.resume = true;
  o.strategy = "auto";
  return o;
}

// How many configurations the tunable solution in `source` declares.
Result<int> config_count(const stdfs::path& source, const task::TaskPack& pack) {
  KDA_ASSIGN_OR_RETURN(task::Solution base, task::load_solution(source));
  std::vector<std::string> srcs;
  for (const auto& s : base.sources) srcs.push_back(s.path);
  KDA_ASSIGN_OR_RETURN(auto t, tune::load_tunables(source, pack.definition, base.spec.entry_point, srcs));
  KDA_ASSIGN_OR_RETURN(auto configs, tune::enumerate_configs(t));
  return static_cast<int>(configs.size());
}

// The guard's routing of shapes outside every regime and its fallback, as the round reports them
// (one line each; nothing when the guard did not run).
std::string guard_text(const json& guard) {
  if (!guard.value("ran", false)) return {};
  std::string reach;
  if (guard.contains("reach")) reach = fmt::format(" (reach {:.2f})", guard.value("reach", 0.0));
  return fmt::format("Unseen shapes: {}{}: {}.\nFallback: {}: {}.\n", guard.value("unseen", std::string()), reach,
                     guard.value("unseen_why", std::string()), guard.value("fallback", std::string()),
                     guard.value("fallback_why", std::string()));
}

}  // namespace

// What a round writes into the workspace: the dispatcher round the dispatcher; every other round
// the faster of the two (the head-to-head decides where it ran, otherwise the two separate final
// geomeans; a coarse round that wrote its best single configuration alone was sometimes no faster
// than the baseline on host rmsnorm, its dispatcher 1.29x faster than that configuration
// head-to-head), except that where the guard (tune/guard.h) found the best single configuration
// slower than the baseline on a visible workload (by more than its tolerance, the rule its routes
// meet), only the dispatcher, which routes that shape elsewhere, is safe to emit. (With the loop's
// 0.8x floor as the bar instead, a best single the guard read at 0.85-0.95x on 16384 x 4 was
// written and the main job's final evaluation read it at 0.75x.)
bool emit_dispatcher(const tune::TuneResult& r, TunerStage stage) {
  const bool dispatcher_ok = r.dispatcher_passed && r.dispatcher_geomean_ms > 0;
  if (stage == TunerStage::kDispatcher || !dispatcher_ok) return dispatcher_ok;
  const double single_worst = r.guard.value("best_single_worst_ratio", 0.0);
  if (r.guard.value("ran", false) && single_worst > 0 && single_worst < 1 - tune::kGuardTolerance) return true;
  return r.dispatcher_vs_best_single > 0
             ? r.dispatcher_vs_best_single > 1
             : r.best_single_geomean_ms <= 0 || r.dispatcher_geomean_ms < r.best_single_geomean_ms;
}

namespace {

class TunerWriter final : public agent::Backend {
 public:
  std::string name() const override { return "tuner"; }

  Result<agent::SessionResult> run_session(const agent::SessionRequest& req) override {
    if (req.role != agent::Role::kWriter)
      return Status::bad_input("the tuner backend only writes (use it as --writer, not --reviewer)");
    agent::SessionResult result;
    turns_ = 0;
    emit_ = [&](agent::AgentEvent e) {
      if (req.on_event) req.on_event(e);
      result.events.push_back(std::move(e));
    };
    const RunPaths p = paths_of(req);
    auto pack = task::load_task_pack(p.task);
    if (!pack.ok()) return pack.status().with_context("tuner writer: the run's sealed task");
    if (req.phase == "plan") {
      KDA_ASSIGN_OR_RETURN(result.final_text, plan(req, p, *pack));
    } else if (req.phase == "round") {
      KDA_ASSIGN_OR_RETURN(result.final_text, round(req, p, *pack));
    } else {
      return Status::bad_input("tuner writer: unknown session phase '" + req.phase + "'");
    }
    result.turns = turns_ + 1;
    emit_({"message", true, {{"text", result.final_text.substr(0, 2000)}}});
    return result;
  }

 private:
  Result<std::string> plan(const agent::SessionRequest& req, const RunPaths& p, const task::TaskPack& pack) {
    // The starting point: the workspace's solution when it is tunable, else the pack's.
    stdfs::path from;
    std::string origin;
    std::error_code ec;
    if (stdfs::exists(p.workspace / tune::kTunablesFile, ec)) {
      from = p.workspace;
      origin = "the starting solution in the workspace (it has a tunables.toml)";
    } else if (stdfs::exists(p.task / "solutions" / "tunable" / tune::kTunablesFile, ec)) {
      from = p.task / "solutions" / "tunable";
      origin =
          "the pack's solutions/tunable/: the starting solution has no tunables.toml, so the tuner starts "
          "from the pack's tunable solution instead";
    } else {
      return Status::bad_input("tuner writer: nothing to tune: neither the workspace (" + p.workspace.string() +
                               ") nor the task (" + (p.task / "solutions/tunable").string() + ") has a tunables.toml");
    }
    stdfs::remove_all(p.source(), ec);
    KDA_ASSIGN_OR_RETURN(auto copied, copy_solution(from, p.source(), true));
    for (const auto& f : copied) file_event(p.source() / f);

    KDA_ASSIGN_OR_RETURN(task::Solution base, task::load_solution(p.source()));
    std::vector<std::string> srcs;
    for (const auto& s : base.sources) srcs.push_back(s.path);
    KDA_ASSIGN_OR_RETURN(tune::Tunables t,
                         tune::load_tunables(p.source(), pack.definition, base.spec.entry_point, srcs));
    KDA_ASSIGN_OR_RETURN(auto configs, tune::enumerate_configs(t));
    std::vector<const task::Workload*> dev;
    for (const auto& u : pack.dev_uuids)
      if (const auto* w = pack.workload(u)) dev.push_back(w);
    const auto regimes = tune::group_regimes(pack, dev, t.regimes);

    std::string tunables;
    for (const auto& prm : t.parameters) tunables += (tunables.empty() ? "" : "; ") + param_values(prm);
    std::string variants;
    for (const auto& v : t.variants) variants += (variants.empty() ? "" : ", ") + v.name;
    std::string regime_names;
    for (const auto& r : regimes) regime_names += (regime_names.empty() ? "" : ", ") + r.name;
    const int coarse = std::min<int>(static_cast<int>(configs.size()),
                                     std::max(kTunerCoarseMin, static_cast<int>(configs.size()) / kTunerCoarseDivisor));
    return fmt::format(
        "# Tuning plan (tuner writer, no LLM)\n\n"
        "Starting point: {} ({}).\n\n"
        "Tunables: {}\n"
        "Variants: {}\n"
        "Configurations: {} valid in the space (parameter constraints applied; axis constraints per workload).\n"
        "Regimes: {}\n\n{}\n"
        "Rounds (each claims only the tuner's own final timing against the interleaved baseline):\n"
        "1. coarse search: {} configurations sampled over the space; the best single configuration, or the "
        "dispatcher where it is faster head-to-head.\n"
        "2. per-regime refinement: the rest of the space; each regime's best configurations re-timed longer; the "
        "refined best single configuration, or the dispatcher where it is faster.\n"
        "3. dispatcher: each regime's winner compiled in, dispatched on the shape axes (never on data), the best "
        "single configuration as the fallback.\n\n"
        "Budget: each search gets a share of the run's remaining budget ({:.0f}% coarse, {:.0f}% refinement); the "
        "dispatcher round measures nothing new. Measurements persist in {}, so a restarted round re-measures "
        "nothing.\n"
        "Risks: host timer noise between screening and the official timing (the final timing, not the screening, is "
        "claimed); a regime with one workload may over-fit its configuration (the dispatcher keeps a generic "
        "fallback).\n",
        origin, from.string(), tunables, variants, configs.size(), regime_names, tune::regimes_table(regimes), coarse,
        kTunerCoarseShare * 100, kTunerRefineShare * 100, p.search().string());
  }

  Result<std::string> round(const agent::SessionRequest& req, const RunPaths& p, const task::TaskPack& pack) {
    std::error_code ec;
    if (!stdfs::exists(p.source() / tune::kTunablesFile, ec))
      return Status::failed("tuner writer: " + p.source().string() + " is missing (the plan phase copies it there)");
    const TunerStage stage = tuner_stage_for_round(req.index);
    RunState st;
    if (auto s = load_state(p.run / "state.json"); s.ok()) st = *s;
    const LoopOptions& lo = st.options;

    tune::TuneOptions o = tune_options(lo, p.search());
    int progress_lines = 0;
    o.progress = [this, &progress_lines](const std::string& line) {
      ++progress_lines;
      emit_({"message", true, {{"tune", line}}});
    };

    // The budget left to the run: the tighter of wall time and evaluator time, when either is set.
    std::optional<double> remaining_s;
    if (lo.hours > 0) remaining_s = lo.hours * 3600 - st.elapsed_s;
    if (lo.gpu_minutes > 0) remaining_s = std::min(remaining_s.value_or(1e300), lo.gpu_minutes * 60 - st.eval_s);
    auto share = [&](double f) { return remaining_s ? std::max(kNoNewMeasurements, *remaining_s * f / 60) : 0.0; };

    KDA_ASSIGN_OR_RETURN(const int total, config_count(p.source(), pack));
    std::string stage_text;
    switch (stage) {
      case TunerStage::kCoarse:
        o.max_configs = std::min(total, std::max(kTunerCoarseMin, total / kTunerCoarseDivisor));
        o.max_minutes = share(kTunerCoarseShare);
        stage_text = fmt::format("coarse search (round {}): {} of {} configurations", req.index, o.max_configs, total);
        break;
      case TunerStage::kRefine:
        o.max_minutes = share(kTunerRefineShare);
        stage_text =
            fmt::format("per-regime refinement (round {}): the whole space of {} configurations", req.index, total);
        break;
      case TunerStage::kDispatcher:
      case TunerStage::kDone:
        o.max_minutes = kNoNewMeasurements;
        stage_text = fmt::format("{} (round {}): from the measurements so far, nothing new measured",
                                 stage == TunerStage::kDispatcher ? "dispatcher" : "final pick", req.index);
        break;
    }
    ++turns_;
    emit_({"command",
           true,
           {{"tune",
             {{"stage", tuner_stage_name(stage)},
              {"max_configs", o.max_configs},
              {"max_minutes", o.max_minutes},
              {"out_dir", o.out_dir.string()},
              {"source", p.source().string()}}}}});
    auto r = tune::tune(pack, p.source(), o);
    const TunerStage next_stage = tuner_stage_for_round(req.index + 1);
    if (!r.ok()) {
      // What the tuner could not do is the round's outcome, not a backend failure: the workspace
      // stays the incumbent, nothing is claimed.
      emit_({"error", false, {{"tune", r.status().message()}}});
      const std::string summary =
          fmt::format("Stage: {}.\nThe tuner failed: {}\nThe workspace is unchanged; no claim.\nNEXT: {}\n", stage_text,
                      r.status().message(), stage == TunerStage::kDone ? "none" : tuner_stage_name(next_stage));
      finish(req, summary, json::array());
      return summary;
    }

    // What goes into the workspace (emit_dispatcher) and what it measured.
    const bool use_dispatcher = emit_dispatcher(*r, stage);
    const stdfs::path chosen = use_dispatcher ? r->dispatcher_dir : r->best_single_dir;
    const double chosen_ms = use_dispatcher ? r->dispatcher_geomean_ms : r->best_single_geomean_ms;
    KDA_ASSIGN_OR_RETURN(auto written, copy_solution(chosen, p.workspace, false));
    for (const auto& f : written) file_event(p.workspace / f);

    std::string table;
    for (const auto& c : r->map)
      table += fmt::format("  {:<50} {:<36} {:.6g} ms [{:.6g}, {:.6g}] over {} workload(s)\n", c.regime,
                           config_label(c.config), c.latency_ms, c.ci_low_ms, c.ci_high_ms, c.workloads.size());
    json claims = json::array();
    std::string claim_text = "No claim: the tuner has no final timing against the baseline.";
    if (r->final_timing && r->baseline_geomean_ms > 0 && chosen_ms > 0) {
      // The lower end of the final timing's 95 % interval where it has one: a number the official
      // evaluation will reproduce (a point estimate, 3.226x, was measured at 2.435x and rejected as
      // false; the loop's check takes a claim below what it measures as conservative).
      const double speedup = r->baseline_geomean_ms / chosen_ms;
      const double low = use_dispatcher ? r->dispatcher_speedup_ci_low : r->best_single_speedup_ci_low;
      const double claimed = low > 0 ? std::min(low, speedup) : speedup;
      claims.push_back({{"metric", "geomean_speedup"}, {"value", claimed}});
      claim_text = fmt::format(
          "Claim: geomean_speedup {:.4f}, the lower end of the final timing's 95 % interval (point estimate {:.4f} = "
          "baseline {:.6g} ms / {:.6g} ms; the tuner's final timing on the dev workloads, baseline interleaved).",
          claimed, speedup, r->baseline_geomean_ms, chosen_ms);
    }
    const std::string next = stage == TunerStage::kDone || stage == TunerStage::kDispatcher
                                 ? std::string("none")
                                 : std::string(tuner_stage_name(next_stage));
    const std::string summary = fmt::format(
        "Stage: {}.\n{} of {} configurations measured so far ({} failed), {:.1f} s this round.\n"
        "Per-regime choice (screening geomean):\n{}"
        "{}"
        "Final timing: best single configuration {:.6g} ms, dispatcher {:.6g} ms{}, baseline {:.6g} ms{}.\n"
        "Workspace now holds: the {} ({} file(s) written).\n{}\nNEXT: {}\n",
        stage_text, r->configs_measured, r->configs_total, r->configs_failed, r->wall_s, table, guard_text(r->guard),
        r->best_single_geomean_ms, r->dispatcher_geomean_ms, r->dispatcher_passed ? "" : " (did NOT pass)",
        r->baseline_geomean_ms,
        r->dispatcher_vs_best_single > 0
            ? fmt::format("; head-to-head, interleaved: the dispatcher at {:.3f}x the best single's speed",
                          r->dispatcher_vs_best_single)
            : "",
        use_dispatcher ? "dispatcher" : "best single configuration", written.size(), claim_text, next);
    finish(req, summary, claims);
    return summary;
  }

  void finish(const agent::SessionRequest& req, const std::string& summary, const json& claims) {
    const json args = {{"summary", summary}, {"claims", claims}};
    agent::ToolOutcome out{"no tools in this session", true, {}};
    if (req.tools != nullptr) out = req.tools->call("finish_round", args);
    ++turns_;
    emit_({"tool_call",
           !out.is_error,
           {{"name", "finish_round"}, {"arguments", args}, {"result", out.text.substr(0, 2000)}}});
  }

  void file_event(const stdfs::path& file) {
    auto h = sha256_file_hex(file);
    emit_({"file_write", h.ok(), {{"path", file.string()}, {"sha256", h.ok() ? *h : ""}}});
  }

  std::function<void(agent::AgentEvent)> emit_;
  int turns_ = 0;
};

}  // namespace

const char* tuner_stage_name(TunerStage s) {
  switch (s) {
    case TunerStage::kCoarse: return "coarse";
    case TunerStage::kRefine: return "refine";
    case TunerStage::kDispatcher: return "dispatcher";
    case TunerStage::kDone: return "none";
  }
  return "none";
}

TunerStage tuner_stage_for_round(int round) {
  if (round <= 1) return TunerStage::kCoarse;
  if (round == 2) return TunerStage::kRefine;
  if (round == 3) return TunerStage::kDispatcher;
  return TunerStage::kDone;
}

Result<std::unique_ptr<agent::Backend>> make_tuner_writer(const std::string& arg) {
  if (!arg.empty() && arg != "auto")
    return Status::bad_input("tuner backend: expected 'tuner' (got 'tuner:" + arg + "')");
  return std::unique_ptr<agent::Backend>(new TunerWriter());
}

}  // namespace kda::loop
