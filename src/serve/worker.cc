#include "serve/worker.h"

#include <signal.h>
#include <sys/prctl.h>

#include <chrono>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "proc/subprocess.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kda::serve {

namespace stdfs = std::filesystem;

Result<std::vector<Device>> parse_devices(const std::string& text) {
  std::vector<Device> out;
  std::set<std::string> seen;
  for (const std::string& item : util::split_list(text)) {
    const bool cuda = item.starts_with("cuda:");
    const bool cpu = item == "cpu" || item.starts_with("cpu:");
    const std::string number = cuda ? item.substr(5) : item.size() > 4 ? item.substr(4) : "1";
    int n = -1;
    if ((cuda || cpu) && !number.empty() && number.find_first_not_of("0123456789") == std::string::npos &&
        number.size() < 4)
      n = std::stoi(number);
    if (n < 0 || (cpu && n == 0))
      return Status::bad_input(fmt::format(
          "--devices: '{}' is not a device (cuda:N for GPU N, cpu for one host worker, cpu:N for N host workers)",
          item));
    if (cuda) {
      if (!seen.insert(item).second) return Status::bad_input(fmt::format("--devices: '{}' is named twice", item));
      out.push_back({.name = item, .cuda = true, .index = n});
      continue;
    }
    if (!seen.insert("cpu").second) return Status::bad_input("--devices: cpu is named twice (cpu:N gives N workers)");
    for (int i = 0; i < n; ++i) out.push_back({.name = fmt::format("cpu:{}", i), .cuda = false, .index = i});
  }
  if (out.empty()) return Status::bad_input("--devices: names no device");
  return out;
}

std::vector<std::string> eval_argv(const EvalSettings& s, const Entry& entry, const Task& task,
                                   const stdfs::path& dir) {
  std::vector<std::string> argv = {s.kda_binary.string(), "eval", (dir / "solution.json").string()};
  if (!entry.pack_dir.empty()) {
    argv.insert(argv.end(), {"--task", entry.pack_dir.string()});
  } else {
    argv.insert(argv.end(), {"--task", entry.fib_root.string(), "--definition", entry.name});
  }
  argv.insert(argv.end(), {"--workloads", task.workload_uuids ? util::join(*task.workload_uuids, ",") : "all"});
  argv.insert(argv.end(), {"--traces", (dir / "traces.jsonl").string(), "--quiet"});
  // The request's own timing (kda_timing) before the server's.
  const TaskTiming& t = task.timing;
  if (auto w = t.warmup ? t.warmup : s.warmup) argv.insert(argv.end(), {"--warmup", std::to_string(*w)});
  if (auto i = t.iterations ? t.iterations : s.iterations)
    argv.insert(argv.end(), {"--iterations", std::to_string(*i)});
  if (auto n = t.trials ? t.trials : s.trials) argv.insert(argv.end(), {"--trials", std::to_string(*n)});
  if (t.baseline && !*t.baseline) argv.push_back("--no-baseline");
  if (!t.baseline_solution.is_null()) argv.insert(argv.end(), {"--baseline", (dir / "baseline.json").string()});
  return argv;
}

namespace {

// The workloads a task selects: its list, or every visible workload. Unknown ones (and holdout ones
// the operator did not allow) are named in `unknown`.
std::vector<nlohmann::json> selected_workloads(const EvalSettings& s, const Entry& entry, const Task& task,
                                               std::vector<std::string>& unknown) {
  if (!task.workload_uuids) return entry.workloads;
  std::vector<nlohmann::json> out;
  for (const auto& u : *task.workload_uuids) {
    bool found = false;
    for (const auto& w : entry.workloads)
      if (w.value("uuid", "") == u) out.push_back(w), found = true;
    if (!found && s.allow_holdout && entry.holdout.count(u)) out.push_back({{"uuid", u}}), found = true;
    if (!found) unknown.push_back(u);
  }
  return out;
}

// FlashInfer-Bench traces with status TIMEOUT for every selected workload (the evaluation as a whole
// ran past the server's --timeout; no workload's result is known).
nlohmann::json timeout_traces(const Task& task, const std::vector<nlohmann::json>& workloads, double timeout_s) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& w : workloads)
    out.push_back(
        {{"definition", task.definition},
         {"workload", w},
         {"solution", task.solution},
         {"evaluation",
          {{"status", "TIMEOUT"},
           {"log", fmt::format("the evaluation ran past the server's --timeout of {} s and was killed", timeout_s)},
           {"correctness", nullptr},
           {"performance", nullptr},
           {"environment", nlohmann::json::object()}}}});
  return out;
}

std::vector<std::string> child_env(const Device& device) {
  std::vector<std::string> env;
  for (auto& kv : proc::current_environment())
    if (!kv.starts_with("CUDA_VISIBLE_DEVICES=")) env.push_back(kv);
  // A host worker's evaluations see no GPU; a GPU worker's see exactly its GPU.
  env.push_back("CUDA_VISIBLE_DEVICES=" + (device.cuda ? std::to_string(device.index) : std::string()));
  return env;
}

// Reads the traces `kda eval --traces` wrote, one JSON per line.
Result<nlohmann::json> read_traces(const stdfs::path& file) {
  auto text = fs::read_file(file);
  if (!text.ok()) return text.status();
  nlohmann::json out = nlohmann::json::array();
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    if (util::trim_space(line).empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) return Status::internal(fmt::format("{}: a line that is not JSON", file.string()));
    out.push_back(std::move(j));
  }
  return out;
}

// The last lines of what `kda eval` said on stderr: the reason a task failed.
std::string tail_lines(const std::string& text, size_t n) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!util::trim_space(line).empty()) lines.push_back(line);
  if (lines.size() > n) lines.erase(lines.begin(), lines.end() - static_cast<ptrdiff_t>(n));
  return util::join(lines, "\n");
}

}  // namespace

Outcome evaluate_task(const EvalSettings& s, const Dataset& data, const Device& device, const Task& task,
                      const std::atomic<bool>& cancelled) {
  const auto t0 = std::chrono::steady_clock::now();
  Outcome out;
  const Entry* entry = data.find(task.definition);
  if (entry == nullptr) return {.error = fmt::format("definition '{}' is not served here", task.definition)};
  std::vector<std::string> unknown;
  const auto workloads = selected_workloads(s, *entry, task, unknown);
  if (!unknown.empty())
    return {.error = fmt::format("no workload {} of definition '{}'", util::join(unknown, ", "), task.definition)};
  if (workloads.empty()) return {.error = "the task selects no workload"};
  const stdfs::path dir = s.work_dir / task.id;
  if (Status st = fs::ensure_dir(dir); !st.ok()) return {.error = st.message()};
  // The task's files go once its traces are read (they are in the store, and on the client's side).
  struct RemoveDir {
    stdfs::path dir;
    ~RemoveDir() {
      std::error_code ec;
      stdfs::remove_all(dir, ec);
    }
  } remove_dir{dir};
  if (!task.timing.baseline_solution.is_null())
    if (Status st = fs::write_file_atomic(dir / "baseline.json", task.timing.baseline_solution.dump(2)); !st.ok())
      return {.error = "writing the baseline solution: " + st.message()};
  if (Status st = fs::write_file_atomic(dir / "solution.json", task.solution_json.dump(2)); !st.ok())
    return {.error = st.message()};
  proc::ChildOptions co{.argv = eval_argv(s, *entry, task, dir), .env = child_env(device)};
  // The evaluation dies with the worker that started it (a server killed with -9 leaves no stray runs).
  co.pre_exec = [] { return ::prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 ? 0 : errno; };
  auto child = proc::Child::spawn(std::move(co));
  if (!child.ok()) return {.error = "could not start kda eval: " + child.status().message()};
  const auto deadline = proc::Deadline::after_seconds(s.timeout_s);
  std::optional<proc::ExitInfo> exit;
  bool timed_out = false;
  while (!(exit = child->wait(proc::Deadline::after_seconds(0.1).min(deadline)))) {
    if (cancelled.load() || deadline.expired()) {
      timed_out = !cancelled.load();
      child->kill_group();
      exit = child->wait_or_kill(proc::Deadline::after_seconds(5));
      break;
    }
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (cancelled.load()) return {.error = "the server shut down while this task ran", .wall_s = out.wall_s};
  if (timed_out) {
    out.traces = timeout_traces(task, workloads, s.timeout_s);
    return out;
  }
  const std::string err = child->take_stderr();
  auto traces = read_traces(dir / "traces.jsonl");
  if ((exit->exit_code != 0 && exit->exit_code != 1) || !traces.ok())
    return {.error = fmt::format("kda eval ended with {}: {}", exit->describe(), tail_lines(err, 6)),
            .wall_s = out.wall_s};
  out.traces = std::move(*traces);
  return out;
}

void run_worker(const EvalSettings& s, const Dataset& data, const Device& device, TaskStore& store,
                const std::atomic<bool>& cancelled, const std::function<void(const std::string&)>& log) {
  while (auto task = store.next(device.name)) {
    log(fmt::format("{}: task {} ({} / {}) started", device.name, task->id, task->definition, task->solution));
    Outcome o = evaluate_task(s, data, device, *task, cancelled);
    if (o.traces) {
      std::map<std::string, int> statuses;
      for (const auto& t : *o.traces) ++statuses[t["evaluation"].value("status", "?")];
      std::string summary;
      for (const auto& [k, n] : statuses) summary += fmt::format("{}{} {}", summary.empty() ? "" : ", ", n, k);
      log(fmt::format("{}: task {} completed in {:.1f} s: {}", device.name, task->id, o.wall_s, summary));
      store.complete(task->id, std::move(*o.traces));
    } else {
      log(fmt::format("{}: task {} failed: {}", device.name, task->id, o.error));
      store.fail(task->id, std::move(o.error));
    }
  }
}

}  // namespace kda::serve
