#include "eval/tool_run.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "eval/arena.h"
#include "eval/inputs.h"
#include "eval/runner_client.h"
#include "proc/subprocess.h"
#include "util/fs.h"

namespace kda::eval {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// Seed purposes of this driver (distinct from the evaluator's, so a tool run never replays an
// evaluation's inputs).
enum ToolPurpose : uint64_t { kToolInputs = 101, kToolGuard = 102, kToolPoison = 103 };

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

const char* tool_run_stage_name(ToolRunStage s) {
  switch (s) {
    case ToolRunStage::kBuild: return "build";
    case ToolRunStage::kStart: return "start";
    case ToolRunStage::kLoad: return "load";
    case ToolRunStage::kLayout: return "layout";
    case ToolRunStage::kWarmup: return "warmup";
    case ToolRunStage::kCall: return "call";
    case ToolRunStage::kDone: return "done";
  }
  return "?";
}

Result<std::filesystem::path> find_tool(const std::string& explicit_path, const std::string& name,
                                        const std::string& flag) {
  std::error_code ec;
  if (!explicit_path.empty()) {
    if (!std::filesystem::is_regular_file(explicit_path, ec))
      return Status::not_found(fmt::format("{} {}: no such file", flag, explicit_path));
    return std::filesystem::absolute(explicit_path, ec);
  }
  if (auto p = proc::find_program(name); p.ok()) return std::filesystem::absolute(*p, ec);
  const std::filesystem::path cuda = std::filesystem::path("/usr/local/cuda/bin") / name;
  if (std::filesystem::is_regular_file(cuda, ec)) return cuda;
  return Status::not_found(
      fmt::format("{} not found on PATH or in /usr/local/cuda/bin: install it or pass {} PATH", name, flag));
}

std::filesystem::path default_runner_binary() {
  if (const char* env = std::getenv("KDA_RUNNER"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) return exe.parent_path() / "kda-runner";
  return "kda-runner";
}

std::string tail_lines(const std::string& text, size_t max_lines) {
  size_t end = text.size();
  while (end > 0 && text[end - 1] == '\n') --end;
  size_t pos = end;
  for (size_t n = 0; n < max_lines && pos > 0; ++n) {
    size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text.substr(0, end);
    pos = nl;
    if (n + 1 == max_lines) return text.substr(pos + 1, end - pos - 1);
  }
  return text.substr(0, end);
}

json ToolRunResult::to_json() const {
  return {{"workload", workload},
          {"backend", backend},
          {"wrapper", wrapper},
          {"build", build},
          {"kernels", kernels},
          {"stage", tool_run_stage_name(stage)},
          {"ok", ok},
          {"message", message},
          {"reply", reply},
          {"damaged_guards", damaged_guards},
          {"call_wall_s", call_wall_s},
          {"wall_s", wall_s}};
}

namespace {

// The workload a tool run asks for, once the solution is for the pack's definition and language.
Result<const task::Workload*> requested_workload(const task::TaskPack& pack, const task::Solution& solution,
                                                 const std::string& uuid) {
  // Never the holdout: agents reach these tools. A start of a uuid that names one workload will do.
  auto visible = pack.visible_workload(uuid);
  if (!visible.ok())
    return Status::bad_input(fmt::format("{}: {} (field workload.uuid)", (pack.root / "workloads.jsonl").string(),
                                         visible.status().message()));
  const task::Workload* w = *visible;
  if (solution.definition != pack.definition.name)
    return Status::bad_input(fmt::format("solution '{}': field definition is '{}', the task '{}' defines '{}'",
                                         solution.name, solution.definition, pack.root.string(), pack.definition.name));
  const std::string want = pack.backend == task::Backend::kCuda ? "cuda" : "cpp";
  if (solution.spec.language != want)
    return Status::bad_input(fmt::format("solution '{}': field spec.language is '{}', the task '{}' takes '{}'",
                                         solution.name, solution.spec.language, pack.root.string(), want));
  return w;
}

}  // namespace

Result<ToolRunResult> run_under_tool(const task::TaskPack& pack, const task::Solution& solution,
                                     const ToolRunOptions& options) {
  const auto t0 = Clock::now();
  auto progress = [&options](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  ToolRunResult r;
  r.workload = options.workload;
  r.backend = pack.backend == task::Backend::kCuda ? "cuda" : "host";

  // Phase: check the request against the pack (the workload, the definition, the language).
  KDA_ASSIGN_OR_RETURN(const task::Workload* w, requested_workload(pack, solution, options.workload));
  r.workload = w->uuid;  // the whole uuid where a start of one was given
  KDA_ASSIGN_OR_RETURN(ResolvedWorkload rw, resolve_workload(pack, *w));

  // Phase: build (cached; -lineinfo is part of the cache key).
  progress("building " + solution.name + (options.lineinfo ? " (-lineinfo)" : ""));
  KDA_ASSIGN_OR_RETURN(BuiltLibrary lib, build_solution(solution, {.cuda_arch = options.cuda_arch,
                                                                   .lineinfo = options.lineinfo,
                                                                   .allowed_libraries = pack.settings.libraries}));
  r.build = lib.info;
  r.build["lineinfo"] = options.lineinfo;
  r.build["cuda_arch"] = options.cuda_arch;
  for (const auto& k : lib.info.value("resources", json::array())) {
    std::string m = k.value("mangled", std::string{});
    if (!m.empty() && std::find(r.kernels.begin(), r.kernels.end(), m) == r.kernels.end()) r.kernels.push_back(m);
  }
  if (!lib.ok) {
    r.compile_log = lib.log;
    r.message = "the solution does not build: " + build_failure_summary(lib);
    r.wall_s = seconds_since(t0);
    return r;
  }
  r.wrapper = options.wrapper;
  if (options.wrapper_for) {
    KDA_ASSIGN_OR_RETURN(r.wrapper, options.wrapper_for(lib));
  }

  // Phase: start the runner under the tool, then load the library (no sandbox: see the header).
  r.stage = ToolRunStage::kStart;
  if (!options.tool_log.empty()) {
    std::error_code ec;
    std::filesystem::remove(options.tool_log, ec);  // a stale log must not pass for this run's
  }
  progress("starting the runner under " + (r.wrapper.empty() ? std::string("no tool") : r.wrapper.front()));
  RunnerOptions ro{.runner_binary = options.runner_binary,
                   .backend = r.backend,
                   .role = RunnerRole::kCandidate,
                   .sandbox = false,
                   .start_timeout_s = options.timeout_s,
                   .wrapper = r.wrapper,
                   .extra_env = options.extra_env};
  auto started = RunnerClient::start(ro);
  if (!started.ok()) {
    // A tool that logs to a file says why there, not on the runner's stderr.
    std::string why = started.status().message();
    if (!options.tool_log.empty()) {
      if (auto text = fs::read_file(options.tool_log); text.ok() && !text->empty())
        why += "\n" + options.tool_log.string() + " (tail):\n" + tail_lines(*text, 20);
    }
    return Status(started.status().kind(), "runner under tool: " + why);
  }
  RunnerClient runner = std::move(*started);

  // Ends the run: stops the runner (the tool then writes its report or summary) and reads the log.
  auto finish = [&](const CallOutcome* failed) -> Result<ToolRunResult> {
    if (failed != nullptr) {
      r.ok = false;
      r.message = failed->message;
      r.runner_log = failed->log;
    }
    runner.stop();
    if (!options.tool_log.empty()) {
      if (auto text = fs::read_file(options.tool_log); text.ok()) r.tool_log = std::move(*text);
    }
    r.wall_s = seconds_since(t0);
    return r;
  };

  r.stage = ToolRunStage::kLoad;
  auto loaded = runner.load(lib.library, lib.symbol, options.timeout_s);
  if (loaded.kind != CallOutcome::Kind::kOk) return finish(&loaded);

  // Phase: layout and inputs, as the evaluator makes them.
  r.stage = ToolRunStage::kLayout;
  const ArenaLayout layout = workload_layout(pack.definition, rw);
  auto laid = runner.set_layout(layout, options.timeout_s);
  if (laid.kind != CallOutcome::Kind::kOk) return finish(&laid);
  BlobCache blobs;
  auto inputs = materialize_inputs(pack, rw, derive_seed(options.seed, w->uuid, 0, kToolInputs), blobs);
  if (!inputs.ok()) {
    runner.stop();
    return inputs.status().with_context("workload " + w->uuid);
  }
  const uint64_t guard_seed = derive_seed(options.seed, w->uuid, 0, kToolGuard);

  // Phase: warm-up calls, then the one call the tool looks at. Every call re-uploads fresh inputs
  // and guards, so a warm-up that corrupted something cannot change what the last call sees.
  uint64_t seq = 0;
  for (int i = 0; i <= options.warmup; ++i) {
    const bool last = i == options.warmup;
    r.stage = last ? ToolRunStage::kCall : ToolRunStage::kWarmup;
    for (size_t k = 0; k < layout.inputs.size(); ++k) runner.arena().write(layout.inputs[k], inputs->tensors[k]);
    runner.arena().fill_guards(layout, guard_seed);
    for (size_t k = 0; k < layout.outputs.size(); ++k)
      runner.arena().poison(layout.outputs[k], derive_seed(options.seed, w->uuid, seq * 131 + k, kToolPoison));
    CallRequest call{.seq = ++seq};
    call.profile_range = last && options.profile_range;
    if (last) progress(options.profile_range ? "profiled call" : "last call");
    auto o = runner.call(call, options.timeout_s);
    if (last) {
      r.call_wall_s = o.wall_s;
      r.reply = o.reply;
    }
    if (o.kind != CallOutcome::Kind::kOk) return finish(&o);
  }
  r.damaged_guards = runner.arena().damaged_guards(layout, guard_seed);
  r.stage = ToolRunStage::kDone;
  r.ok = true;
  return finish(nullptr);
}

}  // namespace kda::eval
