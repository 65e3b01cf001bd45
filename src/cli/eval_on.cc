// Evaluations over a pool of `kda serve` instances: jobs queued durably (src/exec) and spread by the
// dispatcher; the servers' traces make one report per job.
#ifdef KDA_HAVE_EXEC
#include "cli/eval_on.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "exec/dispatcher.h"
#include "exec/pool.h"
#include "exec/queue.h"
#include "task/manifest.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kda::cli {

namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

// Options a server's `kda eval` does not take from a request; timing overrides reach only a server
// kda starts itself.
Status check_on_options(const Args& args, bool local) {
  KDA_RETURN_IF_ERROR(refuse_with_on(args,
                                     {"against", "baseline", "no-baseline", "seed", "sealed", "no-sandbox",
                                      "host-inputs", "arch", "call-timeout", "definition", "graph-contract"},
                                     "the servers evaluate as `kda eval` does by default (run without --on for it)"));
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

// A local server's extra flags: `kda eval`'s timing overrides and, when holdout workloads may be
// evaluated, leave to evaluate them.
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

// What a server must judge by for the pool to give it tasks: a kda pack's judged files
// (task::judged_part, as GET /definitions/{name}/manifest serves them), or a FlashInfer-Bench
// definition and its visible workloads as GET /definitions/{name} and .../workloads return them.
struct Expected {
  std::optional<task::Manifest> judged;  // kda packs
  json definition, workloads;            // FlashInfer-Bench definitions
};

Result<Expected> expected_of(const task::TaskPack& pack) {
  Expected e;
  if (pack.python_reference_only) {
    e.definition = json::parse(pack.definition.to_json().dump());
    e.workloads = json::array();
    for (const auto& w : pack.workloads) e.workloads.push_back(w.to_json());
    return e;
  }
  KDA_ASSIGN_OR_RETURN(task::Manifest m, task::pack_manifest(pack.root));
  e.judged = task::judged_part(m);
  return e;
}

// "" when `server` judges `name` by what `want` holds; else why not, with the files that differ.
std::string judges_another_pack(const exec::ServerSpec& server, const std::string& name, const stdfs::path& root,
                                const Expected& want) {
  if (want.judged) {
    auto got = exec::get_json(server, "/definitions/" + name + "/manifest");
    if (!got.ok()) return "cannot show the pack it judges by: " + got.status().message();
    auto m = task::Manifest::from_json(*got);
    if (!m.ok()) return "its pack manifest does not read: " + m.status().message();
    const task::ManifestDiff d = task::manifest_diff(*want.judged, *m);
    if (d.empty()) return {};
    return fmt::format("it judges '{}' by another pack than {} ({}, as the server has it)", name, root.string(),
                       task::describe(d));
  }
  auto def = exec::get_json(server, "/definitions/" + name);
  if (!def.ok()) return def.status().message();
  if (*def != want.definition) return fmt::format("its definition '{}' differs from {}", name, root.string());
  auto ws = exec::get_json(server, "/definitions/" + name + "/workloads");
  if (!ws.ok()) return ws.status().message();
  if (*ws != want.workloads) return fmt::format("its workloads of '{}' differ from {}", name, root.string());
  return {};
}

std::string progress_line(const exec::Progress& p) {
  return fmt::format(
      "[pool] {}/{} server(s) up, {}/{} device(s) busy; tasks: {} queued, {} running, {} done, {} failed{}",
      p.servers_up, p.servers, p.busy, p.devices, p.tasks.queued, p.tasks.running, p.tasks.done, p.tasks.failed,
      p.tasks.retries ? fmt::format(", {} retried", p.tasks.retries) : "");
}

}  // namespace

struct Pool::Impl {
  const task::TaskPack& pack;
  Io& io;
  std::string command;
  bool quiet = false;
  std::string on;  // --on as given (a directory of address files is read again as the dispatch goes)
  std::optional<stdfs::path> token_file;
  exec::PoolSpec spec;
  stdfs::path scratch;  // the queue unless --queue names one, the local server's files; removed at the end
  stdfs::path queue_file;
  bool own_queue = true;
  std::string run;  // names this command's tasks (the same for a rerun with the same --queue)
  std::unique_ptr<exec::TaskQueue> queue;
  std::unique_ptr<exec::LocalServe> local;
  Expected expected;  // what a server must judge by (judges_another_pack)
  size_t batches = 0;

  Impl(const task::TaskPack& p, Io& i) : pack(p), io(i) {}
  ~Impl() {
    local.reset();  // the local server stops before its directory goes
    std::error_code ec;
    if (!scratch.empty()) stdfs::remove_all(scratch, ec);
  }
  void say(const std::string& line) const {
    if (!quiet) io.err << command << ": " << line << "\n";
  }
};

Pool::Pool(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Pool::~Pool() = default;

Result<std::unique_ptr<Pool>> Pool::open(const Args& args, Io& io, const task::TaskPack& pack,
                                         const std::vector<std::string>& uuids, std::string command) {
  auto impl = std::make_unique<Impl>(pack, io);
  impl->command = std::move(command);
  impl->quiet = args.flag("quiet");
  impl->on = *args.value("on");
  if (auto t = args.value("token-file")) impl->token_file = *t;
  KDA_ASSIGN_OR_RETURN(impl->spec, exec::parse_pool(impl->on, impl->token_file));
  impl->scratch = fs::user_cache_dir("KDA_CACHE_DIR") / "dispatch" /
                  fmt::format("{}-{}", pack.definition.name.substr(0, 40), ::getpid());
  KDA_RETURN_IF_ERROR(fs::ensure_dir(impl->scratch));
  impl->own_queue = !args.value("queue");
  impl->queue_file = impl->own_queue ? impl->scratch / "queue.sqlite" : stdfs::absolute(*args.value("queue"));
  // Task ids carry this run's name: a server that still holds an earlier evaluation's task of the same
  // solution would otherwise hand its traces back; a rerun with the same --queue file resumes.
  impl->run =
      sha256_hex(impl->queue_file.string() +
                 (impl->own_queue ? fmt::format("{}", std::chrono::system_clock::now().time_since_epoch().count())
                                  : std::string()))
          .substr(0, 8);
  KDA_ASSIGN_OR_RETURN(impl->queue, exec::TaskQueue::open(impl->queue_file));
  KDA_ASSIGN_OR_RETURN(impl->expected, expected_of(pack));
  if (impl->spec.local) {
    std::error_code ec;
    const stdfs::path self = stdfs::read_symlink("/proc/self/exe", ec);
    if (ec) return Status::io("cannot find the kda binary (/proc/self/exe)");
    KDA_ASSIGN_OR_RETURN(impl->local, exec::LocalServe::start({.kda_binary = self,
                                                               .dataset = pack.root,
                                                               .devices = *impl->spec.local,
                                                               .dir = impl->scratch / "serve",
                                                               .extra_args = local_flags(args, pack, uuids)}));
    impl->spec.servers.push_back(impl->local->spec());
    impl->say(
        fmt::format("started kda serve at {} (log {})", impl->local->spec().url, impl->local->log_file().string()));
  }
  return std::unique_ptr<Pool>(new Pool(std::move(impl)));
}

size_t Pool::devices_hint() const {
  if (impl_->spec.local) {
    const std::string& d = *impl_->spec.local;
    return std::max<size_t>(1, std::count(d.begin(), d.end(), ',') + 1);
  }
  return std::max<size_t>(1, impl_->spec.servers.size());
}

Result<std::vector<OnResult>> Pool::run(const std::vector<PoolJob>& jobs) {
  Impl& p = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  // Phase 1: the queue, one task per job. Its id names the solution's content, this run, the batch (a
  // solution evaluated again is measured again, not joined to its earlier task) and what the job asks
  // (workloads, timing). A rerun with the same --queue numbers its batches alike and finds its tasks.
  std::vector<std::string> ids;
  const std::string batch = fmt::format("b{}", p.batches++);
  for (const auto& job : jobs) {
    json request = {{"solution", job.solution.to_json()}, {"workload_uuids", job.uuids}};
    if (!job.timing.empty()) request["kda_timing"] = job.timing;
    std::string what = job.uuids.size() == 1 ? job.uuids.front() : sha256_hex(json(job.uuids).dump()).substr(0, 16);
    if (!job.timing.empty()) what += "-" + sha256_hex(job.timing.dump()).substr(0, 8);
    ids.push_back(task::solution_hash(job.solution).substr(0, 12) + "-" + p.run + "-" + batch + "-" + what);
    KDA_ASSIGN_OR_RETURN(auto added, p.queue->enqueue(ids.back(), request));
    if (added == exec::TaskQueue::Enqueued::kConflict)
      return Status::bad_input(
          fmt::format("--queue {}: task {} is there with another request", p.queue_file.string(), ids.back()));
  }
  KDA_ASSIGN_OR_RETURN(exec::QueueCounts before, p.queue->counts());
  if (batch == "b0" && before.done + before.failed > 0)
    p.say(fmt::format("resuming {}: {} task(s) already finished", p.queue_file.string(), before.done + before.failed));

  // Phase 2: the dispatch.
  exec::DispatchOptions o;
  o.progress = [&](const exec::Progress& pr) { p.say(progress_line(pr)); };
  o.log = [&](const std::string& line) { p.say(line); };
  // A server gets tasks only if it judges by the same pack: the run's seal (or the pack given to
  // kda eval / kda tune) holds on every server, remote ones included.
  o.admit = [&](const exec::ServerSpec& server) {
    return judges_another_pack(server, p.pack.definition.name, p.pack.root, p.expected);
  };
  std::error_code ec;
  if (stdfs::is_directory(p.on, ec))
    o.discover = [&]() -> std::vector<exec::ServerSpec> {
      auto again = exec::parse_pool(p.on, p.token_file);
      return again.ok() ? again->servers : std::vector<exec::ServerSpec>{};
    };
  KDA_RETURN_IF_ERROR(exec::dispatch(*p.queue, p.spec.servers, o));

  // Phase 3: a report per job, workload by workload in the job's order.
  KDA_ASSIGN_OR_RETURN(exec::QueueCounts c, p.queue->counts());
  json servers = json::array();
  for (const auto& s : p.spec.servers) servers.push_back(s.url);
  std::vector<OnResult> out;
  for (size_t j = 0; j < jobs.size(); ++j) {
    OnResult r;
    r.report.definition = p.pack.definition.name;
    r.report.solution = jobs[j].solution.name;
    r.report.backend = std::string(task::backend_name(p.pack.backend));
    json failed = json::array();
    KDA_ASSIGN_OR_RETURN(auto t, p.queue->find(ids[j]));
    const json traces = t && t->result ? t->result->value("traces", json::array()) : json::array();
    if (!t || t->state != exec::TaskState::kDone || traces.size() != jobs[j].uuids.size()) {
      failed.push_back(
          {{"task_id", ids[j]},
           {"error", !t ? std::string("not in the queue")
                     : t->state != exec::TaskState::kDone
                         ? t->error
                         : fmt::format("{} trace(s) for {} workload(s)", traces.size(), jobs[j].uuids.size())}});
      r.complete = false;
    } else {
      for (const auto& trace : traces) {
        KDA_ASSIGN_OR_RETURN(eval::WorkloadResult w, eval::workload_from_trace(trace));
        if (r.report.baseline_name.empty() && w.kda.contains("baseline"))
          r.report.baseline_name = w.kda["baseline"].value("name", std::string());
        r.traces.push_back(trace);
        r.report.workloads.push_back(std::move(w));
      }
    }
    eval::score_report(r.report);
    r.report.all_passed = r.report.all_passed && r.complete;
    r.report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.dispatch = {{"servers", servers},
                  {"tasks", ids.size()},
                  {"done", c.done},
                  {"failed", c.failed},
                  {"already_finished", before.done + before.failed},
                  {"retries", c.retries},
                  {"failed_tasks", failed},
                  {"queue", p.own_queue ? json(nullptr) : json(p.queue_file.string())}};
    out.push_back(std::move(r));
  }
  return out;
}

Status refuse_with_on(const Args& args, std::initializer_list<const char*> names, std::string_view why) {
  for (const char* name : names)
    if (args.given(name)) return Status::bad_input(fmt::format("--{} cannot go with --on: {}", name, why));
  return {};
}

json pool_timing(const eval::EvalOptions& o) {
  json timing = {{"baseline", o.with_baseline}};
  if (o.trials) timing["trials"] = *o.trials;
  if (o.warmup) timing["warmup"] = *o.warmup;
  if (o.iterations) timing["iterations"] = *o.iterations;
  if (o.baseline) timing["baseline_solution"] = o.baseline->to_json();
  return timing;
}

Result<OnResult> Pool::evaluate(const task::Solution& solution, const std::vector<std::string>& uuids,
                                const json& timing) {
  KDA_ASSIGN_OR_RETURN(std::vector<OnResult> r, evaluate_many({solution}, uuids, timing));
  return std::move(r.front());
}

Result<std::vector<OnResult>> Pool::evaluate_many(const std::vector<task::Solution>& solutions,
                                                  const std::vector<std::string>& uuids, const json& timing) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<PoolJob> jobs;
  for (const auto& solution : solutions)
    for (const auto& u : uuids) jobs.push_back({.solution = solution, .uuids = {u}, .timing = timing});
  KDA_ASSIGN_OR_RETURN(std::vector<OnResult> parts, run(jobs));
  std::vector<OnResult> out;
  for (size_t s = 0; s < solutions.size(); ++s) {
    OnResult r;
    r.report.definition = impl_->pack.definition.name;
    r.report.solution = solutions[s].name;
    r.report.backend = std::string(task::backend_name(impl_->pack.backend));
    json failed = json::array();
    for (size_t u = 0; u < uuids.size(); ++u) {
      OnResult& part = parts[s * uuids.size() + u];
      r.complete = r.complete && part.complete;
      for (const auto& f : part.dispatch["failed_tasks"]) failed.push_back(f);
      for (auto& t : part.traces) r.traces.push_back(std::move(t));
      for (auto& w : part.report.workloads) r.report.workloads.push_back(std::move(w));
      if (r.report.baseline_name.empty()) r.report.baseline_name = part.report.baseline_name;
    }
    eval::score_report(r.report);
    r.report.all_passed = r.report.all_passed && r.complete;
    r.report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.dispatch = parts.empty() ? json::object() : parts.front().dispatch;
    r.dispatch["failed_tasks"] = failed;
    out.push_back(std::move(r));
  }
  return out;
}

Result<OnResult> evaluate_on(const Args& args, Io& io, const task::TaskPack& pack, const task::Solution& solution) {
  KDA_ASSIGN_OR_RETURN(exec::PoolSpec spec, exec::parse_pool(*args.value("on"), std::nullopt));
  KDA_RETURN_IF_ERROR(check_on_options(args, spec.local.has_value()));
  const std::string which = args.flag("holdout") ? "holdout" : args.value_or("workloads", "dev");
  KDA_ASSIGN_OR_RETURN(std::vector<std::string> uuids, eval::selected_workload_uuids(pack, which));
  KDA_ASSIGN_OR_RETURN(std::unique_ptr<Pool> pool, Pool::open(args, io, pack, uuids, "kda eval"));
  return pool->evaluate(solution, uuids);
}

}  // namespace kda::cli
#endif
