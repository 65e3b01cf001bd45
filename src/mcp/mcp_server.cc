#include "mcp/mcp_server.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kda::mcp {

using nlohmann::json;

const std::vector<std::string>& supported_protocol_versions() {
  static const std::vector<std::string> kVersions = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
  return kVersions;
}

json rpc_error(const json& id, int code, std::string message) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", std::move(message)}}}};
}

namespace {

json rpc_result(const json& id, json result) { return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}; }

bool valid_id(const json& id) { return id.is_string() || id.is_number_integer() || id.is_number_unsigned(); }

}  // namespace

McpServer::McpServer(agent::ToolHost* tools, ServerOptions options) : tools_(tools), options_(std::move(options)) {}

std::vector<agent::ToolSpec> McpServer::visible_tools() const {
  std::vector<agent::ToolSpec> out;
  if (tools_ == nullptr) return out;
  for (auto& t : tools_->tools()) {
    if (options_.read_only_tools && !t.read_only) continue;
    out.push_back(std::move(t));
  }
  return out;
}

std::optional<json> McpServer::handle(const json& message) {
  if (message.is_array()) return rpc_error(nullptr, kInvalidRequest, "batches are not supported");
  if (!message.is_object()) return rpc_error(nullptr, kInvalidRequest, "a request must be a JSON object");
  const bool has_id = message.contains("id");
  const json id = has_id ? message["id"] : json(nullptr);
  if (!message.contains("method")) {
    // A response to a request of ours (we send none) or garbage: answer only what has an id
    // and looks like neither a result nor an error.
    if (message.contains("result") || message.contains("error")) return std::nullopt;
    return rpc_error(valid_id(id) ? id : json(nullptr), kInvalidRequest, "missing \"method\"");
  }
  if (message.value("jsonrpc", json()) != "2.0")
    return rpc_error(valid_id(id) ? id : json(nullptr), kInvalidRequest, "\"jsonrpc\" must be \"2.0\"");
  if (!message["method"].is_string())
    return rpc_error(valid_id(id) ? id : json(nullptr), kInvalidRequest, "\"method\" must be a string");
  if (has_id && !valid_id(id)) return rpc_error(nullptr, kInvalidRequest, "\"id\" must be a string or an integer");
  const std::string method = message["method"].get<std::string>();
  const json params = message.contains("params") ? message["params"] : json::object();

  if (!has_id) {  // a notification: never answered
    if (method == "notifications/initialized") initialized_ = true;
    return std::nullopt;
  }
  if (!params.is_object()) return rpc_error(id, kInvalidParams, "\"params\" must be an object");

  if (method == "initialize") {
    std::string requested;
    if (params.contains("protocolVersion") && params["protocolVersion"].is_string())
      requested = params["protocolVersion"].get<std::string>();
    protocol_version_ = supported_protocol_versions().front();
    for (const auto& v : supported_protocol_versions())
      if (v == requested) protocol_version_ = v;
    json result = {{"protocolVersion", protocol_version_},
                   {"capabilities", {{"tools", {{"listChanged", false}}}}},
                   {"serverInfo", {{"name", options_.name}, {"version", options_.version}}}};
    if (!options_.instructions.empty()) result["instructions"] = options_.instructions;
    return rpc_result(id, std::move(result));
  }
  if (method == "ping") return rpc_result(id, json::object());
  if (method == "tools/list") {
    json list = json::array();
    for (const auto& t : visible_tools()) {
      json schema = t.input_schema.is_object() ? t.input_schema : json{{"type", "object"}};
      list.push_back({{"name", t.name}, {"description", t.description}, {"inputSchema", schema}});
    }
    return rpc_result(id, {{"tools", list}});
  }
  if (method == "tools/call") return call_tool(id, params);
  return rpc_error(id, kMethodNotFound, "method not found: " + method);
}

json McpServer::call_tool(const json& id, const json& params) {
  if (!params.contains("name") || !params["name"].is_string())
    return rpc_error(id, kInvalidParams, "tools/call needs a string \"name\"");
  const std::string name = params["name"].get<std::string>();
  json arguments = params.contains("arguments") ? params["arguments"] : json::object();
  if (arguments.is_null()) arguments = json::object();
  if (!arguments.is_object()) return rpc_error(id, kInvalidParams, "\"arguments\" must be an object");
  bool known = false;
  for (const auto& t : visible_tools()) known = known || t.name == name;
  if (!known) return rpc_error(id, kInvalidParams, "unknown tool: " + name);
  agent::ToolOutcome outcome = tools_->call(name, arguments);
  json content = json::array({json{{"type", "text"}, {"text", outcome.text}}});
  return rpc_result(id, {{"content", content}, {"isError", outcome.is_error}});
}

std::optional<std::string> McpServer::handle_line(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  if (line.empty()) return std::nullopt;
  json message = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  std::optional<json> reply;
  if (message.is_discarded()) {
    reply = rpc_error(nullptr, kParseError, "parse error");
  } else {
    reply = handle(message);
  }
  if (!reply) return std::nullopt;
  return reply->dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

Status write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::io(std::string("mcp: write: ") + std::strerror(errno));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

}  // namespace

Status McpServer::serve(int in_fd, int out_fd) {
  std::string buffer;
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(in_fd, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::io(std::string("mcp: read: ") + std::strerror(errno));
    }
    if (n == 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (auto reply = handle_line(std::string_view(buffer).substr(start, nl - start))) {
        reply->push_back('\n');
        KDA_RETURN_IF_ERROR(write_all(out_fd, *reply));
      }
    }
    buffer.erase(0, start);
  }
  if (auto reply = handle_line(buffer)) {  // a last line without '\n'
    reply->push_back('\n');
    KDA_RETURN_IF_ERROR(write_all(out_fd, *reply));
  }
  return {};
}

}  // namespace kda::mcp
