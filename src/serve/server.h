// `kda serve`: one node's evaluation service with FlashInfer-Bench's server API (the same endpoints,
// fields, status codes and long-polls as `flashinfer-bench serve`), so a FlashInfer-Bench client or
// router can use kda nodes unchanged; behind it kda's official evaluator, one worker per device, one
// task at a time on each. See docs/scale.md.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "serve/dataset.h"
#include "serve/worker.h"
#include "util/status.h"

namespace kda::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (the address file and the log say which)
  std::vector<Device> devices;
  EvalSettings eval;
  // The bearer token every endpoint but /health requires: read from the file, or created there (mode
  // 0600) when it does not exist. Required off loopback unless no_auth.
  std::optional<std::filesystem::path> token_file;
  bool no_auth = false;  // off loopback without a token: only for a router that cannot send one
  size_t max_body_bytes = 16u << 20;
  // Written (atomically) once the port is bound: {url, host, port, instance_id, dataset_id, auth, pid}.
  std::optional<std::filesystem::path> address_file;
  std::function<void(const std::string&)> log;  // one line per event (startup, tasks, drain)
};

bool is_loopback(const std::string& host);

class Server {
 public:
  // Binds the port and prepares the workers. kBadInput: a bad option (off loopback without a token
  // or --no-auth, an unreadable or empty token file); kIo: the port cannot be bound.
  static Result<std::unique_ptr<Server>> create(ServeOptions options, Dataset data);
  ~Server();

  int port() const;
  std::string url() const;
  const std::string& instance_id() const;

  // Serves until POST /shutdown or stop(); starts the workers and joins them before returning.
  Status run();
  void stop();  // any thread; running evaluations are killed, queued tasks fail

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kda::serve
