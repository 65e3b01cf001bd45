// kda serve: the FlashInfer-Bench server API over kda's evaluator (src/serve).
#ifdef KDA_HAVE_SERVE
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <regex>
#include <thread>

#include <fmt/format.h>

#include "cli/commands.h"
#include "serve/server.h"

namespace kda::cli {

namespace {

namespace stdfs = std::filesystem;

// Every GPU the driver shows (/dev/nvidiaN), else one host worker.
std::string default_devices() {
  std::vector<std::string> gpus;
  std::error_code ec;
  const std::regex node("nvidia([0-9]+)");
  for (const auto& e : stdfs::directory_iterator("/dev", ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, node)) gpus.push_back("cuda:" + m[1].str());
  }
  std::sort(gpus.begin(), gpus.end());
  std::string out;
  for (const auto& g : gpus) out += (out.empty() ? "" : ",") + g;
  return out.empty() ? "cpu" : out;
}

Result<serve::ServeOptions> serve_options(const Args& args, Io& io) {
  serve::ServeOptions o;
  o.host = args.value_or("host", "127.0.0.1");
  auto devices = serve::parse_devices(args.value_or("devices", default_devices()));
  if (!devices.ok()) return devices.status();
  o.devices = *devices;
  std::error_code ec;
  o.eval.kda_binary = stdfs::read_symlink("/proc/self/exe", ec);
  if (ec) return Status::io("cannot find the kda binary (/proc/self/exe)");
  for (const char* name : {"port", "warmup-runs", "iterations", "num-trials", "max-body-mb"}) {
    auto v = args.integer(name);
    if (!v.ok()) return v.status();
    if (!*v) continue;
    const long long n = **v;
    const long long lo = std::string(name) == "max-body-mb" ? 1 : 0;
    const long long hi = std::string(name) == "port" ? 65535 : 1 << 20;
    if (n < lo || n > hi) return Status::bad_input(fmt::format("--{} must be in {}..{}", name, lo, hi));
    if (std::string(name) == "port") o.port = static_cast<int>(n);
    if (std::string(name) == "warmup-runs") o.eval.warmup = static_cast<int>(n);
    if (std::string(name) == "iterations") o.eval.iterations = static_cast<int>(n);
    if (std::string(name) == "num-trials") o.eval.trials = static_cast<int>(n);
    if (std::string(name) == "max-body-mb") o.max_body_bytes = static_cast<size_t>(n) << 20;
  }
  auto timeout = args.number("timeout");
  if (!timeout.ok()) return timeout.status();
  if (*timeout) {
    if (**timeout <= 0) return Status::bad_input("--timeout must be > 0 seconds");
    o.eval.timeout_s = **timeout;
  }
  if (auto f = args.value("token-file")) o.token_file = *f;
  o.no_auth = args.flag("no-auth");
  if (o.no_auth && o.token_file) return Status::bad_input("--no-auth and --token-file contradict each other");
  if (auto f = args.value("address-file")) o.address_file = *f;
  if (auto d = args.value("work-dir")) o.eval.work_dir = *d;
  o.eval.allow_holdout = args.flag("allow-holdout");
  const std::string level = args.value_or("log-level", "INFO");
  if (level != "DEBUG" && level != "INFO" && level != "WARNING" && level != "ERROR")
    return Status::bad_input("--log-level: one of DEBUG, INFO, WARNING, ERROR");
  if (level == "DEBUG" || level == "INFO")
    o.log = [&io](const std::string& line) { io.err << "kda serve: " << line << std::endl; };
  return o;
}

// SIGINT / SIGTERM (scancel, Ctrl-C) stop the server as POST /shutdown does. The signals are blocked
// in every thread and taken here, so no handler runs in the middle of anything.
class SignalStop {
 public:
  explicit SignalStop(serve::Server& server) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
    thread_ = std::thread([this, set, &server] {
      const timespec tick{0, 200'000'000};
      while (!done_) {
        if (sigtimedwait(&set, nullptr, &tick) > 0) {
          server.stop();
          return;
        }
      }
    });
  }
  ~SignalStop() {
    done_ = true;
    thread_.join();
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t old_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

int run_serve(const Args& args, Io& io) {
  if (!args.value("local")) {
    io.err << "kda serve: --local DIR is required (a FlashInfer-Bench dataset, a task pack or a directory of packs)\n";
    return kExitBadInput;
  }
  auto options = serve_options(args, io);
  if (!options.ok()) {
    return fail(io, "kda serve", options.status());
  }
  auto data = serve::load_dataset(args.value_or("local", ""));
  if (!data.ok()) {
    return fail(io, "kda serve", data.status());
  }
  auto server = serve::Server::create(std::move(*options), std::move(*data));
  if (!server.ok()) {
    return fail(io, "kda serve", server.status());
  }
  Status st;
  {
    SignalStop stop(**server);
    st = (*server)->run();
  }
  if (!st.ok()) {
    return fail(io, "kda serve", st);
  }
  return kExitOk;
}

}  // namespace

CommandSpec serve_command() {
  return {
      .name = "serve",
      .summary = "Serve kda's evaluator over FlashInfer-Bench's server API (one per node; see docs/scale.md)",
      .description =
          "Starts a long-lived evaluation service with the endpoints and semantics of `flashinfer-bench serve`:\n"
          "GET /definitions, /definitions/{name}, /definitions/{name}/workloads, /workloads/{uuid}; POST /evaluate\n"
          "{solution, workload_uuids?, task_id?} (an idempotent task_id: the same request again returns the same\n"
          "task, a different one 409); GET /tasks/{id}?timeout=S (long-poll, 0..3600); POST /tasks/batch; GET\n"
          "/health (instance_id, dataset_id, workers, queue; and kda's `auth`); POST /drain (then /evaluate\n"
          "answers 503); POST /shutdown. Each task is evaluated by kda's official evaluator (`kda eval`, every\n"
          "gate) in a process of its own on one worker: one per device (--devices cuda:0,cuda:1; cpu or cpu:N for\n"
          "host workers), one task at a time on each. A pack's holdout workloads are never listed or returned and\n"
          "are evaluated only with --allow-holdout. Binds to loopback by default; off loopback it needs\n"
          "--token-file (every endpoint but /health then requires `Authorization: Bearer <token>`) or --no-auth.\n"
          "SIGTERM or SIGINT stop it as /shutdown does. Tolerances are the pack's (task.toml; FlashInfer-Bench's\n"
          "defaults for a FlashInfer-Bench dataset). Exit 0 after a shutdown, 2 bad input, 3 the port cannot be\n"
          "bound.",
      .options =
          {{.name = "local",
            .metavar = "DIR",
            .help = "a FlashInfer-Bench dataset root, a kda task pack or a directory of packs",
            .env = "KDA_SERVE_LOCAL"},
           {.name = "host", .metavar = "ADDR", .help = "address to bind", .default_value = "127.0.0.1"},
           {.name = "port", .metavar = "N", .help = "port (0: any free port)", .default_value = "8000"},
           {.name = "devices",
            .metavar = "LIST",
            .help = "cuda:0,cuda:1,... or cpu / cpu:N (default: every /dev/nvidiaN, else cpu)"},
           {.name = "timeout",
            .metavar = "S",
            .help = "per task: the evaluation's wall time limit",
            .default_value = "300"},
           {.name = "warmup-runs", .metavar = "N", .help = "override task.toml [timing] warmup"},
           {.name = "iterations", .metavar = "N", .help = "override task.toml [timing] iterations"},
           {.name = "num-trials", .metavar = "N", .help = "override task.toml [timing] trials"},
           {.name = "token-file", .metavar = "FILE", .help = "bearer token file (created, mode 0600, when missing)"},
           {.name = "no-auth", .help = "serve off loopback without a token (for a router that cannot send one)"},
           {.name = "address-file",
            .metavar = "FILE",
            .help = "write {url, instance_id, dataset_id, auth, pid} here once listening"},
           {.name = "work-dir",
            .metavar = "DIR",
            .help = "where tasks' files live while they run (default: the cache)"},
           {.name = "max-body-mb", .metavar = "N", .help = "largest request body accepted", .default_value = "16"},
           {.name = "allow-holdout", .help = "evaluate holdout workloads a request names by uuid (never listed)"},
           {.name = "log-level",
            .metavar = "LEVEL",
            .help = "DEBUG, INFO (a line per task), WARNING or ERROR",
            .default_value = "INFO"}},
      .run = run_serve,
  };
}

}  // namespace kda::cli
#endif  // KDA_HAVE_SERVE
