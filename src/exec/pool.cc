#include "exec/pool.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "proc/subprocess.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kda::exec {

namespace stdfs = std::filesystem;
using nlohmann::json;

namespace {

Result<std::string> read_token(const stdfs::path& file, const std::string& what) {
  auto text = fs::read_file(file);
  if (!text.ok())
    return Status::bad_input(fmt::format("{}: token file {}: {}", what, file.string(), text.status().message()));
  std::string token = util::trimmed(*text);
  if (token.empty()) return Status::bad_input(fmt::format("{}: token file {} is empty", what, file.string()));
  return token;
}

// One address file, as `kda serve --address-file` writes it: {url, auth, token_file?, ...}.
Result<ServerSpec> read_address(const stdfs::path& file, const std::optional<stdfs::path>& token_file) {
  auto text = fs::read_file(file);
  if (!text.ok()) return Status::bad_input(fmt::format("--on {}: {}", file.string(), text.status().message()));
  auto j = json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("url") || !j["url"].is_string())
    return Status::bad_input(fmt::format("--on {}: not an address file (a JSON object with \"url\")", file.string()));
  ServerSpec s{.url = j["url"].get<std::string>()};
  if (token_file) {
    KDA_ASSIGN_OR_RETURN(s.token, read_token(*token_file, "--token-file"));
  } else if (j.contains("token_file") && j["token_file"].is_string()) {
    stdfs::path tf = j["token_file"].get<std::string>();
    if (tf.is_relative()) tf = file.parent_path() / tf;
    KDA_ASSIGN_OR_RETURN(s.token, read_token(tf, "--on " + file.string()));
  } else if (j.value("auth", std::string("none")) == "bearer") {
    return Status::bad_input(fmt::format("--on {}: the server wants a bearer token: give --token-file", file.string()));
  }
  return s;
}

}  // namespace

Result<PoolSpec> parse_pool(const std::string& on, const std::optional<stdfs::path>& token_file) {
  PoolSpec pool;
  if (on == "local" || on.starts_with("local:")) {
    pool.local = on == "local" ? std::string() : on.substr(6);
    if (on != "local" && pool.local->empty())
      return Status::bad_input("--on local: expected local or local:DEVICES (cuda:0,cuda:1 / cpu:N)");
    return pool;
  }
  if (on.starts_with("http://") || on.starts_with("https://")) {
    std::string token;
    if (token_file) {
      KDA_ASSIGN_OR_RETURN(token, read_token(*token_file, "--token-file"));
    }
    for (const auto& url : util::split_list(on)) {
      if (!url.starts_with("http://") && !url.starts_with("https://"))
        return Status::bad_input(fmt::format("--on: '{}' is not a server URL (http://host:port)", url));
      pool.servers.push_back({.url = url, .token = token});
    }
    return pool;
  }
  std::error_code ec;
  const stdfs::path path = on;
  if (stdfs::is_directory(path, ec)) {
    std::vector<stdfs::path> files;
    for (const auto& e : stdfs::directory_iterator(path, ec))
      if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      KDA_ASSIGN_OR_RETURN(ServerSpec s, read_address(f, token_file));
      pool.servers.push_back(std::move(s));
    }
    if (pool.servers.empty())
      return Status::bad_input(fmt::format("--on {}: no address file (*.json) in the directory", on));
    return pool;
  }
  if (stdfs::is_regular_file(path, ec)) {
    KDA_ASSIGN_OR_RETURN(ServerSpec s, read_address(path, token_file));
    pool.servers.push_back(std::move(s));
    return pool;
  }
  return Status::bad_input(fmt::format(
      "--on {}: neither local[:DEVICES], server URLs (http://host:port,...), nor an address file or directory", on));
}

struct LocalServe::State {
  proc::Child child;
  stdfs::path dir;
};

LocalServe::LocalServe(std::unique_ptr<State> s) : s_(std::move(s)) {}

LocalServe::~LocalServe() {
  if (!s_) return;
  s_->child.kill_group(SIGTERM);  // kda serve drains nothing on SIGTERM: running evaluations are killed
  if (!s_->child.wait(proc::Deadline::after_seconds(10))) s_->child.wait_or_kill(proc::Deadline::after_seconds(0));
}

stdfs::path LocalServe::log_file() const { return s_->dir / "serve.log"; }

Result<std::unique_ptr<LocalServe>> LocalServe::start(const LocalServeOptions& o) {
  KDA_RETURN_IF_ERROR(fs::ensure_dir(o.dir));
  const stdfs::path address = o.dir / "address.json", log = o.dir / "serve.log";
  std::error_code ec;
  stdfs::remove(address, ec);
  std::vector<std::string> argv{
      o.kda_binary.string(), "serve",          "--local",    o.dataset.string(),       "--port", "0",
      "--address-file",      address.string(), "--work-dir", (o.dir / "work").string()};
  if (!o.devices.empty()) argv.insert(argv.end(), {"--devices", o.devices});
  argv.insert(argv.end(), o.extra_args.begin(), o.extra_args.end());
  // Its output goes to the log file: stdout and stderr moved onto it in the child, just before exec.
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return Status::io(fmt::format("{}: {}", log.string(), std::strerror(errno)));
  auto child = proc::Child::spawn(
      {.argv = argv, .stdout_mode = proc::Stdio::kNull, .stderr_mode = proc::Stdio::kNull, .pre_exec = [log_fd] {
         // SIGTERM when this process dies however it dies (kill -9, Ctrl-C): the server and its
         // evaluations go with it.
         if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) return errno;
         return ::dup2(log_fd, 1) < 0 || ::dup2(log_fd, 2) < 0 ? errno : 0;
       }});
  ::close(log_fd);
  if (!child.ok()) return child.status();
  auto state = std::make_unique<State>(State{std::move(*child), o.dir});
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.startup_timeout_s);
  while (std::chrono::steady_clock::now() < give_up) {
    if (auto exit = state->child.wait(proc::Deadline::after_seconds(0.05))) {
      auto text = fs::read_file(log);
      return Status::failed(fmt::format("kda serve exited at start ({}): {}", exit->describe(),
                                        text.ok() ? util::trimmed(*text) : std::string("no log")));
    }
    if (stdfs::exists(address, ec)) {
      std::unique_ptr<LocalServe> ls(new LocalServe(std::move(state)));
      KDA_ASSIGN_OR_RETURN(ls->spec_, read_address(address, std::nullopt));
      return ls;
    }
  }
  return Status::failed(
      fmt::format("kda serve did not come up within {:.0f} s (log: {})", o.startup_timeout_s, log.string()));
}

}  // namespace kda::exec
