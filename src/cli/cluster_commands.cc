// kda cluster up|status|down: Slurm places `kda serve` instances (src/exec/cluster.h).
#ifdef KDA_HAVE_EXEC
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "exec/cluster.h"

namespace kda::cli {

namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

json status_json(const exec::ClusterStatus& s) {
  return {{"job_id", s.job_id}, {"state", s.state}, {"nodes", s.nodes}, {"servers", s.servers}};
}

void print_status(const exec::ClusterStatus& s, const stdfs::path& dir, std::ostream& out) {
  out << fmt::format("job {}: {}{}\n", s.job_id, s.state, s.nodes.empty() ? "" : " on " + s.nodes);
  for (const auto& srv : s.servers) {
    const json& h = srv["health"];
    out << fmt::format(
        "  {}  {}\n", srv["url"].get<std::string>(),
        h.is_object() ? fmt::format("{} ({}/{} workers healthy, {} queued, {} running)",
                                    h.value("status", std::string("?")), h.value("healthy_workers", 0),
                                    h.value("total_workers", 0), h.value("queue_size", 0), h.value("active_tasks", 0))
                      : std::string("not answering"));
  }
  if (s.servers.empty()) out << "  no server has published its address yet\n";
  out << fmt::format("pool: --on {}\n", (dir / "servers").string());
}

Result<exec::ClusterOptions> up_options(const Args& args) {
  exec::ClusterOptions o;
  o.dir = args.value_or("dir", "");
  o.dataset = args.value_or("task", "");
  if (o.dir.empty() || o.dataset.empty()) return Status::bad_input("--dir and --task are required");
  std::error_code ec;
  o.kda_binary = stdfs::read_symlink("/proc/self/exe", ec);
  if (ec) return Status::io("cannot find the kda binary (/proc/self/exe)");
  for (const char* name : {"nodes", "servers-per-node", "gpus-per-node", "time"}) {
    auto v = args.integer(name);
    if (!v.ok()) return v.status();
    if (!*v) continue;
    const std::string n = name;
    const int x = static_cast<int>(**v);
    if (n == "nodes") o.nodes = x;
    if (n == "servers-per-node") o.servers_per_node = x;
    if (n == "gpus-per-node") o.gpus_per_node = x;
    if (n == "time") o.time_minutes = x;
  }
  o.host_devices = args.value_or("devices", "cpu");
  o.partition = args.value_or("partition", "");
  o.account = args.value_or("account", "");
  const std::pair<const char*, const char*> passed[] = {
      {"num-trials", "--num-trials"}, {"warmup-runs", "--warmup-runs"}, {"iterations", "--iterations"}};
  for (const auto& [name, flag] : passed)
    if (auto v = args.value(name)) o.serve_args.insert(o.serve_args.end(), {flag, *v});
  if (args.flag("allow-holdout")) o.serve_args.push_back("--allow-holdout");
  return o;
}

int run_up(const Args& args, Io& io) {
  auto o = up_options(args);
  if (!o.ok()) {
    return fail(io, "kda cluster up", o.status());
  }
  if (args.flag("dry-run")) {
    auto files = exec::checked_job_files(*o);
    if (!files.ok()) {
      return fail(io, "kda cluster up", files.status());
    }
    io.out << "# job.sh\n" << files->job_script << "\n# node.sh\n" << files->node_script;
    return kExitOk;
  }
  auto id = exec::cluster_up(*o);
  if (!id.ok()) {
    return fail(io, "kda cluster up", id.status());
  }
  io.err << "kda cluster up: submitted job " << *id << "\n";
  auto wait = args.number("wait");
  const double wait_s = wait.ok() && *wait ? **wait : 300;
  const size_t want = static_cast<size_t>(o->nodes) * static_cast<size_t>(o->servers_per_node);
  auto st = wait_s > 0 ? exec::wait_for_servers(o->dir, want, wait_s) : exec::cluster_status(o->dir);
  if (!st.ok()) {
    io.err << "kda cluster up: " << st.status().message() << "\n";
    return kExitFailed;
  }
  if (args.flag("json"))
    io.out << status_json(*st).dump(2) << "\n";
  else
    print_status(*st, stdfs::absolute(o->dir), io.out);
  return kExitOk;
}

int run_status(const Args& args, Io& io) {
  const stdfs::path dir = args.value_or("dir", "");
  auto st = exec::cluster_status(dir);
  if (!st.ok()) {
    return fail(io, "kda cluster status", st.status());
  }
  if (args.flag("json"))
    io.out << status_json(*st).dump(2) << "\n";
  else
    print_status(*st, dir, io.out);
  return kExitOk;
}

int run_down(const Args& args, Io& io) {
  const stdfs::path dir = args.value_or("dir", "");
  Status st = exec::cluster_down(dir);
  if (!st.ok()) {
    return fail(io, "kda cluster down", st);
  }
  io.err << "kda cluster down: the job has left the queue\n";
  return kExitOk;
}

OptionSpec dir_option() {
  return {.name = "dir",
          .metavar = "DIR",
          .help = "the cluster's directory on the shared filesystem (job script, token, servers/, logs/)",
          .env = "KDA_CLUSTER_DIR"};
}

}  // namespace

std::vector<CommandSpec> cluster_commands() {
  return {
      {.name = "cluster up",
       .summary = "Submit a Slurm job that runs kda serve on its nodes and publishes their addresses",
       .description =
           "Writes DIR/job.sh (sbatch --requeue, --nodes, --ntasks-per-node, --gres=gpu:G, --time) and\n"
           "DIR/node.sh (one kda serve per srun task, on that task's share of the node's GPUs, bound to the\n"
           "node's hostname with DIR/token as its bearer token), submits the job and waits (--wait) until every\n"
           "server answers /health. Each server writes DIR/servers/<node>-<task>.json, which `--on DIR/servers`\n"
           "reads. Slurm ends the job at --time (the run's budget); `kda cluster down` cancels it sooner.",
       .options =
           {dir_option(),
            {.name = "task", .metavar = "DIR", .help = "what the servers serve (kda serve --local)"},
            {.name = "nodes", .metavar = "N", .help = "nodes", .default_value = "1"},
            {.name = "servers-per-node", .metavar = "N", .help = "kda serve instances per node", .default_value = "1"},
            {.name = "gpus-per-node",
             .metavar = "G",
             .help = "GPUs per node (--gres=gpu:G; 0: host workers)",
             .default_value = "0"},
            {.name = "devices",
             .metavar = "LIST",
             .help = "without GPUs: each server's --devices",
             .default_value = "cpu"},
            {.name = "partition", .metavar = "NAME", .help = "Slurm partition"},
            {.name = "account", .metavar = "NAME", .help = "Slurm account"},
            {.name = "time",
             .metavar = "MIN",
             .help = "the job's time limit in minutes (the budget)",
             .default_value = "60"},
            {.name = "num-trials", .metavar = "N", .help = "passed to each kda serve"},
            {.name = "warmup-runs", .metavar = "N", .help = "passed to each kda serve"},
            {.name = "iterations", .metavar = "N", .help = "passed to each kda serve"},
            {.name = "allow-holdout", .help = "passed to each kda serve"},
            {.name = "wait",
             .metavar = "S",
             .help = "wait this long for every server (0: do not wait)",
             .default_value = "300"},
            {.name = "dry-run", .help = "print job.sh and node.sh; submit nothing"},
            json_option()},
       .run = run_up},
      {.name = "cluster status",
       .summary = "The cluster job's state and each server's health",
       .description = "squeue for the job in DIR/cluster.json, and GET /health of every server in DIR/servers.",
       .options = {dir_option(), json_option()},
       .run = run_status},
      {.name = "cluster down",
       .summary = "Cancel the cluster job (scancel) and wait until it has left the queue",
       .description = "scancel the job in DIR/cluster.json; its servers stop and the address files are removed.",
       .options = {dir_option()},
       .run = run_down},
  };
}

}  // namespace kda::cli
#endif  // KDA_HAVE_EXEC
