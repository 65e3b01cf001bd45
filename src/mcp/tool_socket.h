// kda's tools for agents that run as separate, sandboxed processes (Claude Code, Codex). The tools
// themselves stay in the kda process that owns the run: ToolSocketServer serves a ToolHost on a
// unix socket in a kda-owned directory (one thread, framed JSON, see proc/frame.h), and
// `kda mcp --connect <socket>` — started by the CLI as its MCP server, inside the agent's sandbox —
// reaches them through SocketToolHost. The agent can read the socket's directory but not write it.
//
// Frames: type kRequest carries {"op":"list"} or {"op":"call","name","arguments"}; the answer is a
// kReply frame: {"tools":[{name,description,input_schema,read_only}]} or {"text","is_error","data"}
// (or {"error": "..."} for a malformed request).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/tool.h"
#include "proc/deadline.h"
#include "util/status.h"

namespace kda::mcp {

inline constexpr uint32_t kToolFrameRequest = 1;
inline constexpr uint32_t kToolFrameReply = 2;

struct ToolSocketOptions {
  // Serve only read-only tools (reviewer sessions): enforced here, in kda's process, whatever the
  // client asks for.
  bool read_only_tools = false;
  // Called (on the server thread) after every tool call, for the audit log and session events.
  std::function<void(const std::string& name, const nlohmann::json& arguments, const agent::ToolOutcome& outcome)>
      on_call;
};

class ToolSocketServer {
 public:
  // Binds `socket_path` (its directory must exist; an old socket file there is replaced) and starts
  // the serving thread. `tools` must outlive the server. Paths longer than a sockaddr_un allows
  // are a kBadInput error.
  static Result<std::unique_ptr<ToolSocketServer>> start(agent::ToolHost* tools,
                                                         const std::filesystem::path& socket_path,
                                                         ToolSocketOptions options = {});
  ~ToolSocketServer();  // stop()
  ToolSocketServer(const ToolSocketServer&) = delete;
  ToolSocketServer& operator=(const ToolSocketServer&) = delete;

  const std::filesystem::path& socket_path() const { return path_; }
  int calls() const { return calls_.load(); }
  // Stops the thread, closes every connection and removes the socket file. Idempotent.
  void stop();

 private:
  ToolSocketServer() = default;
  void serve();
  nlohmann::json answer(const nlohmann::json& request);

  agent::ToolHost* tools_ = nullptr;
  ToolSocketOptions options_;
  std::filesystem::path path_;
  int listen_fd_ = -1;
  int wake_read_ = -1;
  int wake_write_ = -1;
  std::atomic<int> calls_{0};
  std::thread thread_;
  std::once_flag stopped_;
};

// The client side: a ToolHost whose tools live behind a ToolSocketServer.
class SocketToolHost final : public agent::ToolHost {
 public:
  // Connects, retrying until `deadline` while the socket does not exist yet.
  static Result<std::unique_ptr<SocketToolHost>> connect(const std::filesystem::path& socket_path,
                                                         proc::Deadline deadline = proc::Deadline::after_seconds(5));
  ~SocketToolHost() override;

  // The server's tools (fetched once); empty when the server is gone.
  std::vector<agent::ToolSpec> tools() const override;
  // A dead server or a broken reply is an is_error outcome.
  agent::ToolOutcome call(const std::string& name, const nlohmann::json& arguments) override;

 private:
  explicit SocketToolHost(int fd) : fd_(fd) {}
  Result<nlohmann::json> round_trip(const nlohmann::json& request) const;

  int fd_ = -1;
  mutable std::mutex mu_;
  mutable std::vector<agent::ToolSpec> cached_;
  mutable bool have_cache_ = false;
};

// ToolSpec <-> JSON, as the socket protocol carries them.
nlohmann::json tool_spec_to_json(const agent::ToolSpec& spec);
agent::ToolSpec tool_spec_from_json(const nlohmann::json& j);

}  // namespace kda::mcp
