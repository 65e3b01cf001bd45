// `kda sanitize`: the compute-sanitizer gate. Runs a solution on selected workloads inside a
// candidate runner started under compute-sanitizer (memcheck, racecheck, initcheck or synccheck)
// and fails with SANITIZER_ERROR, the first reports as evidence, when the tool counted errors.
#include <filesystem>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/solution_params.h"
#include "cli/tool_run_args.h"
#include "eval/tool_run.h"
#include "eval/tool_run_sanitizer.h"
#include "task/task_pack.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kda::cli {

namespace {

using nlohmann::json;
namespace stdfs = std::filesystem;

// dev | all | uuid[,uuid...], from the visible workloads only (never the holdout).
Result<std::vector<std::string>> select_uuids(const task::TaskPack& pack, const std::string& which) {
  std::vector<std::string> out;
  if (which == "all") {
    for (const auto& w : pack.workloads) out.push_back(w.uuid);
  } else if (which == "dev") {
    out = pack.dev_uuids;
  } else {
    out = util::split_list(which);
  }
  if (out.empty())
    return Status::bad_input(fmt::format("--workloads {}: selects no workload of {}", which, pack.root.string()));
  return out;
}

struct WorkloadOutcome {
  std::string uuid;
  std::string verdict;  // PASSED | SANITIZER_ERROR | VIOLATION_OUT_OF_BOUNDS | RUNTIME_ERROR | COMPILE_ERROR
  int64_t errors = 0;
  std::string message;
  std::vector<std::vector<std::string>> evidence;
  json run;
};

// The verdict of one run under the tool. An environment failure (the tool or the runner could not
// start or load the library, no summary) is an error, not a verdict on the candidate.
Result<WorkloadOutcome> judge(const eval::ToolRunResult& r, const std::string& tool, const stdfs::path& log_path) {
  WorkloadOutcome w;
  w.uuid = r.workload;
  w.run = r.to_json();
  if (r.stage == eval::ToolRunStage::kBuild && !r.ok) {
    w.verdict = "COMPILE_ERROR";
    w.message = eval::tail_lines(r.compile_log, 20);
    return w;
  }
  const bool reached_calls = r.stage == eval::ToolRunStage::kWarmup || r.stage == eval::ToolRunStage::kCall ||
                             r.stage == eval::ToolRunStage::kDone;
  if (!reached_calls)
    return Status::io(fmt::format("workload {}: the runner under compute-sanitizer stopped at {}: {}{}", r.workload,
                                  eval::tool_run_stage_name(r.stage), r.message,
                                  r.runner_log.empty() ? "" : "\n" + eval::tail_lines(r.runner_log, 20)));
  eval::SanitizerSummary s = eval::parse_sanitizer_log(r.tool_log);
  w.errors = s.errors;
  w.evidence = s.reports;
  if (s.errors > 0) {
    w.verdict = "SANITIZER_ERROR";
    w.message = fmt::format("compute-sanitizer --tool {} counted {} error(s)", tool, s.errors);
    return w;
  }
  if (!r.ok) {
    w.verdict = "RUNTIME_ERROR";
    w.message = r.message + (r.runner_log.empty() ? "" : "\n" + eval::tail_lines(r.runner_log, 10));
    return w;
  }
  if (!s.found)
    return Status::io(fmt::format("workload {}: compute-sanitizer wrote no summary to {}; its log (tail):\n{}",
                                  r.workload, log_path.string(), eval::tail_lines(r.tool_log, 20)));
  if (!r.damaged_guards.empty()) {
    std::string names;
    for (const auto& n : r.damaged_guards) names += (names.empty() ? "" : ", ") + n;
    w.verdict = "VIOLATION_OUT_OF_BOUNDS";
    w.message =
        "guard band written around: " + names + " (inside the runner's arena, where the sanitizer sees one allocation)";
    return w;
  }
  w.verdict = "PASSED";
  return w;
}

int run_sanitize(const Args& args, Io& io) {
  // Phase: inputs.
  const std::string task_dir = args.value_or("task", "");
  if (task_dir.empty()) return fail(io, "kda sanitize", Status::bad_input("--task: required (a task pack directory)"));
  auto pack = task::load_task_pack(task_dir);
  if (!pack.ok()) return fail(io, "kda sanitize", pack.status());
  auto solution = task::load_solution(args.positional("solution"));
  if (!solution.ok()) return fail(io, "kda sanitize", solution.status());
  if (Status st = apply_params(args, args.positional("solution"), pack->definition, *solution, io, "kda sanitize");
      !st.ok())
    return fail(io, "kda sanitize", st);
  const std::string tool = args.value_or("tool", "memcheck");
  if (tool != "memcheck" && tool != "racecheck" && tool != "initcheck" && tool != "synccheck")
    return fail(io, "kda sanitize",
                Status::bad_input("--tool " + tool + ": expected memcheck, racecheck, initcheck or synccheck"));
  auto uuids = select_uuids(*pack, args.value_or("workloads", "dev"));
  if (!uuids.ok()) return fail(io, "kda sanitize", uuids.status());
  auto sanitizer = eval::find_tool(args.value_or("sanitizer", ""), "compute-sanitizer", "--sanitizer");
  if (!sanitizer.ok()) return fail(io, "kda sanitize", sanitizer.status());
  auto run_args = parse_tool_run_args(args);
  if (!run_args.ok()) return fail(io, "kda sanitize", run_args.status());

  // The tool's logs: kept in --log-dir when given, else in a private temporary directory.
  stdfs::path log_dir;
  const bool keep_logs = args.value("log-dir").has_value();
  if (keep_logs) {
    log_dir = *args.value("log-dir");
    if (Status st = fs::ensure_dir(log_dir); !st.ok()) return fail(io, "kda sanitize", st.with_context("--log-dir"));
  } else {
    auto tmp = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-sanitize");
    if (!tmp.ok()) return fail(io, "kda sanitize", tmp.status());
    log_dir = *tmp;
  }
  struct Cleanup {
    stdfs::path dir;
    bool keep;
    ~Cleanup() {
      std::error_code ec;
      if (!keep) stdfs::remove_all(dir, ec);
    }
  } cleanup{log_dir, keep_logs};

  // Phase: each workload under the tool.
  const bool quiet = args.flag("quiet");
  std::vector<WorkloadOutcome> outcomes;
  for (size_t i = 0; i < uuids->size(); ++i) {
    const std::string& uuid = (*uuids)[i];
    const stdfs::path log = stdfs::absolute(log_dir / fmt::format("{}-{}.log", tool, uuid));
    eval::ToolRunOptions o;
    o.workload = uuid;
    o.runner_binary = eval::default_runner_binary();
    o.seed = static_cast<uint64_t>(run_args->seed.value_or(1));
    o.warmup = static_cast<int>(run_args->warmup.value_or(0));
    o.lineinfo = true;  // file:line in the reports
    o.profile_range = false;
    o.cuda_arch = args.value_or("arch", "90a");
    o.timeout_s = run_args->timeout_s.value_or(600);
    o.tool_log = log;
    o.wrapper = {sanitizer->string(), "--tool", tool,         "--error-exitcode", "86",
                 "--print-limit",     "20",     "--log-file", log.string()};
    o.progress = [&io, quiet](const std::string& line) {
      if (!quiet) io.err << "kda sanitize: " << line << "\n";
    };
    auto run = eval::run_under_tool(*pack, *solution, o);
    auto judged = run.ok() ? judge(*run, tool, log) : Result<WorkloadOutcome>(run.status());
    if (!judged.ok()) {
      if (args.flag("json"))  // scripts still get an object: which workload, and why no verdict
        io.out << json{{"solution", solution->name},
                       {"task", pack->root.string()},
                       {"tool", tool},
                       {"passed", false},
                       {"workload", uuid},
                       {"error", judged.status().message()}}
                      .dump(2)
               << "\n";
      return fail(io, "kda sanitize", judged.status());
    }
    if (!quiet) io.err << fmt::format("kda sanitize: [{}/{}] {} {}\n", i + 1, uuids->size(), uuid, judged->verdict);
    outcomes.push_back(std::move(*judged));
    if (outcomes.back().verdict == "COMPILE_ERROR") break;  // the same build fails every workload
  }

  // Phase: the result.
  bool all_passed = true;
  for (const auto& w : outcomes) all_passed = all_passed && w.verdict == "PASSED";
  if (args.flag("json")) {
    json j{{"solution", solution->name},
           {"task", pack->root.string()},
           {"tool", tool},
           {"passed", all_passed},
           {"workloads", json::array()}};
    if (keep_logs) j["log_dir"] = log_dir.string();
    for (const auto& w : outcomes)
      j["workloads"].push_back({{"uuid", w.uuid},
                                {"verdict", w.verdict},
                                {"errors", w.errors},
                                {"message", w.message},
                                {"evidence", w.evidence},
                                {"run", w.run}});
    io.out << json_text(j) << "\n";
  } else {
    io.out << fmt::format("{:<38} {:<24} {:>7}\n", "workload", "verdict", "errors");
    for (const auto& w : outcomes) {
      io.out << fmt::format("{:<38} {:<24} {:>7}\n", w.uuid, w.verdict, w.errors);
      if (!w.message.empty() && w.verdict != "PASSED") io.out << "    " << w.message << "\n";
      for (const auto& report : w.evidence)
        for (size_t k = 0; k < report.size(); ++k) io.out << (k == 0 ? "    " : "        ") << report[k] << "\n";
    }
    io.out << fmt::format("summary: {} workload(s) under compute-sanitizer --tool {}: {}\n", outcomes.size(), tool,
                          all_passed ? "clean" : "FAILED");
  }
  return all_passed ? kExitOk : kExitFailed;
}

}  // namespace

CommandSpec sanitize_command() {
  return {
      .name = "sanitize",
      .summary = "Run a solution under compute-sanitizer on a task's workloads (the compute-sanitizer gate)",
      .description =
          "For each selected workload: builds the solution with -lineinfo, starts the candidate runner under\n"
          "compute-sanitizer --tool T --error-exitcode 86 --print-limit 20 (sandbox off: the tool injects a library\n"
          "that talks to its host process), makes --warmup plain calls and one more, stops the runner and reads the\n"
          "tool's ERROR SUMMARY. Verdicts: PASSED; SANITIZER_ERROR (N > 0, the first reports as evidence);\n"
          "VIOLATION_OUT_OF_BOUNDS (the arena's guard bands were written: the runner mirrors the whole arena in one\n"
          "device allocation, so memcheck cannot see a write that lands between slots); RUNTIME_ERROR; COMPILE_ERROR.\n"
          "Exit 0 when every workload PASSED, 1 otherwise, 3 when the tool or the runner could not run.",
      .positionals = {{.name = "solution", .help = "solution directory or Solution JSON"}},
      .options =
          {{.name = "task", .short_name = 't', .metavar = "DIR", .help = "task pack directory", .env = "KDA_TASK"},
           {.name = "workloads",
            .short_name = 'w',
            .metavar = "SET",
            .help = "dev | all | uuid[,uuid...] (a start of a uuid that names one workload will do)",
            .default_value = "dev"},
           param_option(),
           {.name = "tool",
            .metavar = "NAME",
            .help = "memcheck | racecheck | initcheck | synccheck",
            .default_value = "memcheck"},
           {.name = "sanitizer",
            .metavar = "PATH",
            .help = "the compute-sanitizer binary (default: on PATH, else /usr/local/cuda/bin/compute-sanitizer)",
            .env = "KDA_COMPUTE_SANITIZER"},
           {.name = "log-dir", .metavar = "DIR", .help = "keep the tool's logs here (<tool>-<uuid>.log)"},
           {.name = "warmup", .metavar = "N", .help = "plain calls before the last one", .default_value = "0"},
           {.name = "seed", .metavar = "N", .help = "input seed", .default_value = "1"},
           {.name = "arch", .metavar = "SM", .help = "CUDA architecture for nvcc", .default_value = "90a"},
           {.name = "timeout",
            .metavar = "S",
            .help = "limit for the runner's start and for each call",
            .default_value = "600"},
           {.name = "quiet", .short_name = 'q', .help = "no progress on stderr"},
           json_option()},
      .run = run_sanitize,
  };
}

}  // namespace kda::cli
