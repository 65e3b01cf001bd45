// The fake LLM server over real sockets: the three wire formats (streaming shapes as the real
// CLIs expect them, docs/fake-llm.md), step selection from the conversation, every fault kind,
// keep-alive, 404, concurrent connections, the request log, and the kda-fake-llm binary.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "fakellm/server.h"
#include "proc/subprocess.h"
#include "util/fs.h"

namespace kda::fakellm {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
  bool complete = false;                       // the body ended properly (final chunk / full length)
};

struct Event {
  std::string name;
  std::string data;
};

// A minimal blocking HTTP/1.1 client over one connection (keep-alive).
class Client {
 public:
  explicit Client(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{10, 0};  // bounded: a hung server fails the test instead of hanging it
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Client() { ::close(fd_); }
  bool connected() const { return connected_; }

  HttpReply request(const std::string& method, const std::string& target, const std::string& body,
                    const std::string& extra_headers = "") {
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                      extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    ::send(fd_, req.data(), req.size(), MSG_NOSIGNAL);
    return read_reply();
  }
  HttpReply post(const std::string& target, const json& body, const std::string& extra_headers = "") {
    return request("POST", target, body.dump(), extra_headers);
  }

 private:
  bool fill() {
    char tmp[8192];
    ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }
  bool line(std::string& out) {
    for (;;) {
      size_t nl = buf_.find("\r\n");
      if (nl != std::string::npos) {
        out = buf_.substr(0, nl);
        buf_.erase(0, nl + 2);
        return true;
      }
      if (!fill()) return false;
    }
  }
  HttpReply read_reply() {
    HttpReply r;
    std::string l;
    if (!line(l)) return r;
    r.status = std::atoi(l.substr(9, 3).c_str());
    while (line(l) && !l.empty()) {
      size_t c = l.find(':');
      std::string k = l.substr(0, c);
      for (char& ch : k) ch = static_cast<char>(std::tolower(ch));
      r.headers[k] = l.substr(c + 2);
    }
    if (r.headers["transfer-encoding"] == "chunked") {
      for (;;) {
        if (!line(l)) return r;
        size_t n = std::strtoul(l.c_str(), nullptr, 16);
        if (n == 0) {
          line(l);
          r.complete = true;
          return r;
        }
        while (buf_.size() < n + 2) {
          if (!fill()) {
            r.body += buf_;
            return r;
          }
        }
        r.body += buf_.substr(0, n);
        buf_.erase(0, n + 2);
      }
    }
    size_t n = std::strtoul(r.headers["content-length"].c_str(), nullptr, 10);
    while (buf_.size() < n) {
      if (!fill()) {
        r.body = buf_;
        return r;
      }
    }
    r.body = buf_.substr(0, n);
    buf_.erase(0, n);
    r.complete = true;
    return r;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buf_;
};

std::vector<Event> sse(const std::string& body) {
  std::vector<Event> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    std::string block = body.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    pos = end == std::string::npos ? body.size() : end + 2;
    Event e;
    size_t lp = 0;
    while (lp < block.size()) {
      size_t nl = block.find('\n', lp);
      std::string ln = block.substr(lp, nl == std::string::npos ? std::string::npos : nl - lp);
      lp = nl == std::string::npos ? block.size() : nl + 1;
      if (ln.rfind("event: ", 0) == 0) e.name = ln.substr(7);
      if (ln.rfind("data: ", 0) == 0) e.data = ln.substr(6);
    }
    if (!e.data.empty() || !e.name.empty()) out.push_back(e);
  }
  return out;
}

std::unique_ptr<Server> start(const json& scenarios, Options o = {}) {
  o.scenarios = scenarios;
  auto s = Server::start(o);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : nullptr;
}

const json kWriteScenario = json::parse(R"([{"name":"hello","match":"create hello","steps":[
  {"tool":"write","input":{"path":"hello.txt","content":"hi\n"}},
  {"text":"Done. Tool said: ${last_tool_result}"}]}])");

// A request shaped like Claude Code 2.1.332's (agent-clis.md §2.2).
json claude_request(int round_trips) {
  json messages = json::array(
      {{{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "create hello.txt containing hi"}}})}},
       {{"role", "system"}, {"content", "# Environment"}}});
  for (int i = 0; i < round_trips; ++i) {
    std::string id = "toolu_fake_" + std::to_string(i) + "_0";
    messages.push_back(
        {{"role", "assistant"},
         {"content", json::array({{{"type", "tool_use"}, {"id", id}, {"name", "Write"}, {"input", json::object()}}})}});
    messages.push_back({{"role", "user"},
                        {"content", json::array({{{"type", "tool_result"},
                                                  {"tool_use_id", id},
                                                  {"content", "File created successfully at: /tmp/w/hello.txt"}}})}});
  }
  return {{"model", "claude-sonnet-x"},
          {"max_tokens", 128000},
          {"stream", true},
          {"thinking", {{"type", "adaptive"}}},
          {"metadata", {{"user_id", "u"}}},
          {"system",
           json::array({{{"type", "text"}, {"text", "You are Claude Code"}, {"cache_control", {{"type", "ephemeral"}}}},
                        {{"type", "text"}, {"text", "Primary working directory: /tmp/w\nIs a git repo: no"}}})},
          {"tools", json::array({{{"name", "Bash"}, {"input_schema", json::object()}},
                                 {{"name", "Edit"}, {"input_schema", json::object()}},
                                 {{"name", "Write"}, {"input_schema", json::object()}}})},
          {"messages", messages}};
}

TEST(FakeLlmServer, AnthropicStreamToolUseThenFinalText) {
  auto server = start(kWriteScenario);
  ASSERT_TRUE(server);
  Client c(server->port());
  ASSERT_TRUE(c.connected());
  HttpReply r =
      c.post("/v1/messages?beta=true", claude_request(0), "x-api-key: sk-secret\r\nanthropic-version: 2023-06-01\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  EXPECT_EQ(r.headers.count("content-length"), 0u);
  EXPECT_TRUE(r.complete);
  auto ev = sse(r.body);
  ASSERT_GE(ev.size(), 5u);
  EXPECT_EQ(ev.front().name, "message_start");
  EXPECT_EQ(ev.back().name, "message_stop");
  std::string partial;
  std::string tool_name, stop_reason;
  for (const Event& e : ev) {
    json d = json::parse(e.data);
    EXPECT_EQ(d["type"], e.name);
    if (e.name == "message_start") {
      EXPECT_EQ(d["message"]["usage"]["output_tokens"], 1);
    }
    if (e.name == "content_block_start") tool_name = d["content_block"]["name"];
    if (e.name == "content_block_delta") partial += d["delta"]["partial_json"].get<std::string>();
    if (e.name == "message_delta") stop_reason = d["delta"]["stop_reason"];
  }
  EXPECT_EQ(tool_name, "Write");
  EXPECT_EQ(stop_reason, "tool_use");
  EXPECT_EQ(json::parse(partial), (json{{"file_path", "/tmp/w/hello.txt"}, {"content", "hi\n"}}));

  // Same connection (keep-alive), next step: the final text with the tool result substituted.
  HttpReply r2 = c.post("/v1/messages?beta=true", claude_request(1));
  ASSERT_EQ(r2.status, 200);
  std::string text;
  for (const Event& e : sse(r2.body)) {
    json d = json::parse(e.data);
    if (e.name == "content_block_delta") text += d["delta"]["text"].get<std::string>();
    if (e.name == "message_delta") {
      EXPECT_EQ(d["delta"]["stop_reason"], "end_turn");
    }
  }
  EXPECT_EQ(text, "Done. Tool said: File created successfully at: /tmp/w/hello.txt");

  auto log = server->log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0]["format"], "anthropic");
  EXPECT_EQ(log[0]["scenario"], "hello");
  EXPECT_EQ(log[0]["step"], 0);
  EXPECT_EQ(log[0]["workdir"], "/tmp/w");
  EXPECT_EQ(log[0]["headers"]["x-api-key"], "<redacted>");
  EXPECT_EQ(log[0]["headers"]["anthropic-version"], "2023-06-01");
  EXPECT_EQ(log[0]["tools"], json::array({"Bash", "Edit", "Write"}));
  EXPECT_EQ(log[0]["reply"]["tool_calls"][0]["name"], "Write");
  EXPECT_EQ(log[1]["step"], 1);
  EXPECT_EQ(log[1]["tool_results"][0]["text"], "File created successfully at: /tmp/w/hello.txt");
  EXPECT_EQ(log[1]["tool_results"][0]["is_error"], false);
}

TEST(FakeLlmServer, AnthropicNonStreamingAndRetriedRequestsGetTheSameStep) {
  auto server = start(kWriteScenario);
  ASSERT_TRUE(server);
  json req = claude_request(0);
  req["stream"] = false;
  Client c(server->port());
  HttpReply a = c.post("/v1/messages", req);
  HttpReply b = c.post("/v1/messages", req);  // a retry: no server counter advances the script
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(a.headers["content-type"], "application/json");
  json ja = json::parse(a.body), jb = json::parse(b.body);
  EXPECT_EQ(ja["stop_reason"], "tool_use");
  EXPECT_EQ(ja["content"][0]["name"], "Write");
  EXPECT_EQ(ja["content"], jb["content"]);
  EXPECT_EQ(server->log()[1]["attempt"], 2);
  // Past the end of the script: the last text step repeats.
  req = claude_request(5);
  req["stream"] = false;
  json late = json::parse(c.post("/v1/messages", req).body);
  EXPECT_EQ(late["content"][0]["text"], "Done. Tool said: File created successfully at: /tmp/w/hello.txt");
}

TEST(FakeLlmServer, ChatCompletionsStreamsToolCallDeltasAndUsage) {
  auto server = start(json::parse(R"([{"name":"c","match":"improve","steps":[
    {"text":"Let me look.","calls":[{"tool":"read","input":{"path":"k.cu"}},{"tool":"finish_round","input":{"summary":"s"}}]},
    {"text":"finished"}]}])"));
  ASSERT_TRUE(server);
  json req = {
      {"model", "local"},
      {"stream", true},
      {"stream_options", {{"include_usage", true}}},
      {"tools",
       json::array({{{"type", "function"}, {"function", {{"name", "read_file"}, {"parameters", json::object()}}}},
                    {{"type", "function"}, {"function", {{"name", "finish_round"}, {"parameters", json::object()}}}}})},
      {"messages",
       json::array({{{"role", "system"}, {"content", "sys"}}, {{"role", "user"}, {"content", "improve the kernel"}}})}};
  Client c(server->port());
  HttpReply r = c.post("/v1/chat/completions", req, "Authorization: Bearer sk-x\r\n");
  ASSERT_EQ(r.status, 200);
  ASSERT_TRUE(r.complete);
  auto ev = sse(r.body);
  ASSERT_GE(ev.size(), 4u);
  EXPECT_EQ(ev.back().data, "[DONE]");
  std::string content, finish;
  std::map<int, std::string> names, args, ids;
  json usage;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    json d = json::parse(ev[i].data);
    EXPECT_EQ(d["object"], "chat.completion.chunk");
    if (d.contains("usage") && d["choices"].empty()) {
      usage = d["usage"];
      continue;
    }
    const json& delta = d["choices"][0]["delta"];
    if (delta.contains("content") && delta["content"].is_string()) content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls")) {
      for (const json& tc : delta["tool_calls"]) {
        int idx = tc["index"];
        if (tc.contains("id")) ids[idx] = tc["id"];
        if (tc["function"].contains("name")) names[idx] = tc["function"]["name"];
        args[idx] += tc["function"]["arguments"].get<std::string>();
      }
    }
    if (!d["choices"][0]["finish_reason"].is_null()) finish = d["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(content, "Let me look.");
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(names[0], "read_file");
  EXPECT_EQ(names[1], "finish_round");
  EXPECT_EQ(ids[0], "call_fake_0_0");
  EXPECT_EQ(json::parse(args[0]), (json{{"path", "k.cu"}}));
  EXPECT_EQ(json::parse(args[1]), (json{{"summary", "s"}}));
  EXPECT_GT(usage["prompt_tokens"].get<int>(), 0);
  EXPECT_EQ(server->log()[0]["headers"]["authorization"], "<redacted>");

  // Non-streaming, after the parallel calls (one assistant turn) and their two results.
  req["stream"] = false;
  req["messages"].push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array()}});
  req["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_fake_0_0"}, {"content", "kernel text"}});
  req["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_fake_0_1"}, {"content", "recorded"}});
  json done = json::parse(c.post("/v1/chat/completions", req).body);
  EXPECT_EQ(done["choices"][0]["message"]["content"], "finished");
  EXPECT_EQ(done["choices"][0]["finish_reason"], "stop");
  EXPECT_GT(done["usage"]["total_tokens"].get<int>(), 0);
  EXPECT_EQ(server->log()[1]["tool_results"].size(), 2u);
}

// A request shaped like Codex 0.171.0's (agent-clis.md §3.2).
json codex_request(const json& extra_items) {
  json input = json::array(
      {{{"type", "message"},
        {"role", "developer"},
        {"content", json::array({{{"type", "input_text"}, {"text", "base"}}})}},
       {{"type", "message"},
        {"role", "user"},
        {"content", json::array({{{"type", "input_text"},
                                  {"text", "<environment_context><cwd>/tmp/cw</cwd></environment_context>"}}})}},
       {{"type", "message"},
        {"role", "user"},
        {"content", json::array({{{"type", "input_text"}, {"text", "create hello.txt containing hi"}}})}}});
  for (const json& it : extra_items) input.push_back(it);
  return {{"model", "gpt-5.5"},
          {"instructions", ""},
          {"stream", true},
          {"store", false},
          {"tool_choice", "auto"},
          {"parallel_tool_calls", true},
          {"reasoning", {{"effort", "medium"}}},
          {"include", json::array()},
          {"tools", json::array({{{"type", "function"}, {"name", "exec_command"}, {"parameters", {{"type", "object"}}}},
                                 {{"type", "custom"}, {"name", "apply_patch"}, {"format", {{"type", "grammar"}}}},
                                 {{"type", "web_search"}}})},
          {"input", input}};
}

TEST(FakeLlmServer, ResponsesMinimalStreamForCodex) {
  auto server = start(json::parse(R"([{"name":"hello","match":"create hello","steps":[
    {"tool":"write","input":{"path":"hello.txt","content":"hi\n"}},
    {"tool":"shell","input":{"command":"cat hello.txt"}},
    {"text":"done in ${workdir}"}]}])"));
  ASSERT_TRUE(server);
  Client c(server->port());
  HttpReply r = c.post("/v1/responses", codex_request(json::array()));
  ASSERT_EQ(r.status, 200);
  auto ev = sse(r.body);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].name, "response.output_item.done");
  json item = json::parse(ev[0].data)["item"];
  EXPECT_EQ(item["type"], "custom_tool_call");
  EXPECT_EQ(item["name"], "apply_patch");
  EXPECT_EQ(item["input"], "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n");
  EXPECT_EQ(ev[1].name, "response.completed");
  json completed = json::parse(ev[1].data);
  EXPECT_EQ(completed["response"]["status"], "completed");
  EXPECT_EQ(completed["response"]["output"][0], item);
  EXPECT_GT(completed["response"]["usage"]["total_tokens"].get<int>(), 0);

  json step1 = codex_request(json::array({item,
                                          {{"type", "custom_tool_call_output"},
                                           {"call_id", item["call_id"]},
                                           {"output", "Success. Updated the following files:\nA hello.txt"}}}));
  auto ev1 = sse(c.post("/v1/responses", step1).body);
  json call = json::parse(ev1[0].data)["item"];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "exec_command");
  EXPECT_EQ(json::parse(call["arguments"].get<std::string>()), (json{{"cmd", "cat hello.txt"}}));

  json step2 = step1;
  step2["input"].push_back(call);
  step2["input"].push_back({{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "hi\n"}});
  auto ev2 = sse(c.post("/v1/responses", step2).body);
  json msg = json::parse(ev2[0].data)["item"];
  EXPECT_EQ(msg["type"], "message");
  EXPECT_EQ(msg["content"][0]["text"], "done in /tmp/cw");
  auto log = server->log();
  EXPECT_EQ(log[2]["step"], 2);
  EXPECT_EQ(log[2]["tool_results"][0]["text"], "hi\n");
  EXPECT_EQ(log[0]["workdir"], "/tmp/cw");
}

TEST(FakeLlmServer, ResponsesFullEventStream) {
  json doc = {
      {"responses_stream", "full"},
      {"chunk_chars", 4},
      {"scenarios",
       json::parse(R"([{"name":"t","steps":[{"text":"hello there","tool":"shell","input":{"command":"ls"}}]}])")}};
  auto server = start(doc);
  ASSERT_TRUE(server);
  Client c(server->port());
  auto ev = sse(c.post("/responses", codex_request(json::array())).body);
  std::vector<std::string> names;
  std::string text, args;
  for (const Event& e : ev) {
    names.push_back(e.name);
    json d = json::parse(e.data);
    EXPECT_EQ(d["type"], e.name);
    if (e.name == "response.output_text.delta") text += d["delta"].get<std::string>();
    if (e.name == "response.function_call_arguments.delta") args += d["delta"].get<std::string>();
  }
  ASSERT_GE(names.size(), 10u);
  EXPECT_EQ(names[0], "response.created");
  EXPECT_EQ(names[1], "response.in_progress");
  EXPECT_EQ(names[2], "response.output_item.added");
  EXPECT_EQ(names[3], "response.content_part.added");
  EXPECT_EQ(names.back(), "response.completed");
  EXPECT_EQ(text, "hello there");
  EXPECT_EQ(json::parse(args), (json{{"cmd", "ls"}}));
}

// Codex defers MCP tools behind tool_search: the fake searches first (a turn that does not count
// as a step), then calls the tool in the namespace the search loaded.
TEST(FakeLlmServer, ResponsesLoadsDeferredToolsThroughToolSearch) {
  auto server = start(json::parse(R"([{"name":"fin","match":"create hello","steps":[
    {"tool":"finish_round","input":{"summary":"did it"}},{"text":"over"}]}])"));
  ASSERT_TRUE(server);
  Client c(server->port());
  json req = codex_request(json::array());
  req["tools"].push_back({{"type", "tool_search"}, {"execution", "client"}, {"parameters", json::object()}});
  json search = json::parse(sse(c.post("/v1/responses", req).body)[0].data)["item"];
  EXPECT_EQ(search["type"], "tool_search_call");
  EXPECT_EQ(search["execution"], "client");
  EXPECT_EQ(search["arguments"], (json{{"query", "finish_round"}, {"limit", 8}}));
  json loaded = {{"type", "tool_search_output"},
                 {"call_id", search["call_id"]},
                 {"execution", "client"},
                 {"status", "completed"},
                 {"tools", json::array({{{"type", "namespace"},
                                         {"name", "mcp__kda"},
                                         {"tools", json::array({{{"type", "function"},
                                                                 {"name", "finish_round"},
                                                                 {"defer_loading", true},
                                                                 {"parameters", json::object()}}})}}})}};
  req["input"].push_back(search);
  req["input"].push_back(loaded);
  json call = json::parse(sse(c.post("/v1/responses", req).body)[0].data)["item"];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["namespace"], "mcp__kda");
  EXPECT_EQ(call["name"], "finish_round");
  EXPECT_NE(call["call_id"], search["call_id"]);  // ids never repeat within a conversation
  req["input"].push_back(call);
  req["input"].push_back(
      {{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "round finished"}});
  json done = json::parse(sse(c.post("/v1/responses", req).body)[0].data)["item"];
  EXPECT_EQ(done["content"][0]["text"], "over");
  auto log = server->log();
  EXPECT_EQ(log[0]["step"], 0);
  EXPECT_EQ(log[0]["reply"]["tool_calls"][0]["search"], true);
  EXPECT_EQ(log[1]["step"], 0);
  EXPECT_EQ(log[1]["reply"]["tool_calls"][0]["name"], "mcp__kda__finish_round");
  EXPECT_EQ(log[2]["step"], 1);
}

// Claude Code (tool search on) offers ToolSearch; the loaded tool then appears in `tools`.
TEST(FakeLlmServer, AnthropicLoadsDeferredToolsThroughToolSearch) {
  auto server = start(json::parse(R"([{"name":"fin","match":"create hello","steps":[
    {"tool":"finish_round","input":{"summary":"did it"}},{"text":"over"}]}])"));
  ASSERT_TRUE(server);
  json req = claude_request(0);
  req["stream"] = false;
  req["tools"].push_back({{"name", "ToolSearch"}, {"input_schema", json::object()}});
  Client c(server->port());
  json first = json::parse(c.post("/v1/messages", req).body);
  ASSERT_EQ(first["content"][0]["name"], "ToolSearch");
  EXPECT_EQ(first["content"][0]["input"]["query"], "finish_round");
  req["tools"].push_back(
      {{"name", "mcp__kda__finish_round"}, {"defer_loading", true}, {"input_schema", json::object()}});
  req["messages"].push_back({{"role", "assistant"}, {"content", first["content"]}});
  req["messages"].push_back(
      {{"role", "user"},
       {"content",
        json::array(
            {{{"type", "tool_result"},
              {"tool_use_id", first["content"][0]["id"]},
              {"content", json::array({{{"type", "tool_reference"}, {"tool_name", "mcp__kda__finish_round"}}})}}})}});
  json second = json::parse(c.post("/v1/messages", req).body);
  ASSERT_EQ(second["content"][0]["name"], "mcp__kda__finish_round");
  EXPECT_NE(second["content"][0]["id"], first["content"][0]["id"]);
  EXPECT_EQ(server->log()[1]["step"], 0);
}

TEST(FakeLlmServer, StatusFaultsWithRetryAfterThenSuccess) {
  json sc = kWriteScenario;
  sc[0]["steps"][0]["faults"] = json::array({{{"status", 429}, {"retry_after", 1}, {"times", 2}}});
  sc[0]["steps"][1]["fault"] = {{"status", 500}};
  auto server = start(sc);
  ASSERT_TRUE(server);
  Client c(server->port());
  for (int i = 0; i < 2; ++i) {
    HttpReply r = c.post("/v1/messages", claude_request(0));
    EXPECT_EQ(r.status, 429);
    EXPECT_EQ(r.headers["retry-after"], "1");
    json e = json::parse(r.body);
    EXPECT_EQ(e["type"], "error");
    EXPECT_EQ(e["error"]["type"], "rate_limit_error");
  }
  EXPECT_EQ(c.post("/v1/messages", claude_request(0)).status, 200);
  HttpReply e500 = c.post("/v1/messages", claude_request(1));
  EXPECT_EQ(e500.status, 500);
  EXPECT_EQ(json::parse(e500.body)["error"]["type"], "api_error");
  EXPECT_EQ(c.post("/v1/messages", claude_request(1)).status, 200);
  auto log = server->log();
  EXPECT_EQ(log[0]["fault"], "status:429");
  EXPECT_EQ(log[2]["fault"], nullptr);
  EXPECT_EQ(log[3]["fault"], "status:500");

  // A global 401 for every attempt, in the OpenAI error shape.
  auto denied =
      start(json{{"scenarios", kWriteScenario}, {"faults", json::array({{{"status", 401}, {"times", "always"}}})}});
  Client d(denied->port());
  for (int i = 0; i < 3; ++i) {
    HttpReply r = d.post("/v1/responses", codex_request(json::array()));
    EXPECT_EQ(r.status, 401);
    EXPECT_TRUE(json::parse(r.body)["error"].contains("message"));
  }
}

TEST(FakeLlmServer, CutStreamAfterStartThenRecovers) {
  json sc = kWriteScenario;
  sc[0]["steps"][0]["fault"] = {{"cut", "after_start"}, {"times", 1}};
  auto server = start(sc);
  ASSERT_TRUE(server);
  {
    Client c(server->port());
    HttpReply r = c.post("/v1/messages", claude_request(0));
    EXPECT_EQ(r.status, 200);
    EXPECT_FALSE(r.complete);  // no final chunk: the connection closed mid-stream
    auto ev = sse(r.body);
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0].name, "message_start");
  }
  Client c2(server->port());
  HttpReply ok = c2.post("/v1/messages", claude_request(0));
  EXPECT_TRUE(ok.complete);
  EXPECT_EQ(sse(ok.body).back().name, "message_stop");
  EXPECT_EQ(server->log()[0]["fault"], "cut:after_start");

  // before_response: the connection closes with nothing sent.
  json sc2 = kWriteScenario;
  sc2[0]["faults"] = json::array({{{"cut", "before_response"}}});
  // Responses (minimal stream): the cut comes after response.created, before any output item.
  auto s3 = start(sc);
  Client c4(s3->port());
  HttpReply cut = c4.post("/v1/responses", codex_request(json::array()));
  EXPECT_FALSE(cut.complete);
  auto cut_ev = sse(cut.body);
  ASSERT_EQ(cut_ev.size(), 1u);
  EXPECT_EQ(cut_ev[0].name, "response.created");

  auto s2 = start(sc2);
  Client c3(s2->port());
  EXPECT_EQ(c3.post("/v1/messages", claude_request(0)).status, 0);
}

TEST(FakeLlmServer, MalformedDataLine) {
  json sc = kWriteScenario;
  sc[0]["steps"][0]["fault"] = {{"malformed", true}};
  auto server = start(sc);
  ASSERT_TRUE(server);
  Client c(server->port());
  auto ev = sse(c.post("/v1/messages", claude_request(0)).body);
  int bad = 0;
  for (const Event& e : ev) {
    if (json::parse(e.data, nullptr, false).is_discarded()) {
      ++bad;
      EXPECT_EQ(e.name, "content_block_delta");
    }
  }
  EXPECT_EQ(bad, 1);
  json req = claude_request(0);
  req["stream"] = false;
  HttpReply second = c.post("/v1/messages", req);  // attempt 2: the fault (times 1) is spent
  EXPECT_FALSE(json::parse(second.body, nullptr, false).is_discarded());
}

TEST(FakeLlmServer, DelayBetweenEvents) {
  json sc = kWriteScenario;
  sc[0]["steps"][1]["fault"] = {{"delay_ms", 40}};
  auto server = start(sc);
  ASSERT_TRUE(server);
  Client c(server->port());
  auto t0 = Clock::now();
  auto ev = sse(c.post("/v1/messages", claude_request(1)).body);
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  ASSERT_GE(ev.size(), 5u);
  EXPECT_GE(ms, 40.0 * (ev.size() - 1) * 0.9);
}

TEST(FakeLlmServer, ConcurrentConnectionsAreServedInParallel) {
  json doc = json::parse(R"([{"name":"slow","match":"slow","steps":[{"text":"a b c d e f","fault":{"delay_ms":300}}]},
                             {"name":"fast","match":"fast","steps":[{"text":"quick"}]}])");
  doc[0]["steps"][0]["fault"]["times"] = "always";
  Options o;
  o.scenarios = doc;
  auto server = start(doc);
  ASSERT_TRUE(server);
  auto req = [](const char* text) {
    return json{{"model", "m"}, {"stream", true}, {"messages", json::array({{{"role", "user"}, {"content", text}}})}};
  };
  Clock::time_point slow_end, fast_end;
  std::string slow_body;
  std::thread slow([&] {
    Client c(server->port());
    slow_body = c.post("/v1/messages", req("slow please")).body;
    slow_end = Clock::now();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::vector<std::thread> fast;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    fast.emplace_back([&] {
      Client c(server->port());
      if (c.post("/v1/messages", req("fast please")).status == 200) ++ok;
    });
  }
  for (auto& t : fast) t.join();
  fast_end = Clock::now();
  slow.join();
  EXPECT_EQ(ok, 4);
  EXPECT_LT(fast_end, slow_end);
  EXPECT_NE(slow_body.find("message_stop"), std::string::npos);
}

TEST(FakeLlmServer, NotFoundNoScenarioNoToolsAndUnresolvableTool) {
  auto server = start(
      json::parse(R"([{"name":"w","match":"write it","steps":[{"tool":"write","input":{"path":"a","content":"b"}}]},
                                       {"name":"x","match":"use xyz","steps":[{"tool":"xyz_tool"}]}])"));
  ASSERT_TRUE(server);
  Client c(server->port());
  HttpReply nf = c.request("GET", "/v1/models", "");
  EXPECT_EQ(nf.status, 404);
  EXPECT_TRUE(json::parse(nf.body).contains("error"));
  EXPECT_EQ(c.request("HEAD", "/api/hello", "").status, 404);
  auto ask = [&](const char* text, bool with_tools) {
    json req = {{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", text}}})}};
    if (with_tools) req["tools"] = json::array({{{"name", "Write"}, {"input_schema", json::object()}}});
    return json::parse(c.post("/v1/messages", req).body)["content"][0]["text"].get<std::string>();
  };
  EXPECT_EQ(ask("something else", true), "fake-llm: no scenario matches this request");
  EXPECT_EQ(ask("write it", false), "fake-llm: ok");
  EXPECT_NE(ask("use xyz", true).find("cannot resolve tool \"xyz_tool\""), std::string::npos);
  HttpReply bad = c.request("POST", "/v1/chat/completions", "{not json");
  EXPECT_EQ(bad.status, 400);
  auto log = server->log();
  EXPECT_EQ(log[0]["status"], 404);
  EXPECT_EQ(log[2]["scenario"], nullptr);
  EXPECT_NE(log.back()["error"], nullptr);
  EXPECT_NE(log[log.size() - 2]["error"], nullptr);
}

TEST(FakeLlmServer, RejectsBadScenariosAndWritesTheLogFile) {
  Options bad;
  bad.scenarios = json::parse(R"([{"name":"a","steps":[{"tool":""}]}])");
  auto r = Server::start(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput);
  EXPECT_NE(r.status().message().find("/0/steps/0/tool"), std::string::npos);

  auto dir = fs::make_temp_dir(std::filesystem::temp_directory_path(), "fakellm-log");
  ASSERT_TRUE(dir.ok());
  Options o;
  o.log_path = *dir / "requests.jsonl";
  o.log_bodies = true;
  o.workdir = "/opt/wd";
  auto server = start(kWriteScenario, o);
  json req = claude_request(0);
  req["system"] = "no workdir here";
  req["stream"] = false;
  Client c(server->port());
  json reply = json::parse(c.post("/v1/messages", req, "Authorization: Bearer zzz\r\nX-Goog-Api-Key: k\r\n").body);
  EXPECT_EQ(reply["content"][0]["input"]["file_path"], "/opt/wd/hello.txt");  // the server's fallback workdir
  server->stop();
  server->stop();  // idempotent
  auto text = fs::read_file(*o.log_path);
  ASSERT_TRUE(text.ok());
  json line = json::parse(text->substr(0, text->find('\n')));
  EXPECT_EQ(line["headers"]["authorization"], "<redacted>");
  EXPECT_EQ(line["headers"]["x-goog-api-key"], "<redacted>");
  EXPECT_EQ(line["body"]["model"], "claude-sonnet-x");
  EXPECT_EQ(text->find("zzz"), std::string::npos);
  std::filesystem::remove_all(*dir);
}

TEST(FakeLlmServer, BinaryWritesPortFileAndStopsOnSigterm) {
  auto dir = fs::make_temp_dir(std::filesystem::temp_directory_path(), "fakellm-bin");
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(fs::write_file_atomic(*dir / "s.json", kWriteScenario.dump()).ok());
  proc::ChildOptions co;
  co.argv = {KDA_FAKE_LLM_BINARY,      "--scenarios", (*dir / "s.json").string(),   "--port-file",
             (*dir / "port").string(), "--log",       (*dir / "log.jsonl").string()};
  auto child = proc::Child::spawn(co);
  ASSERT_TRUE(child.ok()) << child.status().message();
  int port = 0;
  for (int i = 0; i < 500 && port == 0; ++i) {
    auto p = fs::read_file(*dir / "port");
    if (p.ok())
      port = std::atoi(p->c_str());
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(port, 0);
  {
    Client c(port);
    EXPECT_EQ(c.post("/v1/messages", claude_request(0)).status, 200);
  }
  ::kill(child->pid(), SIGTERM);
  auto exit = child->wait_or_kill(proc::Deadline::after(std::chrono::seconds(10)));
  EXPECT_TRUE(exit.success()) << exit.describe();
  EXPECT_EQ(std::atoi(child->take_stdout().c_str()), port);
  auto log = fs::read_file(*dir / "log.jsonl");
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("\"scenario\":\"hello\""), std::string::npos);

  proc::RunOptions bad;
  bad.argv = {KDA_FAKE_LLM_BINARY, "--scenarios", (*dir / "missing.json").string()};
  bad.timeout_seconds = 10;
  auto r = proc::run(bad);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.exit_code, 2);
  EXPECT_NE(r->stderr_text.find("missing.json"), std::string::npos);
  std::filesystem::remove_all(*dir);
}

}  // namespace
}  // namespace kda::fakellm
