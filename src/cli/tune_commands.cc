// kda tune: searches a tunable solution's configurations on the official evaluator and writes the
// performance map and a shape-dispatching solution (src/tune, docs/tune.md).
#include <algorithm>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.h"
#ifdef KDA_HAVE_EXEC
#include "cli/eval_on.h"
#endif
#include "eval/tool_run.h"
#include "task/task_pack.h"
#include "tune/tune.h"

namespace kda::cli {

namespace {

#ifdef KDA_HAVE_EXEC
// kda tune --on: every measurement a job for the pool, each rung's batch spread over its devices with
// the rung's own timing (kda_timing), every evaluation in fresh processes on the servers.
Status tune_on(const Args& args, Io& io, const task::TaskPack& pack, tune::TuneOptions& o,
               std::unique_ptr<Pool>& pool) {
  KDA_RETURN_IF_ERROR(
      refuse_with_on(args, {"seed", "no-sandbox", "arch", "no-screen"},
                     "the servers evaluate as `kda eval` does by default, each measurement in fresh processes"));
  std::vector<std::string> visible;
  for (const auto& w : pack.workloads) visible.push_back(w.uuid);
  KDA_ASSIGN_OR_RETURN(pool, Pool::open(args, io, pack, visible, "kda tune"));
  o.parallelism = pool->devices_hint();
  o.evaluate_many = [&pack,
                     p = pool.get()](const std::vector<tune::EvalJob>& jobs) -> Result<std::vector<eval::EvalReport>> {
    std::vector<PoolJob> pj;
    for (const auto& j : jobs) {
      KDA_ASSIGN_OR_RETURN(std::vector<std::string> uuids, eval::selected_workload_uuids(pack, j.options.workloads));
      pj.push_back({.solution = j.solution, .uuids = std::move(uuids), .timing = pool_timing(j.options)});
    }
    KDA_ASSIGN_OR_RETURN(std::vector<OnResult> results, p->run(pj));
    std::vector<eval::EvalReport> out;
    for (auto& r : results) {
      if (!r.complete)
        return Status::failed(fmt::format("a task of the pool failed: {}", r.dispatch["failed_tasks"].dump()));
      out.push_back(std::move(r.report));
    }
    return out;
  };
  return {};
}
#endif

int run_tune(const Args& args, Io& io) {
  auto pack = task::load_task_pack(args.value_or("task", ""));
  if (!pack.ok()) return fail(io, "kda tune", pack.status());
  tune::TuneOptions o;
  const std::filesystem::path solution = args.positional("solution");
  // Default outside the pack: a pack sealed by a run must not change under it.
  o.out_dir = args.value_or(
      "out",
      (std::filesystem::path("kda-tune") / std::filesystem::absolute(solution).lexically_normal().filename()).string());
  o.eval.runner_binary = eval::default_runner_binary();
  o.eval.workloads = args.value_or("workloads", "dev");
  o.eval.sandbox = !args.flag("no-sandbox");
  o.eval.cuda_arch = args.value_or("arch", "90a");
  o.resume = args.flag("resume");
  o.strategy = args.value_or("strategy", "auto");
  o.final_eval = !args.flag("no-final");
  o.guard = !args.flag("no-guard");
  o.screen = !args.flag("no-screen");
  if (auto r = args.value("regimes")) o.regimes_file = *r;
  struct IntOpt {
    const char* name;
    int* target;
    long long min;
  };
  for (const IntOpt& opt :
       {IntOpt{"max-configs", &o.max_configs, 0}, IntOpt{"jobs", &o.jobs, 0},
        IntOpt{"screen-iterations", &o.screen_iterations, 1}, IntOpt{"screen-trials", &o.screen_trials, 1}}) {
    auto v = args.integer(opt.name);
    if (!v.ok()) return fail(io, "kda tune", v.status());
    if (!*v) continue;
    if (**v < opt.min || **v > 1000000)
      return fail(io, "kda tune", Status::bad_input(fmt::format("--{} must be >= {}", opt.name, opt.min)));
    *opt.target = static_cast<int>(**v);
  }
  auto seed = args.integer("seed");
  if (!seed.ok()) return fail(io, "kda tune", seed.status());
  if (*seed) o.eval.seed = static_cast<uint64_t>(**seed);
  auto minutes = args.number("max-minutes");
  if (!minutes.ok() || (*minutes && **minutes < 0))
    return fail(io, "kda tune", Status::bad_input("--max-minutes: expected a non-negative number of minutes"));
  if (*minutes) o.max_minutes = **minutes;
  const bool quiet = args.flag("quiet");
  o.progress = [&io, quiet](const std::string& line) {
    if (!quiet) io.err << "kda tune: " << line << "\n";
  };
#ifdef KDA_HAVE_EXEC
  std::unique_ptr<Pool> pool;  // --on: outlives the tuning (its local server stops with it)
  if (args.given("on"))
    if (Status st = tune_on(args, io, *pack, o, pool); !st.ok()) return fail(io, "kda tune", st);
#else
  if (args.given("on"))
    return fail(io, "kda tune",
                Status::bad_input("--on: this kda was built without the dispatcher (SQLite and cpp-httplib)"));
#endif
  auto result = tune::tune(*pack, solution, o);
  if (!result.ok()) return fail(io, "kda tune", result.status());
  if (args.flag("json")) {
    io.out << result->to_json().dump(2) << "\n";
  } else {
    size_t rw = 6, cw = 13;
    for (const auto& c : result->map) {
      rw = std::max(rw, c.regime.size());
      cw = std::max(cw, c.config.value("label", "").size());
    }
    io.out << fmt::format("{:<{}}  {:<{}}  {:>12}\n", "regime", rw, "configuration", cw, "latency_ms");
    for (const auto& c : result->map)
      io.out << fmt::format("{:<{}}  {:<{}}  {:>12.6g}\n", c.regime, rw, c.config.value("label", ""), cw, c.latency_ms);
    io.out << fmt::format("{}best single {:.6g} ms, dispatcher {:.6g} ms (geomeans over the tuned workloads, {})\n",
                          result->baseline_geomean_ms > 0
                              ? fmt::format("baseline {:.6g} ms, ", result->baseline_geomean_ms)
                              : std::string(),
                          result->best_single_geomean_ms, result->dispatcher_geomean_ms,
                          result->final_timing ? "final evaluation" : "screening");
    io.out << "dispatcher: " << result->dispatcher_dir.string() << "\nbest single: " << result->best_single_dir.string()
           << "\nmap: " << (o.out_dir / "map.md").string() << "\n";
  }
  return result->dispatcher_passed ? kExitOk : kExitFailed;
}

}  // namespace

CommandSpec tune_command() {
  return {
      .name = "tune",
      .summary = "Tune a solution's tunables.toml parameters per shape regime and generate a dispatching solution",
      .description =
          "Reads <solution>/tunables.toml (parameters, constraints, variants, regimes), groups the tuned workloads "
          "into\n"
          "regimes, compiles the configurations in parallel through the build cache, checks and times each with the\n"
          "official evaluator (exhaustive for small spaces, successive halving for large ones), and writes to --out:\n"
          "state.json (every measurement, for --resume), map.json and map.md (regime -> best configuration, latency\n"
          "with its 95% interval, runners-up), best_single/ and dispatcher/ (plain solution directories `kda eval`\n"
          "evaluates unchanged). Progress on stderr. Exit 0 when the dispatcher passed, 1 when nothing passed, 2 for\n"
          "bad input (tunables.toml errors name file, line and parameter), 3 internal.",
      .positionals = {{.name = "solution",
                       .help = "tunable solution directory (solution.json + tunables.toml + sources)"}},
      .options =
          {{.name = "task", .short_name = 't', .metavar = "DIR", .help = "task pack directory", .env = "KDA_TASK"},
           {.name = "out",
            .short_name = 'o',
            .metavar = "DIR",
            .help = "output directory (default ./kda-tune/<solution directory name>)"},
           {.name = "workloads",
            .short_name = 'w',
            .metavar = "SET",
            .help = "tuned workloads: all | dev | holdout | uuid[,uuid...]",
            .default_value = "dev"},
           {.name = "strategy", .metavar = "S", .help = "auto | exhaustive | halving | model", .default_value = "auto"},
           {.name = "max-configs", .metavar = "N", .help = "at most N configurations (0: all)"},
           {.name = "max-minutes", .metavar = "M", .help = "stop measuring after M minutes of wall time (0: none)"},
           {.name = "resume", .help = "continue from <out>/state.json; nothing is measured twice"},
           {.name = "regimes", .metavar = "FILE", .help = "[[regime]] tables overriding the automatic grouping"},
           {.name = "jobs", .short_name = 'j', .metavar = "N", .help = "parallel compiles (0: all cores)"},
           {.name = "screen-iterations",
            .metavar = "N",
            .help = "timed iterations per trial at the first rung (x3 per rung)",
            .default_value = "10"},
           {.name = "screen-trials",
            .metavar = "N",
            .help = "trials at the first rung (+1 per rung)",
            .default_value = "1"},
           {.name = "no-final", .help = "skip the final evaluation of best single and dispatcher"},
           {.name = "no-guard",
            .help = "do not screen the finalists and the baseline on every visible workload (a regime may then be "
                    "routed where it is slower than the baseline)"},
           {.name = "no-screen",
            .help = "one official evaluation per measurement (fresh processes each) "
                    "instead of one screening session"},
           {.name = "seed", .metavar = "N", .help = "master seed for every evaluation (default: fresh secret seeds)"},
           {.name = "no-sandbox", .help = "run candidates without Landlock/seccomp (debugging only)"},
           {.name = "arch", .metavar = "SM", .help = "CUDA architecture for nvcc", .default_value = "90a"},
           {.name = "on",
            .metavar = "POOL",
            .help = "measure on kda serve instances, each rung's configurations spread over their devices: "
                    "local[:DEVICES] (one started here), server URLs, or an address file or directory of them "
                    "(docs/scale.md)"},
           {.name = "token-file", .metavar = "FILE", .help = "--on: the servers' bearer token"},
           {.name = "queue",
            .metavar = "FILE",
            .help = "--on: keep the task queue in FILE (SQLite); a rerun with the same FILE finds what it finished"},
           {.name = "quiet", .short_name = 'q', .help = "no progress on stderr"},
           json_option()},
      .run = run_tune,
  };
}

}  // namespace kda::cli
