// kda eval: the official evaluator on the command line.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "build/builder.h"
#include "cli/commands.h"
#include "cli/solution_params.h"
#ifdef KDA_HAVE_EXEC
#include "cli/eval_on.h"
#endif
#include "eval/evaluator.h"
#include "eval/tool_run.h"
#include "eval/torch_oracle.h"
#include "task/task_pack.h"
#include "util/fs.h"

namespace kda::cli {

namespace {

std::string ms_text(double ms) {
  if (ms >= 100) return fmt::format("{:.1f} ms", ms);
  if (ms >= 1) return fmt::format("{:.3f} ms", ms);
  return fmt::format("{:.2f} us", ms * 1000);
}

std::string axes_text(const nlohmann::json& axes) {
  std::string s;
  for (const auto& [k, v] : axes.items()) s += (s.empty() ? "" : " ") + k + "=" + v.dump();
  return s;
}

// The rate a latency means for the pack's roofline formulas ("812 GB/s", "0.41 TFLOP/s") and, on
// the GPU, the fraction of the roofline floor reached; "" where the pack has no formula.
std::string achieved_text(const task::TaskPack& pack, const eval::WorkloadResult& w) {
  if (w.latency_ms <= 0) return "";
  std::map<std::string, int64_t> axes;
  for (const auto& [k, v] : w.axes.items())
    if (v.is_number_integer()) axes[k] = v.get<int64_t>();
  std::string s;
  const double seconds = w.latency_ms * 1e-3;
  if (pack.settings.roofline_bytes)
    if (auto b = pack.settings.roofline_bytes->evaluate(axes); b.ok() && *b > 0)
      s += fmt::format("{:.3g} GB/s", *b / seconds / 1e9);
  if (pack.settings.roofline_flops)
    if (auto f = pack.settings.roofline_flops->evaluate(axes); f.ok() && *f > 0)
      s += fmt::format("{}{:.3g} TFLOP/s", s.empty() ? "" : ", ", *f / seconds / 1e12);
  if (w.roofline_floor_ms && *w.roofline_floor_ms > 0)
    s += fmt::format(" ({:.0f} % of floor)", 100 * *w.roofline_floor_ms / w.latency_ms);
  // The error budget: the share of the pack's tolerance the worst element used (correctness trials).
  if (const auto it = w.kda.find("tolerance_used"); it != w.kda.end() && it->is_number())
    s += fmt::format("{}{:.3g} % of tol", s.empty() ? "" : "; ", 100 * it->get<double>());
  if (const auto it = w.kda.find("baseline_tolerance_used"); it != w.kda.end() && it->is_number())
    s += fmt::format(" (baseline {:.3g} %)", 100 * it->get<double>());
  return s;
}

void print_table(const task::TaskPack& pack, const eval::EvalReport& r, std::ostream& out, bool explain) {
  // Each latency with its spread over the timed calls (p10-p90); workloads by uuid prefix (accepted
  // by --workloads) and axes.
  out << fmt::format("{:<9} {:<26} {:<20} {:>10} {:>21} {:>10} {:>8}  {}\n", "workload", "axes", "verdict", "latency",
                     "p10 - p90", "baseline", "speedup", "achieved");
  const std::string* last_message = nullptr;
  for (const auto& w : r.workloads) {
    const bool ok = w.verdict == eval::Verdict::kPassed;
    const std::string spread =
        ok && w.candidate.n > 1 ? ms_text(w.candidate.p10) + " - " + ms_text(w.candidate.p90) : "-";
    out << fmt::format("{:<9} {:<26} {:<20} {:>10} {:>21} {:>10} {:>8}  {}\n", w.uuid.substr(0, 8), axes_text(w.axes),
                       eval::verdict_name(w.verdict), ok ? ms_text(w.latency_ms) : "-", spread,
                       ok && w.baseline_ms > 0 ? ms_text(w.baseline_ms) : "-",
                       ok && w.speedup > 0 ? fmt::format("{:.2f}x", w.speedup) : "-", ok ? achieved_text(pack, w) : "");
    // A reason shared by consecutive rows (a build failure blocks every workload) is printed once.
    if (!ok && (explain || last_message == nullptr || *last_message != w.message)) {
      out << "    " << w.message << "\n";
      if (w.verdict == eval::Verdict::kCompileError) {
        const auto lines = build::error_lines(w.log, 6);
        for (size_t i = 1; i < lines.size(); ++i) out << "      " << lines[i] << "\n";  // the first is in the message
      }
    }
    last_message = ok ? nullptr : &w.message;
    if (explain) {
      for (const auto& g : w.gates)
        out << fmt::format("    gate {:<22} {:<7}  {}\n", g.name,
                           g.failed() ? "FAIL" : eval::gate_status_name(g.status), g.detail);
    }
  }
  if (explain) {
    for (const auto& g : r.static_gates)
      out << fmt::format("static gate {:<22} {:<7}  {}\n", g.name,
                         g.failed() ? "FAIL" : eval::gate_status_name(g.status), g.detail);
  }
  size_t passed = 0;
  for (const auto& w : r.workloads) passed += w.verdict == eval::Verdict::kPassed;
  const bool timed = std::any_of(r.workloads.begin(), r.workloads.end(), [](const auto& w) { return w.speedup > 0; });
  const std::string score =
      timed || !r.all_passed
          ? fmt::format("score (mean speedup vs baseline) {:.3f}x, geomean {:.3f}x{}", r.score_mean, r.score_geomean,
                        r.geomean_ci ? fmt::format(" (95 % interval over trials {:.3f}x - {:.3f}x)", r.geomean_ci->low,
                                                   r.geomean_ci->high)
                                     : "")
          : std::string("not timed");
  // seed 0: a report put together from several evaluations (kda eval --on), each seed in its trace.
  out << fmt::format("summary: {}/{} PASSED; {}; {} backend; {}; {:.1f} s{}\n", passed, r.workloads.size(), score,
                     r.backend, r.seed ? fmt::format("seed {}", r.seed) : std::string("a seed per workload (traces)"),
                     r.wall_s, r.in_call_s > 0 ? fmt::format(" ({:.2f} s inside calls)", r.in_call_s) : "");
}

// kda eval --on: the report the pool's traces make, printed like one process's.
int run_on(const Args& args, Io& io, const task::TaskPack& pack, const task::Solution& solution) {
#ifdef KDA_HAVE_EXEC
  auto r = evaluate_on(args, io, pack, solution);
  if (!r.ok()) {
    return fail(io, "kda eval", r.status());
  }
  if (auto traces = args.value("traces")) {
    std::string lines;
    for (const auto& t : r->traces) lines += t.dump() + "\n";
    if (Status st = fs::write_file_atomic(*traces, lines); !st.ok()) {
      return fail(io, "kda eval", st);
    }
  }
  const eval::EvalReport& rep = r->report;
  if (args.flag("json")) {
    nlohmann::json score = {{"mean_speedup", rep.score_mean}, {"geomean_speedup", rep.score_geomean}};
    if (rep.geomean_ci) score["geomean_ci95"] = {rep.geomean_ci->low, rep.geomean_ci->high};
    io.out
        << nlohmann::json{{"definition", rep.definition}, {"solution", rep.solution}, {"backend", rep.backend},
                          {"all_passed", rep.all_passed}, {"score", score},           {"baseline", rep.baseline_name},
                          {"wall_s", rep.wall_s},         {"dispatch", r->dispatch},  {"traces", r->traces}}
               .dump(2)
        << "\n";
  } else {
    print_table(pack, rep, io.out, args.flag("explain"));
    for (const auto& f : r->dispatch["failed_tasks"])
      io.out << "not evaluated: task " << f["task_id"].get<std::string>() << ": " << f["error"].get<std::string>()
             << "\n";
  }
  return rep.all_passed ? kExitOk : kExitFailed;
#else
  io.err << "kda eval: --on needs kda built with SQLite and cpp-httplib (scripts/install-deps.sh installs them)\n";
  return kExitBadInput;
#endif
}

// kda eval A --against B: N evaluations of A with B timed interleaved as the baseline, each in fresh
// runner processes on fresh seeds, so the interval over them holds what one evaluation's interval
// over trials does not: the runner processes' own spread (an A/A comparison on one pair of
// processes read 1.003x-1.054x, "faster", within its interval over trials).
int run_against(const task::TaskPack& pack, const task::Solution& a, const task::Solution& b, eval::EvalOptions opts,
                int pairs, const Args& args, Io& io) {
  opts.baseline = b;
  std::vector<eval::EvalReport> runs;
  for (int i = 0; i < pairs; ++i) {
    if (args.given("seed"))
      opts.seed = *opts.seed + 1;  // reproducible, and still a fresh set per run
    else
      opts.seed.reset();
    if (!args.flag("quiet")) io.err << fmt::format("kda eval: head-to-head {} of {}\n", i + 1, pairs);
    auto r = eval::evaluate(pack, a, opts);
    if (!r.ok()) {
      return fail(io, "kda eval", r.status());
    }
    if (!r->all_passed) {
      io.err << fmt::format("kda eval: run {} of {}: not every workload PASSED; no ratio\n", i + 1, pairs);
      print_table(pack, *r, io.err, false);
      return kExitFailed;
    }
    runs.push_back(std::move(*r));
  }
  std::vector<double> geomeans;
  for (const auto& r : runs) geomeans.push_back(r.score_geomean);
  const auto est = eval::ratio_ci95(geomeans);
  const std::string verdict = !est                 ? "undetermined"
                              : est->ci.low > 1.0  ? "faster"
                              : est->ci.high < 1.0 ? "slower"
                                                   : "indistinguishable";
  nlohmann::json per_workload = nlohmann::json::array();
  for (size_t w = 0; w < runs.front().workloads.size(); ++w) {
    std::vector<double> ratios;
    for (const auto& r : runs) ratios.push_back(r.workloads[w].speedup);
    const auto e = eval::ratio_ci95(ratios);
    per_workload.push_back({{"uuid", runs.front().workloads[w].uuid},
                            {"axes", runs.front().workloads[w].axes},
                            {"ratios", ratios},
                            {"ratio", e ? e->geomean : 0.0},
                            {"ci95", e ? nlohmann::json{e->ci.low, e->ci.high} : nlohmann::json(nullptr)}});
  }
  if (args.flag("json")) {
    nlohmann::json j{{"solution", a.name},
                     {"against", b.name},
                     {"pairs", pairs},
                     {"geomean_ratios", geomeans},
                     {"geomean_ratio", est ? est->geomean : 0.0},
                     {"ci95", est ? nlohmann::json{est->ci.low, est->ci.high} : nlohmann::json(nullptr)},
                     {"verdict", verdict},
                     {"workloads", per_workload},
                     {"runs", nlohmann::json::array()}};
    for (const auto& r : runs) j["runs"].push_back(eval::report_json(r, pack));
    io.out << j.dump(2) << "\n";
    return kExitOk;
  }
  io.out << fmt::format(
      "{} against {}: {} evaluations, each in fresh runner processes on fresh seeds, {} timed "
      "interleaved as the baseline; ratio = its latency / {}'s (above 1: {} is faster)\n",
      a.name, b.name, pairs, b.name, a.name, a.name);
  io.out << fmt::format("{:<9} {:<26} {:>9}  {:<23} {}\n", "workload", "axes", "ratio", "95 % interval over runs",
                        "per run");
  for (const auto& w : per_workload) {
    std::string each;
    for (double r : w["ratios"]) each += fmt::format("{}{:.3f}x", each.empty() ? "" : " ", r);
    const std::string ci =
        w["ci95"].is_array() ? fmt::format("{:.3f}x - {:.3f}x", w["ci95"][0].get<double>(), w["ci95"][1].get<double>())
                             : "-";
    io.out << fmt::format("{:<9} {:<26} {:>8.3f}x  {:<23} {}\n", w["uuid"].get<std::string>().substr(0, 8),
                          axes_text(w["axes"]), w["ratio"].get<double>(), ci, each);
  }
  std::string each;
  for (double g : geomeans) each += fmt::format("{}{:.3f}x", each.empty() ? "" : " ", g);
  if (est)
    io.out << fmt::format("geomean ratio {:.3f}x, 95 % interval over the {} evaluations {:.3f}x - {:.3f}x (each: {})\n",
                          est->geomean, pairs, est->ci.low, est->ci.high, each);
  io.out << fmt::format("{}: {}\n", a.name,
                        verdict == "faster"   ? "faster than " + b.name + " (the whole interval is above 1)"
                        : verdict == "slower" ? "slower than " + b.name + " (the whole interval is below 1)"
                        : verdict == "indistinguishable"
                            ? "not measurably different from " + b.name + " (the interval contains 1)"
                            : "no interval (fewer than two evaluations)");
  return kExitOk;
}

// The task: a kda task pack, or with --definition one definition of a FlashInfer-Bench dataset
// (judged by its Python reference through the torch oracle, on the candidate's backend).
Result<task::TaskPack> load_task(const Args& args, const task::Solution& solution) {
  const std::string dir = args.value_or("task", "");
  auto name = args.value("definition");
  if (!name) return task::load_task_pack(dir);
  const std::string& lang = solution.spec.language;
  if (lang != "cpp" && lang != "cuda")
    return Status::bad_input(fmt::format(
        "solution '{}' is written in '{}'; kda evaluates cpp (host) and cuda solutions", solution.name, lang));
  return task::load_fib_definition(dir, *name, lang == "cuda" ? task::Backend::kCuda : task::Backend::kHost);
}

// --seed, --trials, --warmup and --iterations into `opts`; kBadInput naming the one that is not a
// non-negative integer.
Status counted_options(const Args& args, eval::EvalOptions& opts) {
  for (const char* name : {"seed", "trials", "warmup", "iterations"}) {
    auto v = args.integer(name);
    if (!v.ok()) return v.status();
    if (!*v) continue;
    if (**v < 0) return Status::bad_input(fmt::format("--{} must be >= 0", name));
    const std::string n = name;
    if (n == "seed") opts.seed = static_cast<uint64_t>(**v);
    if (n == "trials") opts.trials = static_cast<int>(**v);
    if (n == "warmup") opts.warmup = static_cast<int>(**v);
    if (n == "iterations") opts.iterations = static_cast<int>(**v);
  }
  return {};
}

int run_eval(const Args& args, Io& io) {
  auto solution = task::load_solution(args.positional("solution"));
  if (!solution.ok()) {
    return fail(io, "kda eval", solution.status());
  }
  for (const auto& name : task::unlisted_option_files(*solution, args.positional("solution")))
    io.err << "kda eval: warning: " << task::unlisted_option_warning(name) << "\n";
  auto pack = load_task(args, *solution);
  if (!pack.ok()) {
    return fail(io, "kda eval", pack.status());
  }
  if (Status st = apply_params(args, args.positional("solution"), pack->definition, *solution, io, "kda eval");
      !st.ok())
    return fail(io, "kda eval", st);
  if (args.given("on")) return run_on(args, io, *pack, *solution);
  eval::EvalOptions opts;
  opts.runner_binary = eval::default_runner_binary();
  opts.workloads = args.flag("holdout") ? "holdout" : args.value_or("workloads", "dev");
  opts.with_baseline = !args.flag("no-baseline");
  if (auto b = args.value("baseline")) {
    auto base = task::load_solution(*b);
    if (!base.ok()) {
      io.err << "kda eval: --baseline " << *b << ": " << base.status().message() << "\n";
      return exit_code_for(base.status());
    }
    opts.baseline = std::move(*base);
  }
  opts.sandbox = !args.flag("no-sandbox");
  opts.device_inputs = !args.flag("host-inputs");
  opts.require_graph_contract = args.flag("graph-contract");
  opts.reference =
      args.given("reference") || !pack->python_reference_only ? args.value_or("reference", "pack") : "torch";
  if (opts.reference == "torch") {
    // Said before anything is built: without torch (or, on CUDA, without its CUDA device) there is
    // nothing to judge by.
    const eval::TorchProbe& probe = eval::torch_probe();
    const bool cuda = pack->backend == task::Backend::kCuda;
    if (!probe.importable || (cuda && probe.detail.find("cuda available") == std::string::npos)) {
      io.err << "kda eval: "
             << (pack->python_reference_only ? "definition '" + pack->definition.name +
                                                   "' is judged by its "
                                                   "Python reference, which"
                                             : std::string("--reference torch"))
             << " needs python3 with torch" << (cuda ? " and a CUDA device" : "") << " (" << probe.python.string()
             << ": " << probe.detail << ")\n";
      return kExitBadInput;
    }
  }
  opts.cuda_arch = args.value_or("arch", "90a");
  if (Status st = counted_options(args, opts); !st.ok()) {
    io.err << "kda eval: " << st.message() << "\n";
    return kExitBadInput;
  }
  if (auto sealed = args.value("sealed")) {
    auto text = fs::read_file(*sealed);
    auto json = text.ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
    auto m = text.ok() ? task::Manifest::from_json(json) : Result<task::Manifest>(text.status());
    if (!m.ok()) {
      io.err << "kda eval: --sealed " << *sealed << ": " << m.status().message() << "\n";
      return kExitBadInput;
    }
    opts.sealed = *m;
  }
  auto timeout = args.number("call-timeout");
  if (!timeout.ok() || (*timeout && **timeout <= 0)) {
    io.err << "kda eval: --call-timeout: expected a positive number of seconds\n";
    return kExitBadInput;
  }
  if (*timeout) opts.call_timeout_s = **timeout;
  const bool quiet = args.flag("quiet");
  opts.progress = [&io, quiet](const std::string& line) {
    if (!quiet) io.err << "kda eval: " << line << "\n";
  };
  if (auto b = args.value("against")) {
    if (args.given("baseline") || args.flag("no-baseline")) {
      io.err << "kda eval: --against times its solution as the baseline: drop --baseline / --no-baseline\n";
      return kExitBadInput;
    }
    auto against = task::load_solution(*b);
    if (!against.ok()) {
      io.err << "kda eval: --against " << *b << ": " << against.status().message() << "\n";
      return exit_code_for(against.status());
    }
    auto pairs = args.integer("pairs");
    if (!pairs.ok() || !*pairs || **pairs < 2 || **pairs > 50) {
      io.err << "kda eval: --pairs must be an integer in 2..50\n";
      return kExitBadInput;
    }
    opts.with_baseline = true;
    return run_against(*pack, *solution, *against, opts, static_cast<int>(**pairs), args, io);
  }
  auto report = eval::evaluate(*pack, *solution, opts);
  if (!report.ok()) {
    return fail(io, "kda eval", report.status());
  }
  if (auto traces = args.value("traces")) {
    std::string lines;
    for (const auto& w : report->workloads) lines += eval::trace_json(*report, w, *pack).dump() + "\n";
    if (Status st = fs::write_file_atomic(*traces, lines); !st.ok()) {
      return fail(io, "kda eval", st);
    }
  }
  if (args.flag("json"))
    io.out << eval::report_json(*report, *pack).dump(2) << "\n";
  else
    print_table(*pack, *report, io.out, args.flag("explain"));
  return report->all_passed ? kExitOk : kExitFailed;
}

}  // namespace

CommandSpec eval_command() {
  return {
      .name = "eval",
      .summary = "Evaluate a solution with kda's official evaluator (correctness, timing, integrity)",
      .description =
          "Builds the pack's reference and baseline and the candidate, runs each in its own runner process (the\n"
          "candidate sandboxed with Landlock and seccomp), checks correctness on fresh secret seeds, then times the\n"
          "candidate interleaved with the baseline. Exit 0 when every selected workload PASSED, 1 otherwise.\n"
          "<solution> is a solution directory (solution.json + sources) or a Solution JSON file.",
      .positionals = {{.name = "solution", .help = "solution directory or Solution JSON"}},
      .options =
          {{.name = "task",
            .short_name = 't',
            .metavar = "DIR",
            .help = "task pack directory, or a FlashInfer-Bench dataset with --definition",
            .env = "KDA_TASK"},
           {.name = "definition",
            .metavar = "NAME",
            .help = "a definition of the FlashInfer-Bench dataset --task names, judged by its Python reference (torch "
                    "oracle)"},
           {.name = "workloads",
            .short_name = 'w',
            .metavar = "SET",
            .help = "all | dev | holdout | uuid[,uuid...] (a unique prefix of a uuid will do)",
            .default_value = "dev"},
           {.name = "holdout", .help = "evaluate on the hidden holdout workloads (same as --workloads holdout)"},
           {.name = "seed", .metavar = "N", .help = "master seed, to reproduce a run (default: fresh secret seed)"},
           {.name = "trials", .metavar = "N", .help = "override task.toml [timing] trials"},
           {.name = "warmup", .metavar = "N", .help = "override task.toml [timing] warmup"},
           {.name = "iterations", .metavar = "N", .help = "override task.toml [timing] iterations (0: no timing)"},
           {.name = "sealed",
            .metavar = "FILE",
            .help = "sealed pack manifest (kda task seal): refuse to evaluate if the pack changed"},
           {.name = "call-timeout", .metavar = "S", .help = "override task.toml [timing] call_timeout_s"},
           {.name = "no-baseline", .help = "do not time the baseline"},
           {.name = "graph-contract",
            .help = "require the CUDA graph contract whatever task.toml [contract] says: one call captured into a CUDA "
                    "graph and replayed on fresh inputs in the same buffers must be correct (docs/integrity-gates.md)"},
           {.name = "baseline",
            .metavar = "DIR",
            .help = "time this solution as the baseline instead of the pack's (a head-to-head on the same inputs)"},
           {.name = "against",
            .metavar = "DIR",
            .help = "head-to-head: --pairs evaluations against this solution (timed as the baseline), each in "
                    "fresh processes; the ratio with a 95 % interval over the evaluations, and whether it excludes 1"},
           {.name = "pairs", .metavar = "N", .help = "evaluations of --against (2..50)", .default_value = "3"},
           param_option(),
           {.name = "no-sandbox", .help = "run the candidate without Landlock/seccomp (debugging only)"},
           {.name = "reference",
            .metavar = "WHICH",
            .help = "pack: the pack's reference solution; torch: the definition's Python reference in the torch "
                    "oracle (needs python3 with torch)",
            .default_value = "pack"},
           {.name = "host-inputs",
            .help = "CUDA: generate random inputs on the host and upload them (default: on the device, checked by "
                    "digests)"},
           {.name = "arch", .metavar = "SM", .help = "CUDA architecture for nvcc", .default_value = "90a"},
           {.name = "traces", .metavar = "FILE", .help = "write FlashInfer-Bench trace JSONL to FILE"},
           {.name = "explain", .help = "print every integrity gate and its result"},
           {.name = "on",
            .metavar = "POOL",
            .help = "spread the workloads over kda serve instances: local[:DEVICES] (one started here), server URLs "
                    "(http://host:port,...), or an address file or directory of them (docs/scale.md)"},
           {.name = "token-file", .metavar = "FILE", .help = "--on: the servers' bearer token"},
           {.name = "queue",
            .metavar = "FILE",
            .help = "--on: keep the task queue in FILE (SQLite); a rerun with the same FILE resumes it"},
           {.name = "quiet", .short_name = 'q', .help = "no progress on stderr"},
           json_option()},
      .run = run_eval,
  };
}

}  // namespace kda::cli
