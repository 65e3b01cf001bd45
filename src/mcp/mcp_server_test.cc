#include "mcp/mcp_server.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include "mcp/test_tools.h"

namespace kda::mcp {
namespace {

using nlohmann::json;

json reply(McpServer& s, const std::string& line) {
  auto r = s.handle_line(line);
  EXPECT_TRUE(r.has_value()) << line;
  return r ? json::parse(*r) : json();
}

TEST(McpServer, InitializeNegotiatesTheClientsVersionOrOurLatest) {
  testing::TestTools tools;
  McpServer s(&tools, {});
  json r = reply(
      s,
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})");
  EXPECT_EQ(r["id"], 1);
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "kda");
  EXPECT_TRUE(r["result"]["capabilities"].contains("tools"));
  r = reply(s, R"({"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":"1999-01-01"}})");
  EXPECT_EQ(r["id"], "a");
  EXPECT_EQ(r["result"]["protocolVersion"], supported_protocol_versions().front());
  EXPECT_FALSE(s.handle_line(R"({"jsonrpc":"2.0","method":"notifications/initialized"})").has_value());
  EXPECT_TRUE(s.initialized());
  EXPECT_EQ(reply(s, R"({"jsonrpc":"2.0","id":2,"method":"ping"})")["result"], json::object());
}

TEST(McpServer, ListsAndCallsTools) {
  testing::TestTools tools;
  McpServer s(&tools, {});
  json r = reply(s, R"({"jsonrpc":"2.0","id":3,"method":"tools/list"})");
  ASSERT_EQ(r["result"]["tools"].size(), 2u);
  EXPECT_EQ(r["result"]["tools"][0]["name"], "echo");
  EXPECT_EQ(r["result"]["tools"][0]["inputSchema"]["type"], "object");
  r = reply(s, R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}})");
  EXPECT_EQ(r["result"]["content"][0]["type"], "text");
  EXPECT_EQ(r["result"]["content"][0]["text"], "hi");
  EXPECT_EQ(r["result"]["isError"], false);
  // A tool's own failure is a result with isError, not a protocol error.
  r = reply(s, R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{}}})");
  EXPECT_EQ(r["result"]["isError"], true);
  r = reply(s, R"({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"bump"}})");
  EXPECT_EQ(r["result"]["content"][0]["text"], "bumped 1");
}

TEST(McpServer, ReadOnlyModeHidesAndRefusesWritingTools) {
  testing::TestTools tools;
  McpServer s(&tools, {.read_only_tools = true});
  json r = reply(s, R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})");
  ASSERT_EQ(r["result"]["tools"].size(), 1u);
  EXPECT_EQ(r["result"]["tools"][0]["name"], "echo");
  r = reply(s, R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bump","arguments":{}}})");
  EXPECT_EQ(r["error"]["code"], kInvalidParams);
  EXPECT_EQ(tools.bumps, 0);
}

TEST(McpServer, ProtocolErrors) {
  testing::TestTools tools;
  McpServer s(&tools, {});
  EXPECT_EQ(reply(s, "{not json")["error"]["code"], kParseError);
  EXPECT_TRUE(reply(s, "{not json")["id"].is_null());
  EXPECT_EQ(reply(s, R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])")["error"]["code"], kInvalidRequest);
  EXPECT_EQ(reply(s, R"("hello")")["error"]["code"], kInvalidRequest);
  EXPECT_EQ(reply(s, R"({"jsonrpc":"1.0","id":1,"method":"ping"})")["error"]["code"], kInvalidRequest);
  EXPECT_EQ(reply(s, R"({"jsonrpc":"2.0","id":1,"method":7})")["error"]["code"], kInvalidRequest);
  EXPECT_EQ(reply(s, R"({"jsonrpc":"2.0","id":1})")["error"]["code"], kInvalidRequest);
  json r = reply(s, R"({"jsonrpc":"2.0","id":9,"method":"resources/list"})");
  EXPECT_EQ(r["error"]["code"], kMethodNotFound);
  EXPECT_EQ(r["id"], 9);
  EXPECT_EQ(reply(s, R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}})")["error"]["code"],
            kInvalidParams);
  EXPECT_EQ(reply(s, R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}})")["error"]["code"],
            kInvalidParams);
  EXPECT_EQ(
      reply(s, R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":[1]}})")["error"]
                                                                                                            ["code"],
      kInvalidParams);
  EXPECT_EQ(reply(s, R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1]})")["error"]["code"],
            kInvalidParams);
  // Notifications (no id) and responses are never answered, even unknown ones.
  EXPECT_FALSE(s.handle_line(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{}})").has_value());
  EXPECT_FALSE(s.handle_line(R"({"jsonrpc":"2.0","id":5,"result":{}})").has_value());
  EXPECT_FALSE(s.handle_line("   ").has_value());
}

TEST(McpServer, ServesNewlineDelimitedStreams) {
  testing::TestTools tools;
  McpServer s(&tools, {});
  int in[2], out[2];
  ASSERT_EQ(::pipe(in), 0);
  ASSERT_EQ(::pipe(out), 0);
  std::string input =
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}})"
      "\n"
      R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
      "\r\n"
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a\nb"}}})";
  ASSERT_EQ(::write(in[1], input.data(), input.size()), static_cast<ssize_t>(input.size()));
  ::close(in[1]);
  ASSERT_TRUE(s.serve(in[0], out[1]).ok());
  ::close(out[1]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(in[0]);
  ::close(out[0]);
  auto nl = got.find('\n');
  ASSERT_NE(nl, std::string::npos);
  EXPECT_EQ(json::parse(got.substr(0, nl))["result"]["protocolVersion"], "2025-03-26");
  json second = json::parse(got.substr(nl + 1));
  EXPECT_EQ(second["result"]["content"][0]["text"], "a\nb");
  EXPECT_EQ(got.back(), '\n');
  EXPECT_EQ(std::count(got.begin(), got.end(), '\n'), 2);
}

}  // namespace
}  // namespace kda::mcp
