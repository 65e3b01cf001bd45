#include "mcp/tool_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "proc/frame.h"

namespace kda::mcp {

using nlohmann::json;

namespace {

constexpr uint64_t kMaxToolFrame = uint64_t{64} << 20;
// A client that starts a frame must finish it within this time, or it is dropped (it would
// otherwise stall every other client of the one serving thread).
constexpr double kFrameReadSeconds = 10;

Result<sockaddr_un> unix_address(const std::filesystem::path& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string s = path.string();
  if (s.empty() || s.size() >= sizeof(addr.sun_path))
    return Status::bad_input("unix socket path too long (" + std::to_string(s.size()) + " bytes, at most " +
                             std::to_string(sizeof(addr.sun_path) - 1) + "): " + s);
  std::memcpy(addr.sun_path, s.data(), s.size());
  return addr;
}

}  // namespace

json tool_spec_to_json(const agent::ToolSpec& spec) {
  return {{"name", spec.name},
          {"description", spec.description},
          {"input_schema", spec.input_schema},
          {"read_only", spec.read_only}};
}

agent::ToolSpec tool_spec_from_json(const json& j) {
  agent::ToolSpec s;
  if (!j.is_object()) return s;
  if (j.contains("name") && j["name"].is_string()) s.name = j["name"].get<std::string>();
  if (j.contains("description") && j["description"].is_string()) s.description = j["description"].get<std::string>();
  if (j.contains("input_schema")) s.input_schema = j["input_schema"];
  if (j.contains("read_only") && j["read_only"].is_boolean()) s.read_only = j["read_only"].get<bool>();
  return s;
}

// ---------------------------------------------------------------------------------------------
// Server

Result<std::unique_ptr<ToolSocketServer>> ToolSocketServer::start(agent::ToolHost* tools,
                                                                  const std::filesystem::path& socket_path,
                                                                  ToolSocketOptions options) {
  KDA_ASSIGN_OR_RETURN(sockaddr_un addr, unix_address(socket_path));
  std::unique_ptr<ToolSocketServer> server(new ToolSocketServer());
  server->tools_ = tools;
  server->options_ = std::move(options);
  server->path_ = socket_path;
  std::error_code ec;
  std::filesystem::remove(socket_path, ec);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::io(std::string("socket: ") + std::strerror(errno));
  server->listen_fd_ = fd;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
    return Status::io("bind " + socket_path.string() + ": " + std::strerror(errno));
  if (::listen(fd, 16) != 0) return Status::io(std::string("listen: ") + std::strerror(errno));
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return Status::io(std::string("pipe2: ") + std::strerror(errno));
  server->wake_read_ = pipe_fds[0];
  server->wake_write_ = pipe_fds[1];
  server->thread_ = std::thread([s = server.get()] { s->serve(); });
  return server;
}

ToolSocketServer::~ToolSocketServer() {
  stop();
  for (int fd : {listen_fd_, wake_read_, wake_write_})
    if (fd >= 0) ::close(fd);
}

void ToolSocketServer::stop() {
  std::call_once(stopped_, [this] {
    if (thread_.joinable()) {
      char c = 1;
      [[maybe_unused]] ssize_t n = ::write(wake_write_, &c, 1);
      thread_.join();
    }
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove(path_, ec);
  });
}

json ToolSocketServer::answer(const json& request) {
  if (!request.is_object() || !request.contains("op") || !request["op"].is_string())
    return {{"error", "request needs a string \"op\""}};
  const std::string op = request["op"].get<std::string>();
  if (op == "list") {
    json list = json::array();
    for (const auto& t : tools_->tools()) {
      if (options_.read_only_tools && !t.read_only) continue;
      list.push_back(tool_spec_to_json(t));
    }
    return {{"tools", list}};
  }
  if (op == "call") {
    if (!request.contains("name") || !request["name"].is_string()) return {{"error", "call needs a string \"name\""}};
    const std::string name = request["name"].get<std::string>();
    json arguments = request.contains("arguments") ? request["arguments"] : json::object();
    agent::ToolOutcome outcome;
    bool allowed = false;
    for (const auto& t : tools_->tools())
      allowed = allowed || (t.name == name && (t.read_only || !options_.read_only_tools));
    if (!allowed) {
      outcome = {"tool not available in this session: " + name, true, {{"error", "tool_not_available"}}};
    } else {
      outcome = tools_->call(name, arguments);
    }
    calls_.fetch_add(1);
    if (options_.on_call) options_.on_call(name, arguments, outcome);
    return {{"text", outcome.text}, {"is_error", outcome.is_error}, {"data", outcome.data}};
  }
  return {{"error", "unknown op: " + op}};
}

void ToolSocketServer::serve() {
  std::vector<int> clients;
  auto drop = [&clients](size_t i) {
    ::close(clients[i]);
    clients.erase(clients.begin() + static_cast<long>(i));
  };
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({wake_read_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (int c : clients) fds.push_back({c, POLLIN, 0});
    int n = ::poll(fds.data(), fds.size(), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;
    const size_t polled = fds.size() - 2;
    if (fds[1].revents & POLLIN) {
      int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) clients.push_back(c);  // appended: the polled ones keep their indices
    }
    // Walk backwards so that dropping a client does not shift the ones still to visit.
    for (size_t i = polled; i-- > 0;) {
      if (fds[2 + i].revents == 0) continue;
      proc::FrameResult r =
          proc::read_frame(clients[i], proc::Deadline::after_seconds(kFrameReadSeconds), kMaxToolFrame);
      if (!r.ok()) {
        drop(i);
        continue;
      }
      json request = json::parse(r.frame->payload, nullptr, false);
      json reply = request.is_discarded() ? json{{"error", "request is not JSON"}} : answer(request);
      std::string payload = reply.dump(-1, ' ', false, json::error_handler_t::replace);
      if (!proc::write_frame(clients[i], kToolFrameReply, payload, proc::Deadline::after_seconds(30)).ok()) drop(i);
    }
  }
  for (int c : clients) ::close(c);
}

// ---------------------------------------------------------------------------------------------
// Client

Result<std::unique_ptr<SocketToolHost>> SocketToolHost::connect(const std::filesystem::path& socket_path,
                                                                proc::Deadline deadline) {
  KDA_ASSIGN_OR_RETURN(sockaddr_un addr, unix_address(socket_path));
  for (;;) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::io(std::string("socket: ") + std::strerror(errno));
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0)
      return std::unique_ptr<SocketToolHost>(new SocketToolHost(fd));
    int err = errno;
    ::close(fd);
    const bool retry = err == ENOENT || err == ECONNREFUSED || err == EAGAIN;
    if (!retry || deadline.expired())
      return Status::io("connecting to kda's tool socket " + socket_path.string() + ": " + std::strerror(err));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

SocketToolHost::~SocketToolHost() {
  if (fd_ >= 0) ::close(fd_);
}

Result<json> SocketToolHost::round_trip(const json& request) const {
  std::lock_guard<std::mutex> lock(mu_);
  KDA_RETURN_IF_ERROR(proc::write_frame(fd_, kToolFrameRequest, request.dump()));
  proc::FrameResult r = proc::read_frame(fd_, proc::Deadline::never(), kMaxToolFrame);
  if (!r.ok()) return r.status().with_context("kda tool socket");
  json reply = json::parse(r.frame->payload, nullptr, false);
  if (reply.is_discarded() || !reply.is_object()) return Status::io("kda tool socket: reply is not a JSON object");
  if (reply.contains("error")) return Status::bad_input("kda tool socket: " + reply["error"].dump());
  return reply;
}

std::vector<agent::ToolSpec> SocketToolHost::tools() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (have_cache_) return cached_;
  }
  auto reply = round_trip({{"op", "list"}});
  std::vector<agent::ToolSpec> out;
  if (!reply.ok() || !(*reply).contains("tools") || !(*reply)["tools"].is_array()) return out;
  for (const auto& t : (*reply)["tools"]) out.push_back(tool_spec_from_json(t));
  std::lock_guard<std::mutex> lock(mu_);
  cached_ = out;
  have_cache_ = true;
  return out;
}

agent::ToolOutcome SocketToolHost::call(const std::string& name, const json& arguments) {
  auto reply = round_trip({{"op", "call"}, {"name", name}, {"arguments", arguments}});
  if (!reply.ok()) return {reply.status().message(), true, {{"error", "tool_socket"}}};
  agent::ToolOutcome out;
  const json& r = *reply;
  if (r.contains("text") && r["text"].is_string()) out.text = r["text"].get<std::string>();
  out.is_error = r.value("is_error", true);
  if (r.contains("data")) out.data = r["data"];
  return out;
}

}  // namespace kda::mcp
