// kda eval --on <pool>: one task per selected workload, queued durably and spread by the dispatcher
// (src/exec) over `kda serve` instances; the servers' traces make one report.
#ifdef KDA_HAVE_EXEC
#include "cli/eval_on.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include <fmt/format.h>

#include "exec/dispatcher.h"
#include "exec/pool.h"
#include "exec/queue.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kda::cli {

namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

// Options a server's `kda eval` does not take from a request; timing overrides reach only a server
// kda starts itself.
Status check_on_options(const Args& args, bool local) {
  for (const char* name : {"against", "baseline", "no-baseline", "seed", "sealed", "no-sandbox", "host-inputs", "arch",
                           "call-timeout", "definition"})
    if (args.given(name))
      return Status::bad_input(fmt::format(
          "--{} cannot go with --on: the servers evaluate as `kda eval` does by default (run without --on for it)",
          name));
  if (args.value_or("reference", "pack") != "pack")
    return Status::bad_input("--reference cannot go with --on: each server judges by its dataset's reference");
  if (!local)
    for (const char* name : {"trials", "warmup", "iterations"})
      if (args.given(name))
        return Status::bad_input(
            fmt::format("--{} reaches only a server kda starts (--on local): a remote server's timing is its own "
                        "(kda serve --num-trials, --warmup-runs, --iterations)",
                        name));
  return {};
}

// A local server's extra flags: timing overrides and, when holdout workloads are selected, leave
// to evaluate them.
std::vector<std::string> local_flags(const Args& args, const task::TaskPack& pack,
                                     const std::vector<std::string>& uuids) {
  std::vector<std::string> out;
  const std::pair<const char*, const char*> map[] = {
      {"trials", "--num-trials"}, {"warmup", "--warmup-runs"}, {"iterations", "--iterations"}};
  for (const auto& [ours, theirs] : map)
    if (auto v = args.value(ours)) out.insert(out.end(), {theirs, *v});
  for (const auto& u : uuids)
    for (const auto& h : pack.holdout)
      if (h.uuid == u) {
        out.push_back("--allow-holdout");
        return out;
      }
  return out;
}

std::string progress_line(const exec::Progress& p) {
  return fmt::format(
      "[pool] {}/{} server(s) up, {}/{} device(s) busy; tasks: {} queued, {} running, {} done, {} failed{}",
      p.servers_up, p.servers, p.busy, p.devices, p.tasks.queued, p.tasks.running, p.tasks.done, p.tasks.failed,
      p.tasks.retries ? fmt::format(", {} retried", p.tasks.retries) : "");
}

// The evaluation's scratch directory (its queue unless --queue names one, the local server's files),
// removed at the end.
struct Scratch {
  stdfs::path dir;
  ~Scratch() {
    std::error_code ec;
    if (!dir.empty()) stdfs::remove_all(dir, ec);
  }
};

}  // namespace

Result<OnResult> evaluate_on(const Args& args, Io& io, const task::TaskPack& pack, const task::Solution& solution) {
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<stdfs::path> token_file;
  if (auto t = args.value("token-file")) token_file = *t;
  KDA_ASSIGN_OR_RETURN(exec::PoolSpec pool, exec::parse_pool(*args.value("on"), token_file));
  KDA_RETURN_IF_ERROR(check_on_options(args, pool.local.has_value()));
  const std::string which = args.flag("holdout") ? "holdout" : args.value_or("workloads", "dev");
  KDA_ASSIGN_OR_RETURN(std::vector<std::string> uuids, eval::selected_workload_uuids(pack, which));
  const bool quiet = args.flag("quiet");
  auto say = [&](const std::string& line) {
    if (!quiet) io.err << "kda eval: " << line << "\n";
  };

  // Phase 1: the queue, one task per workload. A task id names the solution's content, this evaluation
  // and the workload: a server that still has it joins it instead of running it again, and a rerun
  // with the same --queue file resumes it, while another evaluation of the same solution is measured
  // afresh (a server would otherwise hand back the earlier evaluation's traces).
  const std::string hash = task::solution_hash(solution).substr(0, 12);
  Scratch scratch;
  scratch.dir = fs::user_cache_dir("KDA_CACHE_DIR") / "dispatch" / fmt::format("{}-{}", hash, ::getpid());
  KDA_RETURN_IF_ERROR(fs::ensure_dir(scratch.dir));
  const stdfs::path queue_file =
      args.value("queue") ? stdfs::absolute(*args.value("queue")) : scratch.dir / "queue.sqlite";
  const std::string run =
      sha256_hex(
          queue_file.string() +
          (args.value("queue") ? "" : fmt::format("{}", std::chrono::system_clock::now().time_since_epoch().count())))
          .substr(0, 8);
  KDA_ASSIGN_OR_RETURN(auto queue, exec::TaskQueue::open(queue_file));
  const json sol = solution.to_json();
  std::vector<std::string> ids;
  for (const auto& uuid : uuids) {
    ids.push_back(hash + "-" + run + "-" + uuid);
    KDA_ASSIGN_OR_RETURN(auto added,
                         queue->enqueue(ids.back(), {{"solution", sol}, {"workload_uuids", json::array({uuid})}}));
    if (added == exec::TaskQueue::Enqueued::kConflict)
      return Status::bad_input(
          fmt::format("--queue {}: task {} is there with another request", queue_file.string(), ids.back()));
  }

  KDA_ASSIGN_OR_RETURN(exec::QueueCounts before, queue->counts());
  if (before.done + before.failed > 0)
    say(fmt::format("resuming {}: {} of {} task(s) already finished", queue_file.string(), before.done + before.failed,
                    ids.size()));

  // Phase 2: the servers (a local one started here), then the dispatch.
  std::unique_ptr<exec::LocalServe> local;
  if (pool.local) {
    std::error_code ec;
    const stdfs::path self = stdfs::read_symlink("/proc/self/exe", ec);
    if (ec) return Status::io("cannot find the kda binary (/proc/self/exe)");
    KDA_ASSIGN_OR_RETURN(local, exec::LocalServe::start({.kda_binary = self,
                                                         .dataset = pack.root,
                                                         .devices = *pool.local,
                                                         .dir = scratch.dir / "serve",
                                                         .extra_args = local_flags(args, pack, uuids)}));
    pool.servers.push_back(local->spec());
    say(fmt::format("started kda serve at {} (log {})", local->spec().url, local->log_file().string()));
  }
  exec::DispatchOptions o;
  o.progress = [&](const exec::Progress& p) { say(progress_line(p)); };
  o.log = say;
  // A directory of address files is read again as the dispatch goes: a server that comes back under
  // a new address (a requeued Slurm job) joins.
  std::error_code ec;
  if (stdfs::is_directory(*args.value("on"), ec))
    o.discover = [&]() -> std::vector<exec::ServerSpec> {
      auto again = exec::parse_pool(*args.value("on"), token_file);
      return again.ok() ? again->servers : std::vector<exec::ServerSpec>{};
    };
  KDA_RETURN_IF_ERROR(exec::dispatch(*queue, pool.servers, o));

  // Phase 3: the report, workload by workload in the selection's order.
  OnResult r;
  r.report.definition = pack.definition.name;
  r.report.solution = solution.name;
  r.report.backend = std::string(task::backend_name(pack.backend));
  json failed = json::array(), servers = json::array();
  for (const auto& s : pool.servers) servers.push_back(s.url);
  for (const auto& id : ids) {
    KDA_ASSIGN_OR_RETURN(auto t, queue->find(id));
    const json traces = t && t->result ? t->result->value("traces", json::array()) : json::array();
    if (!t || t->state != exec::TaskState::kDone || traces.size() != 1) {
      failed.push_back({{"task_id", id}, {"error", t ? t->error : "not in the queue"}});
      r.complete = false;
      continue;
    }
    KDA_ASSIGN_OR_RETURN(eval::WorkloadResult w, eval::workload_from_trace(traces[0]));
    if (r.report.baseline_name.empty() && w.kda.contains("baseline"))
      r.report.baseline_name = w.kda["baseline"].value("name", std::string());
    r.traces.push_back(traces[0]);
    r.report.workloads.push_back(std::move(w));
  }
  eval::score_report(r.report);
  r.report.all_passed = r.report.all_passed && r.complete;
  r.report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  KDA_ASSIGN_OR_RETURN(exec::QueueCounts c, queue->counts());
  r.dispatch = {{"servers", servers},
                {"tasks", ids.size()},
                {"done", c.done},
                {"failed", c.failed},
                {"already_finished", before.done + before.failed},
                {"retries", c.retries},
                {"failed_tasks", failed},
                {"queue", args.value("queue") ? json(queue_file.string()) : json(nullptr)}};
  return r;
}

}  // namespace kda::cli
#endif
