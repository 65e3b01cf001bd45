// Where `--on <pool>` sends work: the servers of a pool, as the user names them.
//
//   http://host:port[,http://host:port...]   servers by URL (token: --token-file, else none)
//   DIR                                      every *.json address file in DIR (as `kda serve
//                                            --address-file` writes them; kda cluster publishes
//                                            one per node there)
//   FILE.json                                one address file
//   local | local:DEVICES                    a `kda serve` this process starts on loopback and stops
//                                            when done: DEVICES as `kda serve --devices` takes them
//                                            (cuda:0,cuda:2 / cpu:N); bare `local` is kda serve's
//                                            default: every GPU of /dev, else one host worker
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exec/dispatcher.h"
#include "util/status.h"

namespace kda::exec {

struct PoolSpec {
  std::vector<ServerSpec> servers;   // URLs and address files
  std::optional<std::string> local;  // local: the --devices of the server to start ("": its default)
};

// kBadInput naming what is wrong (an address file without a url, a token file that cannot be read,
// a word that is none of the forms above).
Result<PoolSpec> parse_pool(const std::string& on, const std::optional<std::filesystem::path>& token_file);

struct LocalServeOptions {
  std::filesystem::path kda_binary;
  std::filesystem::path dataset;        // kda serve --local
  std::string devices;                  // kda serve --devices; empty: its default
  std::filesystem::path dir;            // its address file and log go here
  std::vector<std::string> extra_args;  // --allow-holdout, --num-trials N, ...
  double startup_timeout_s = 60;
};

// A `kda serve` child on a free loopback port; stopped (SIGTERM, then SIGKILL) when destroyed.
class LocalServe {
 public:
  static Result<std::unique_ptr<LocalServe>> start(const LocalServeOptions& options);
  ~LocalServe();
  const ServerSpec& spec() const { return spec_; }
  std::filesystem::path log_file() const;

  struct State;

 private:
  explicit LocalServe(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
  ServerSpec spec_;
};

}  // namespace kda::exec
