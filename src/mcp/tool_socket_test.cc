#include "mcp/tool_socket.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "mcp/test_tools.h"
#include "proc/frame.h"
#include "util/fs.h"

namespace kda::mcp {
namespace {

using nlohmann::json;

class ToolSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = fs::make_temp_dir(std::filesystem::temp_directory_path(), "kda-mcp-test");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ToolSocketTest, ProxiesListAndCalls) {
  testing::TestTools tools;
  std::vector<std::string> seen;
  auto server = ToolSocketServer::start(
      &tools, dir_ / "tools.sock", {.on_call = [&](const std::string& n, const json&, const agent::ToolOutcome& o) {
        seen.push_back(n + (o.is_error ? ":err" : ":ok"));
      }});
  ASSERT_TRUE(server.ok()) << server.status().message();
  auto client = SocketToolHost::connect(dir_ / "tools.sock");
  ASSERT_TRUE(client.ok()) << client.status().message();
  auto specs = (*client)->tools();
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[1].name, "bump");
  EXPECT_FALSE(specs[1].read_only);
  auto out = (*client)->call("echo", {{"text", "x"}});
  EXPECT_EQ(out.text, "x");
  EXPECT_FALSE(out.is_error);
  EXPECT_EQ(out.data["len"], 1);
  EXPECT_TRUE((*client)->call("echo", json::object()).is_error);
  EXPECT_EQ((*client)->call("bump", json::object()).text, "bumped 1");
  // A second client is served by the same thread.
  auto client2 = SocketToolHost::connect(dir_ / "tools.sock");
  ASSERT_TRUE(client2.ok());
  EXPECT_EQ((*client2)->call("bump", json::object()).text, "bumped 2");
  (*server)->stop();
  EXPECT_EQ(seen, (std::vector<std::string>{"echo:ok", "echo:err", "bump:ok", "bump:ok"}));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "tools.sock"));
  // The server is gone: calls fail as tool errors, never as successes.
  EXPECT_TRUE((*client)->call("echo", {{"text", "x"}}).is_error);
}

TEST_F(ToolSocketTest, ReadOnlyServerRefusesWritingToolsWhateverTheClientAsks) {
  testing::TestTools tools;
  auto server = ToolSocketServer::start(&tools, dir_ / "ro.sock", {.read_only_tools = true});
  ASSERT_TRUE(server.ok());
  auto client = SocketToolHost::connect(dir_ / "ro.sock");
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->tools().size(), 1u);
  auto out = (*client)->call("bump", json::object());
  EXPECT_TRUE(out.is_error);
  EXPECT_EQ(tools.bumps, 0);
}

TEST_F(ToolSocketTest, SurvivesGarbageFromAClient) {
  testing::TestTools tools;
  auto server = ToolSocketServer::start(&tools, dir_ / "g.sock");
  ASSERT_TRUE(server.ok());
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string p = (dir_ / "g.sock").string();
  std::memcpy(addr.sun_path, p.data(), p.size());
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_TRUE(proc::write_frame(fd, kToolFrameRequest, "not json").ok());
  auto r = proc::read_frame(fd, proc::Deadline::after_seconds(5));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(json::parse(r.frame->payload).contains("error"));
  ASSERT_TRUE(proc::write_frame(fd, kToolFrameRequest, R"({"op":"launch"})").ok());
  r = proc::read_frame(fd, proc::Deadline::after_seconds(5));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(json::parse(r.frame->payload).contains("error"));
  ASSERT_EQ(::write(fd, "garbage-bytes-not-a-frame", 25), 25);  // dropped by the server
  ::close(fd);
  auto client = SocketToolHost::connect(dir_ / "g.sock");
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->call("echo", {{"text", "still here"}}).text, "still here");
}

TEST_F(ToolSocketTest, RefusesOverlongPathsAndMissingSockets) {
  testing::TestTools tools;
  auto server = ToolSocketServer::start(&tools, dir_ / std::string(120, 'x'));
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().kind(), ErrorKind::kBadInput);
  auto client = SocketToolHost::connect(dir_ / "absent.sock", proc::Deadline::after_seconds(0.1));
  EXPECT_FALSE(client.ok());
}

}  // namespace
}  // namespace kda::mcp
