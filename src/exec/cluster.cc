#include "exec/cluster.h"

#include <sys/stat.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

#include "exec/pool.h"
#include "proc/subprocess.h"
#include "util/fs.h"
#include "util/random.h"
#include "util/strings.h"

namespace kda::exec {

namespace stdfs = std::filesystem;
using nlohmann::json;

namespace {

// A path for the scripts, single-quoted; kBadInput for one that holds a quote.
Result<std::string> quoted(const stdfs::path& p, const char* what) {
  const std::string s = p.string();
  if (s.find('\'') != std::string::npos || s.find('\n') != std::string::npos)
    return Status::bad_input(fmt::format("{} '{}': quotes and newlines are not allowed in it", what, s));
  return "'" + s + "'";
}

Status check(const ClusterOptions& o) {
  if (o.nodes < 1) return Status::bad_input("--nodes must be at least 1");
  if (o.servers_per_node < 1) return Status::bad_input("--servers-per-node must be at least 1");
  if (o.gpus_per_node < 0) return Status::bad_input("--gpus-per-node must be >= 0");
  if (o.gpus_per_node % o.servers_per_node != 0)
    return Status::bad_input(fmt::format("--gpus-per-node {} does not split over --servers-per-node {}",
                                         o.gpus_per_node, o.servers_per_node));
  if (o.time_minutes < 1) return Status::bad_input("--time must be at least 1 minute");
  std::error_code ec;
  if (!stdfs::exists(o.dataset, ec)) return Status::bad_input("--task " + o.dataset.string() + ": no such directory");
  for (const auto& [p, what] : {std::pair{o.dir, "--dir"}, {o.kda_binary, "kda binary"}, {o.dataset, "--task"}})
    KDA_RETURN_IF_ERROR(quoted(p, what).status());
  return {};
}

Result<json> read_json(const stdfs::path& file) {
  KDA_ASSIGN_OR_RETURN(std::string text, fs::read_file(file));
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::bad_input(file.string() + ": not JSON");
  return j;
}

}  // namespace

JobFiles job_files(const ClusterOptions& o) {
  const std::string dir = *quoted(o.dir, "--dir");
  std::string job = "#!/bin/bash\n";
  job += "#SBATCH --job-name=kda-serve\n";
  job += fmt::format("#SBATCH --nodes={}\n#SBATCH --ntasks-per-node={}\n", o.nodes, o.servers_per_node);
  job += "#SBATCH --requeue\n";
  job += fmt::format("#SBATCH --time={}\n", o.time_minutes);
  job += fmt::format("#SBATCH --output={}/logs/slurm-%j.out\n", o.dir.string());
  if (o.gpus_per_node > 0) job += fmt::format("#SBATCH --gres=gpu:{}\n", o.gpus_per_node);
  if (!o.partition.empty()) job += fmt::format("#SBATCH --partition={}\n", o.partition);
  if (!o.account.empty()) job += fmt::format("#SBATCH --account={}\n", o.account);
  job += "# kda cluster up: each srun task runs one kda serve (node.sh); --kill-on-bad-exit=0 keeps the\n";
  job += "# others serving when one dies, and their tasks are requeued by the dispatcher.\n";
  job += fmt::format("exec srun --kill-on-bad-exit=0 bash {}/node.sh\n", dir);

  std::string serve_args;
  for (const auto& a : o.serve_args) serve_args += " " + util::shell_quote(a);
  std::string node =
      "#!/bin/bash\n# One kda serve: a task of the kda cluster job, named after its node and local task id.\n";
  node += "set -eu\n";
  node += "name=\"$(hostname -s)-${SLURM_LOCALID:-0}\"\n";
  node += fmt::format("devices={}\n", util::shell_quote(o.host_devices.empty() ? "cpu" : o.host_devices));
  if (o.gpus_per_node > 0) {
    node += "# This task's share of the GPUs Slurm gave the job on this node.\n";
    node += "IFS=, read -r -a gpus <<< \"${CUDA_VISIBLE_DEVICES:-}\"\n";
    node += fmt::format("per=$(( ${{#gpus[@]}} / {} ))\n", o.servers_per_node);
    node += "start=$(( ${SLURM_LOCALID:-0} * per ))\n";
    node += "devices=$(printf 'cuda:%s,' \"${gpus[@]:start:per}\")\n";
    node += "devices=${devices%,}\n";
  }
  node += "# The address others reach this node by: its hostname where that resolves, else its first address.\n";
  node += "host=$(hostname)\n";
  node += "getent hosts \"$host\" > /dev/null || host=$(hostname -I 2> /dev/null | awk '{print $1}')\n";
  node += "host=${host:-127.0.0.1}\n";
  node += fmt::format("rm -f {}/servers/\"$name\".json\n", dir);
  node += fmt::format(
      "exec {} serve --local {} --host \"$host\" --port 0 --devices \"$devices\" --token-file {}/token \\\n"
      "  --address-file {}/servers/\"$name\".json --work-dir {}/work/\"$name\"{} > {}/logs/serve-\"$name\".log 2>&1\n",
      *quoted(o.kda_binary, "kda"), *quoted(o.dataset, "--task"), dir, dir, dir, serve_args, dir);
  return {job, node};
}

namespace {

// The options with absolute paths (the nodes run the scripts from elsewhere), checked.
Result<ClusterOptions> normalized(ClusterOptions o) {
  o.dir = stdfs::absolute(o.dir);
  o.dataset = stdfs::absolute(o.dataset);
  KDA_RETURN_IF_ERROR(check(o));
  return o;
}

}  // namespace

Result<JobFiles> checked_job_files(ClusterOptions o) {
  KDA_ASSIGN_OR_RETURN(o, normalized(std::move(o)));
  return job_files(o);
}

Result<std::string> cluster_up(const ClusterOptions& given) {
  KDA_ASSIGN_OR_RETURN(const ClusterOptions o, normalized(given));
  const JobFiles files = job_files(o);
  for (const char* sub : {"servers", "logs", "work"}) KDA_RETURN_IF_ERROR(fs::ensure_dir(o.dir / sub));
  std::error_code ec;
  if (stdfs::exists(o.dir / "cluster.json", ec)) {
    auto st = cluster_status(o.dir);
    if (st.ok() && st->state != "ENDED")
      return Status::bad_input(fmt::format("--dir {}: job {} is still {} there (kda cluster down first)",
                                           o.dir.string(), st->job_id, st->state));
  }
  for (const auto& e : stdfs::directory_iterator(o.dir / "servers", ec)) stdfs::remove(e.path(), ec);
  if (!stdfs::exists(o.dir / "token", ec)) {
    KDA_RETURN_IF_ERROR(fs::write_file_atomic(o.dir / "token", util::random_hex(32) + "\n"));
    ::chmod((o.dir / "token").c_str(), 0600);
  }
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(o.dir / "job.sh", files.job_script));
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(o.dir / "node.sh", files.node_script));
  auto r = proc::run({.argv = {"sbatch", "--parsable", (o.dir / "job.sh").string()}, .timeout_seconds = 60});
  if (!r.ok()) return Status::failed("sbatch: " + r.status().message() + " (is Slurm installed here?)");
  if (!r->exit.success())
    return Status::failed(
        fmt::format("sbatch refused the job ({}): {}", r->exit.describe(), util::trimmed(r->stderr_text)));
  const std::string id = util::split_list(util::trimmed(r->stdout_text), ';').front();
  const json record{{"job_id", id},
                    {"nodes", o.nodes},
                    {"servers_per_node", o.servers_per_node},
                    {"gpus_per_node", o.gpus_per_node},
                    {"time_minutes", o.time_minutes},
                    {"dataset", o.dataset.string()},
                    {"partition", o.partition},
                    {"account", o.account}};
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(o.dir / "cluster.json", record.dump(2) + "\n"));
  return id;
}

Result<ClusterStatus> cluster_status(const stdfs::path& dir) {
  KDA_ASSIGN_OR_RETURN(json record, read_json(dir / "cluster.json"));
  ClusterStatus s;
  s.job_id = record.value("job_id", std::string());
  if (s.job_id.empty()) return Status::bad_input((dir / "cluster.json").string() + ": no job_id");
  auto r = proc::run({.argv = {"squeue", "-h", "-j", s.job_id, "-o", "%T|%N"}, .timeout_seconds = 30});
  if (!r.ok()) return Status::failed("squeue: " + r.status().message());
  const std::string line = util::trimmed(r->stdout_text);
  if (!r->exit.success() || line.empty()) {
    s.state = "ENDED";
  } else {
    const auto bar = line.find('|');
    s.state = line.substr(0, bar);
    s.nodes = bar == std::string::npos ? "" : line.substr(bar + 1);
  }
  std::error_code ec;
  if (!stdfs::is_directory(dir / "servers", ec)) return s;
  auto pool = parse_pool((dir / "servers").string(), dir / "token");
  if (!pool.ok()) return s;  // no address file yet
  for (const auto& server : pool->servers) {
    httplib::Client c(server.url);
    c.set_connection_timeout(2, 0);
    c.set_read_timeout(5, 0);
    auto h = c.Get("/health");
    json health = h && h->status == 200 ? json::parse(h->body, nullptr, false) : json();
    s.servers.push_back({{"url", server.url}, {"health", health.is_discarded() ? json() : health}});
  }
  return s;
}

Result<ClusterStatus> wait_for_servers(const stdfs::path& dir, size_t count, double timeout_s) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    KDA_ASSIGN_OR_RETURN(ClusterStatus s, cluster_status(dir));
    size_t healthy = 0;
    for (const auto& srv : s.servers) healthy += srv["health"].is_object();
    if (healthy >= count) return s;
    if (s.state == "ENDED")
      return Status::failed(
          fmt::format("job {} ended with {} of {} server(s) up; see {}/logs", s.job_id, healthy, count, dir.string()));
    if (std::chrono::steady_clock::now() > give_up)
      return Status::failed(fmt::format("{} of {} server(s) up after {:.0f} s (job {} {}); see {}/logs", healthy, count,
                                        timeout_s, s.job_id, s.state, dir.string()));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}

Status cluster_down(const stdfs::path& dir, double timeout_s) {
  KDA_ASSIGN_OR_RETURN(json record, read_json(dir / "cluster.json"));
  const std::string id = record.value("job_id", std::string());
  auto r = proc::run({.argv = {"scancel", id}, .timeout_seconds = 30});
  if (!r.ok()) return Status::failed("scancel: " + r.status().message());
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    KDA_ASSIGN_OR_RETURN(ClusterStatus s, cluster_status(dir));
    if (s.state == "ENDED") break;
    if (std::chrono::steady_clock::now() > give_up)
      return Status::failed(fmt::format("job {} is still {} {:.0f} s after scancel", id, s.state, timeout_s));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  std::error_code ec;
  for (const auto& e : stdfs::directory_iterator(dir / "servers", ec)) stdfs::remove(e.path(), ec);
  return {};
}

}  // namespace kda::exec
