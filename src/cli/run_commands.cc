// kda run: the plan -> implement -> verify -> review loop (src/loop), and --resume.
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#ifdef KDA_HAVE_EXEC
#include "cli/eval_on.h"
#endif
#include "eval/tool_run.h"
#include "loop/backend_factory.h"
#include "loop/run_loop.h"
#include "task/task_pack.h"

namespace kda::cli {

namespace {

namespace stdfs = std::filesystem;

stdfs::path default_run_dir(const stdfs::path& task) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  std::string name = stdfs::path(task).lexically_normal().filename().string();
  if (name.empty()) name = stdfs::path(task).lexically_normal().parent_path().filename().string();
  return stdfs::path("kda-runs") / (name + "-" + stamp);
}

// Numeric options: each read, checked against its minimum and handed to `set` when given; a bad
// value is reported naming the option.
struct IntOpt {
  const char* name;
  std::function<void(long long)> set;
  long long min;
};
struct NumOpt {
  const char* name;
  std::function<void(double)> set;  // values must be >= 0
};
Status read_options(const Args& args, const std::vector<IntOpt>& ints, const std::vector<NumOpt>& nums) {
  for (const auto& i : ints) {
    auto v = args.integer(i.name);
    if (!v.ok()) return v.status();
    if (!*v) continue;
    if (**v < i.min) return Status::bad_input(fmt::format("--{}: must be >= {}", i.name, i.min));
    i.set(**v);
  }
  for (const auto& n : nums) {
    auto v = args.number(n.name);
    if (!v.ok()) return v.status();
    if (!*v) continue;
    if (**v < 0) return Status::bad_input(fmt::format("--{}: must be >= 0", n.name));
    n.set(**v);
  }
  return {};
}

// Reads the numeric options of a new run into `o`.
Status read_numbers(const Args& args, loop::LoopOptions& o) {
  return read_options(
      args,
      {
          {"max-rounds", [&](long long v) { o.max_rounds = static_cast<int>(v); }, 1},
          {"budget-tokens", [&](long long v) { o.budget_tokens = v; }, 0},
          {"eval-trials", [&](long long v) { o.eval_trials = static_cast<int>(v); }, 1},
          {"eval-iterations", [&](long long v) { o.eval_iterations = static_cast<int>(v); }, 1},
          {"eval-warmup", [&](long long v) { o.eval_warmup = static_cast<int>(v); }, 0},
          {"final-trials", [&](long long v) { o.final_trials = static_cast<int>(v); }, 1},
          {"plan-reviews", [&](long long v) { o.plan_reviews = static_cast<int>(v); }, 1},
          {"alignment-every", [&](long long v) { o.alignment_every = static_cast<int>(v); }, 0},
          {"evals-per-round", [&](long long v) { o.max_evals_per_round = static_cast<int>(v); }, 0},
          {"max-profiles", [&](long long v) { o.max_profiles_per_round = static_cast<int>(v); }, 0},
          {"confirm-pairs", [&](long long v) { o.confirm_pairs = static_cast<int>(v); }, 2},
          {"lanes", [&](long long v) { o.lanes = static_cast<int>(std::min<long long>(v, 1 << 20)); }, 1},
      },
      {{"hours", [&](double v) { o.hours = v; }},
       {"budget-usd", [&](double v) { o.budget_usd = v; }},
       {"gpu-minutes", [&](double v) { o.gpu_minutes = v; }},
       {"claim-tolerance", [&](double v) { o.claim_tolerance = v; }},
       {"min-improvement", [&](double v) { o.min_improvement = v; }}});
}

// The budgets a resumed run may change: only those the user gave are set (a default such as
// --max-rounds 10 is a new run's, and must not extend, or reopen, a resumed one).
Status read_budgets(const Args& args, loop::BudgetChange& b) {
  auto given = [&](const char* name, auto set) {
    return [&args, name, set](auto v) {
      if (args.given(name)) set(v);
    };
  };
  return read_options(args,
                      {{"max-rounds", given("max-rounds", [&](long long v) { b.max_rounds = static_cast<int>(v); }), 1},
                       {"budget-tokens", given("budget-tokens", [&](long long v) { b.budget_tokens = v; }), 0}},
                      {{"hours", given("hours", [&](double v) { b.hours = v; })},
                       {"budget-usd", given("budget-usd", [&](double v) { b.budget_usd = v; })},
                       {"gpu-minutes", given("gpu-minutes", [&](double v) { b.gpu_minutes = v; })}});
}

void print_outcome(const loop::RunOutcome& o, std::ostream& out) {
  out << fmt::format("run: {}\n", o.run_dir.string());
  out << fmt::format("status: {}{}\n", o.phase, o.stop_reason.empty() ? "" : " (" + o.stop_reason + ")");
  out << fmt::format("incumbent: {} ({:.3f}x geomean vs the baseline){}\n", o.incumbent, o.incumbent_speedup,
                     o.criteria_met ? ", acceptance criteria met on all workloads" : "");
  out << fmt::format("rounds: {}\n", o.rounds);
  if (!o.round_rows.empty()) {
    out << fmt::format("  {:>5}  {:<12} {:<9} {:<14} {:>9}  {}\n", "round", "candidate", "outcome", "reason", "geomean",
                       "reviewer");
    for (const auto& r : o.round_rows) {
      const bool accepted = r.value("accepted", false);
      const std::string review = r.value("review", "");
      out << fmt::format("  {:>5}  {:<12} {:<9} {:<14} {:>8.3f}x  {}\n", r.value("round", 0), r.value("candidate", ""),
                         accepted ? "accepted" : "rejected", r.value("reason", ""), r.value("geomean", 0.0),
                         review.empty() ? "-" : review);
      if (!accepted) out << "         " << r.value("detail", "").substr(0, 200) << "\n";
    }
  }
  out << fmt::format("final solution: {}\n", (o.run_dir / "final" / "solution.json").string());
}

#ifdef KDA_HAVE_EXEC
// kda run --on POOL: every evaluation of the run (the starting solution's, the writer's evaluate tool,
// each lane's verification and head-to-head, the completion check) goes to the pool, a task per
// workload; the pool opens at the first evaluation, on the run's sealed copy of the pack.
loop::EvaluateFn pool_evaluate(const Args& args, Io& io, std::shared_ptr<std::unique_ptr<Pool>> pool) {
  return [&args, &io, pool](const task::TaskPack& pack, const task::Solution& s,
                            const eval::EvalOptions& o) -> Result<eval::EvalReport> {
    if (!*pool) {
      std::vector<std::string> visible;
      for (const auto& w : pack.workloads) visible.push_back(w.uuid);
      KDA_ASSIGN_OR_RETURN(*pool, Pool::open(args, io, pack, visible, "kda run"));
    }
    KDA_ASSIGN_OR_RETURN(std::vector<std::string> uuids, eval::selected_workload_uuids(pack, o.workloads));
    KDA_ASSIGN_OR_RETURN(OnResult r, (*pool)->evaluate(s, uuids, pool_timing(o)));
    if (!r.complete)
      return Status::failed(fmt::format("a task of the pool failed: {}", r.dispatch["failed_tasks"].dump()));
    return std::move(r.report);
  };
}

// The lanes of a round as one batch of the same pool (opened by the first evaluation, which the run's
// starting solution always is): every lane's workloads queued before the dispatch.
loop::EvaluateManyFn pool_evaluate_many(std::shared_ptr<std::unique_ptr<Pool>> pool) {
  return [pool](const task::TaskPack& pack, const std::vector<task::Solution>& solutions,
                const eval::EvalOptions& o) -> Result<std::vector<eval::EvalReport>> {
    if (!*pool) return Status::internal("the pool is opened by the run's first evaluation");
    KDA_ASSIGN_OR_RETURN(std::vector<std::string> uuids, eval::selected_workload_uuids(pack, o.workloads));
    KDA_ASSIGN_OR_RETURN(std::vector<OnResult> results, (*pool)->evaluate_many(solutions, uuids, pool_timing(o)));
    std::vector<eval::EvalReport> reports;
    for (auto& r : results) {
      if (!r.complete)
        return Status::failed(fmt::format("a task of the pool failed: {}", r.dispatch["failed_tasks"].dump()));
      reports.push_back(std::move(r.report));
    }
    return reports;
  };
}
#endif

int run_run(const Args& args, Io& io) {
  loop::LoopEnv env;
  env.runner_binary = eval::default_runner_binary();
  env.ncu = args.value_or("ncu", "");
#ifdef KDA_HAVE_EXEC
  auto pool = std::make_shared<std::unique_ptr<Pool>>();  // --on: opened at the first evaluation
  if (args.given("on")) {
    if (Status st = refuse_with_on(args, {"no-sandbox", "arch", "max-profiles"},
                                   "the servers evaluate as `kda eval` does by default (and profile nothing)");
        !st.ok()) {
      io.err << "kda run: " << st.message() << "\n";
      return kExitBadInput;
    }
    env.evaluate = pool_evaluate(args, io, pool);
    env.evaluate_many = pool_evaluate_many(pool);
  }
#else
  if (args.given("on")) {
    io.err << "kda run: --on needs kda built with SQLite and cpp-httplib (scripts/install-deps.sh installs them)\n";
    return kExitBadInput;
  }
#endif
  const bool quiet = args.flag("quiet");
  env.status = [&io, quiet](const std::string& line) {
    if (!quiet) io.err << line << "\n" << std::flush;
  };
  Result<loop::RunOutcome> outcome = Status::internal("unset");
  if (auto resume = args.value("resume")) {
    if (!args.positional("task").empty()) {
      io.err << "kda run: --resume continues an existing run; do not name a task\n";
      return kExitBadInput;
    }
    // Budgets may change on resume (a stopped run continues when they allow); nothing else may.
    loop::BudgetChange budgets;
    if (Status st = read_budgets(args, budgets); !st.ok()) {
      io.err << "kda run: " << st.message() << "\n";
      return kExitBadInput;
    }
    outcome = loop::resume_run(*resume, env, budgets);
  } else {
    loop::LoopOptions o;
    o.task = args.positional("task");
    if (o.task.empty()) {
      io.err << "kda run: missing <task> (or --resume <run-dir>)\n";
      return kExitBadInput;
    }
    o.writer = args.value_or("writer", "");
    o.reviewer = args.value_or("reviewer", "");
    if (o.writer.empty() || o.reviewer.empty()) {
      io.err << "kda run: --writer and --reviewer are required\n";
      return kExitBadInput;
    }
    o.target = args.value_or("target", "1.0");
    o.start = args.value_or("start", "");
    o.sandbox = !args.flag("no-sandbox");
    o.cuda_arch = args.value_or("arch", "90a");
    if (Status st = read_numbers(args, o); !st.ok()) {
      io.err << "kda run: " << st.message() << "\n";
      return kExitBadInput;
    }
    if (o.lanes > loop::kMaxLanes) {
      io.err << fmt::format("kda run: --lanes: at most {} writer lanes per round\n", loop::kMaxLanes);
      return kExitBadInput;
    }
    const stdfs::path dir = args.value_or("run-dir", default_run_dir(o.task).string());
    outcome = loop::start_run(dir, o, env);
  }
  if (!outcome.ok()) {
    return fail(io, "kda run", outcome.status());
  }
  if (args.flag("json"))
    io.out << outcome->to_json().dump(2) << "\n";
  else
    print_outcome(*outcome, io.out);
  return outcome->phase == "done" ? kExitOk : kExitFailed;
}

}  // namespace

CommandSpec run_command() {
  std::string kinds;
  for (const auto& k : loop::known_backend_kinds()) kinds += (kinds.empty() ? "" : ",\n  ") + k;
  return {
      .name = "run",
      .summary = "Run the plan -> implement -> verify -> review agent loop on a task (writer + reviewer)",
      .description =
          "Creates a run directory (sealed copy of the task, git workspace with the starting solution, kda-owned\n"
          "state, hash-chained audit log), measures the starting solution, lets the writer plan and the reviewer\n"
          "challenge the plan, freezes plan and acceptance criteria, then runs rounds: the writer works and calls\n"
          "finish_round, kda verifies (official evaluation on fresh seeds, protected files, diff scope, claims),\n"
          "the reviewer decides. The incumbent changes only on a verified improvement the reviewer accepts.\n"
          "Exit 0 when the run completed with the acceptance criteria met, 1 when it stopped (budget, STOP,\n"
          "stalls, violation) with the best verified incumbent in <run>/final. A killed run continues with\n"
          "--resume <run-dir>. See docs/run.md.\n"
          "Backends (--writer/--reviewer): " +
          kinds + ".",
      .positionals = {{.name = "task", .help = "task pack directory (omit with --resume)", .required = false}},
      .options =
          {{.name = "writer", .metavar = "SPEC", .help = "writer backend, e.g. scripted:writer.json"},
           {.name = "reviewer", .metavar = "SPEC", .help = "reviewer backend"},
           {.name = "target",
            .metavar = "SPEC",
            .help = "acceptance: geomean speedup vs the baseline, optional regimes: 1.5x,M>=128:2x",
            .default_value = "1.0"},
           {.name = "start", .metavar = "SOLUTION", .help = "starting solution (default: the pack's baseline)"},
           {.name = "run-dir", .metavar = "DIR", .help = "run directory (default: kda-runs/<task>-<utc time>)"},
           {.name = "resume",
            .metavar = "DIR",
            .help = "continue the run in DIR (after a crash or kill); with --max-rounds, --hours, --budget-tokens, "
                    "--budget-usd or --gpu-minutes, extend a run stopped by a budget"},
           {.name = "max-rounds", .metavar = "N", .help = "rounds before the run stops", .default_value = "10"},
           {.name = "hours", .metavar = "H", .help = "wall-clock budget in hours (0: none)"},
           {.name = "budget-tokens", .metavar = "N", .help = "input+output token budget (0: none)"},
           {.name = "budget-usd", .metavar = "X", .help = "money budget in USD (0: none)"},
           {.name = "gpu-minutes", .metavar = "M", .help = "evaluator time budget in minutes (0: none)"},
           {.name = "eval-trials", .metavar = "N", .help = "override the pack's timing trials for every evaluation"},
           {.name = "eval-iterations", .metavar = "N", .help = "override the pack's timed iterations"},
           {.name = "eval-warmup", .metavar = "N", .help = "override the pack's warmup iterations"},
           {.name = "final-trials",
            .metavar = "N",
            .help = "trials of the completion check (default: twice the round trials)"},
           {.name = "plan-reviews",
            .metavar = "N",
            .help = "plan-review rounds before the plan is frozen",
            .default_value = "2"},
           {.name = "alignment-every", .metavar = "K", .help = "a full alignment review every K rounds (0: never)"},
           {.name = "claim-tolerance",
            .metavar = "X",
            .help = "relative tolerance of claims vs kda's measurement",
            .default_value = "0.25"},
           {.name = "min-improvement",
            .metavar = "X",
            .help = "relative geomean gain over the incumbent that counts as an improvement",
            .default_value = "0.02"},
           {.name = "confirm-pairs",
            .metavar = "N",
            .help = "evaluations in fresh processes that confirm an improvement head-to-head against the "
                    "incumbent (the 95 % interval over them must lie above 1)",
            .default_value = "3"},
           {.name = "lanes",
            .metavar = "N",
            .help = "writer lanes per round: N writer sessions at once from the same incumbent, each in a work tree of "
                    "its own and verified on its own; "
                    "the best verified lane is the round's candidate (at most 8)",
            .default_value = "1"},
           {.name = "on",
            .metavar = "POOL",
            .help = "evaluate on kda serve instances, a task per workload: local[:DEVICES] (one started here on the "
                    "run's sealed pack), server URLs, or an address file or directory of them (docs/scale.md); "
                    "give it again with --resume"},
           {.name = "token-file", .metavar = "FILE", .help = "--on: the servers' bearer token"},
           {.name = "evals-per-round",
            .metavar = "N",
            .help = "writer evaluate-tool calls per round",
            .default_value = "8"},
           {.name = "max-profiles",
            .metavar = "N",
            .help = "writer profile-tool (Nsight Compute) calls per round; 0: no profile tool (profiled code "
                    "runs unsandboxed)",
            .default_value = "0"},
           {.name = "ncu",
            .metavar = "PATH",
            .help = "ncu for the profile tool (default: ncu on PATH, else /usr/local/cuda/bin/ncu)",
            .env = "KDA_NCU"},
           {.name = "no-sandbox", .help = "evaluate without Landlock/seccomp (debugging only)"},
           {.name = "arch", .metavar = "SM", .help = "CUDA architecture for nvcc", .default_value = "90a"},
           {.name = "quiet", .short_name = 'q', .help = "no live status on stderr"},
           json_option()},
      .run = run_run,
  };
}

}  // namespace kda::cli
