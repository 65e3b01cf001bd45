// An MCP (Model Context Protocol) server over newline-delimited JSON-RPC 2.0: the transport
// `kda mcp` speaks on stdio so that Claude Code and Codex can call kda's tools.
//
// Supported: initialize (protocol version negotiated: the client's when kda supports it, else
// kda's latest), notifications/initialized, ping, tools/list, tools/call. Tool results are
// {content: [{type: "text", text}], isError}. Errors: -32700 parse error, -32600 invalid request
// (also batches, which the current protocol dropped), -32601 unknown method, -32602 bad params
// (unknown tool, arguments not an object). Notifications and client responses get no answer.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/tool.h"
#include "util/status.h"

namespace kda::mcp {

inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;

// Protocol versions kda speaks, newest first.
const std::vector<std::string>& supported_protocol_versions();

struct ServerOptions {
  std::string name = "kda";
  std::string version = "0.1";
  // Only tools with read_only = true are listed and callable (reviewer sessions).
  bool read_only_tools = false;
  std::string instructions;  // optional text for the client's model
};

class McpServer {
 public:
  // `tools` must outlive the server.
  McpServer(agent::ToolHost* tools, ServerOptions options);

  // One JSON-RPC message (already parsed) -> the response, or nullopt for notifications.
  std::optional<nlohmann::json> handle(const nlohmann::json& message);
  // One line of the stdio transport -> the response line (without '\n'), or nullopt.
  std::optional<std::string> handle_line(std::string_view line);

  // Serves until EOF on in_fd (a clean end) or a write error on out_fd.
  Status serve(int in_fd, int out_fd);

  bool initialized() const { return initialized_; }
  const std::string& protocol_version() const { return protocol_version_; }

 private:
  nlohmann::json call_tool(const nlohmann::json& id, const nlohmann::json& params);
  std::vector<agent::ToolSpec> visible_tools() const;

  agent::ToolHost* tools_;
  ServerOptions options_;
  bool initialized_ = false;
  std::string protocol_version_;
};

// JSON-RPC error object for `id`.
nlohmann::json rpc_error(const nlohmann::json& id, int code, std::string message);

}  // namespace kda::mcp
