// `kda cluster`: Slurm places the evaluation servers. One batch job (`sbatch --requeue`) holds the
// nodes for the run's time; on each node `srun` starts `kda serve` instances, which publish their
// address files in a directory on the shared filesystem, where `--on DIR/servers` finds them. The
// job is cancelled (`scancel`) by `kda cluster down`, and Slurm ends it at its time limit.
//
// Everything lives in one directory (shared by the nodes):
//   cluster.json   the job id and what was asked for
//   job.sh         the batch script; node.sh what each job step runs
//   token          the servers' bearer token (mode 0600)
//   servers/       one address file per server (kda serve --address-file)
//   logs/          Slurm's output and each server's log
//   work/          the servers' task directories
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace kda::exec {

struct ClusterOptions {
  std::filesystem::path dir;
  std::filesystem::path kda_binary;  // as the nodes see it (a shared filesystem)
  std::filesystem::path dataset;     // kda serve --local
  int nodes = 1;
  int servers_per_node = 1;  // srun tasks per node: each a kda serve
  int gpus_per_node = 0;     // --gres=gpu:G; each server takes its share of the node's GPUs
  std::string host_devices;  // with no GPUs: each server's --devices (cpu / cpu:N)
  std::string partition, account;
  int time_minutes = 60;                // --time: the run's budget
  std::vector<std::string> serve_args;  // passed to every kda serve (--num-trials N, ...)
};

// The files that make the job (job.sh, node.sh): written by up(), returned for tests and --dry-run.
struct JobFiles {
  std::string job_script, node_script;
};
JobFiles job_files(const ClusterOptions& o);
// The options checked (kBadInput naming the one that is wrong) and the files they make, the paths
// made absolute: what up() would submit (kda cluster up --dry-run prints it).
Result<JobFiles> checked_job_files(ClusterOptions o);

// Writes the directory and submits the job; the job id. kBadInput for bad options, kFailed when
// sbatch refuses (its message).
Result<std::string> cluster_up(const ClusterOptions& o);

struct ClusterStatus {
  std::string job_id;
  std::string state;  // Slurm's (PENDING, RUNNING, ...), or "ENDED" once squeue no longer lists it
  std::string nodes;
  // Each published server: its address file's fields and `health` (its /health, or null when it
  // does not answer).
  nlohmann::json servers = nlohmann::json::array();
};
Result<ClusterStatus> cluster_status(const std::filesystem::path& dir);

// Waits until `count` servers answer /health (or the job ends, or the timeout passes).
Result<ClusterStatus> wait_for_servers(const std::filesystem::path& dir, size_t count, double timeout_s);

// scancel, then waits up to `timeout_s` for the job to leave the queue; removes the address files.
Status cluster_down(const std::filesystem::path& dir, double timeout_s = 60);

}  // namespace kda::exec
