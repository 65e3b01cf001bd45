// The knowledge tools (KernelWiki, Nsight Compute skill) as a CLI agent sees them over MCP: composed
// with the workspace file tools behind McpServer, driven over pipes; and through `kda mcp --workspace`
// when the kda binary is built.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "agent/workspace_tools.h"
#include "loop/knowledge_tools.h"
#include "mcp/mcp_server.h"
#include "proc/subprocess.h"
#include "util/fs.h"

namespace kda::mcp {
namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

const stdfs::path kFixtures = stdfs::path(KDA_SOURCE_DIR) / "src/ncu/testdata";

class McpKnowledgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-mcp-knowledge");
    ASSERT_TRUE(d.ok()) << d.status().message();
    dir_ = *d;
    stdfs::create_directories(dir_ / "ws" / "profiles");
    stdfs::create_directories(dir_ / "knowledge" / "technique");
    stdfs::copy_file(kFixtures / "saxpy.ncu-rep", dir_ / "ws" / "profiles" / "saxpy.ncu-rep");
    std::ofstream(dir_ / "knowledge" / "technique" / "okapi.md")
        << "---\nid: technique/okapi-staging\ntitle: \"Okapi staging\"\ntype: technique\ntags: [technique, "
           "okapistage]\n"
           "sources:\n  - Our own notes, https://example.org/okapi\n---\n# Okapi staging\n\nStage okapistage tiles "
           "through shared memory before the epilogue so the global stores coalesce.\n";
    ::setenv("KDA_KNOWLEDGE_DIR", (dir_ / "knowledge").c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("KDA_KNOWLEDGE_DIR");
    std::error_code ec;
    stdfs::remove_all(dir_, ec);
  }
  // Requests, one per line, through McpServer::serve over pipes; the replies by id.
  std::map<int, json> serve(agent::ToolHost* host, bool read_only, const std::vector<json>& requests) {
    McpServer server(host, {.read_only_tools = read_only});
    int in[2], out[2];
    EXPECT_EQ(::pipe(in), 0);
    EXPECT_EQ(::pipe(out), 0);
    std::string input;
    for (const auto& r : requests) input += r.dump() + "\n";
    // The replies can exceed a pipe's buffer: the server runs on its own thread while we read.
    std::thread t([&] {
      (void)server.serve(in[0], out[1]);
      ::close(out[1]);
    });
    EXPECT_EQ(::write(in[1], input.data(), input.size()), static_cast<ssize_t>(input.size()));
    ::close(in[1]);
    std::string got;
    char buf[65536];
    for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    t.join();
    ::close(in[0]);
    ::close(out[0]);
    std::map<int, json> replies;
    size_t start = 0;
    for (size_t nl; (nl = got.find('\n', start)) != std::string::npos; start = nl + 1) {
      json j = json::parse(got.substr(start, nl - start));
      replies[j["id"].get<int>()] = j;
    }
    return replies;
  }
  static json call(int id, const std::string& name, json args) {
    return {
        {"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"}, {"params", {{"name", name}, {"arguments", args}}}};
  }
  stdfs::path dir_;
};

TEST_F(McpKnowledgeTest, ReviewerSeesAndCallsTheKnowledgeToolsNextToTheFileTools) {
  agent::WorkspaceTools files({.workspace = dir_ / "ws", .read_only = true});
  loop::KnowledgeTools knowledge({.wiki_db = dir_ / "wiki.db", .roots = {dir_ / "ws"}});
  agent::CompositeToolHost host;
  host.add(&files);
  host.add(&knowledge);
  std::vector<json> requests = {
      {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"}, {"params", {{"protocolVersion", "2025-06-18"}}}},
      {{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}},
      {{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}},
      call(3, "ncu_analyze", {{"report", "profiles/saxpy.ncu-rep"}}),
      call(4, "ncu_analyze", {{"report", (kFixtures / "saxpy.ncu-rep").string()}}),
      call(5, "wiki_search", {{"query", "okapistage tiles"}}),
      call(6, "wiki_show", {{"id", "technique/okapi-staging"}}),
      call(7, "wiki_show", {{"id", "technique/nope"}}),
  };
  auto r = serve(&host, /*read_only=*/true, requests);
  ASSERT_EQ(r.count(2), 1u);
  std::set<std::string> names;
  for (const auto& t : r[2]["result"]["tools"]) names.insert(t["name"].get<std::string>());
  EXPECT_TRUE(names.count("read_file"));
  EXPECT_FALSE(names.count("write_file"));
  EXPECT_TRUE(names.count("ncu_analyze"));
  EXPECT_TRUE(names.count("ncu_diff"));
  EXPECT_EQ(names.count("wiki_search") == 1, loop::KnowledgeTools::wiki_built());

  EXPECT_EQ(r[3]["result"]["isError"], false) << r[3].dump();
  EXPECT_NE(r[3]["result"]["content"][0]["text"].get<std::string>().find("### Priorities"), std::string::npos);
  EXPECT_EQ(r[4]["result"]["isError"], true) << r[4].dump();
  EXPECT_NE(r[4]["result"]["content"][0]["text"].get<std::string>().find("outside the directories"), std::string::npos);
  if (loop::KnowledgeTools::wiki_built()) {
    EXPECT_EQ(r[5]["result"]["isError"], false) << r[5].dump();
    EXPECT_NE(r[5]["result"]["content"][0]["text"].get<std::string>().find("id: technique/okapi-staging"),
              std::string::npos)
        << r[5].dump();
    EXPECT_EQ(r[6]["result"]["isError"], false) << r[6].dump();
    EXPECT_NE(r[6]["result"]["content"][0]["text"].get<std::string>().find("global stores coalesce"),
              std::string::npos);
    EXPECT_EQ(r[7]["result"]["isError"], true) << r[7].dump();
  }
}

// `kda mcp --workspace` serves the same tools (skips when the kda binary is not built).
TEST_F(McpKnowledgeTest, KdaMcpWorkspaceModeServesTheKnowledgeTools) {
  const stdfs::path kda = stdfs::path(KDA_BINARY_DIR) / "kda";
  if (!stdfs::exists(kda)) GTEST_SKIP() << "kda binary not built: " << kda;
  std::ofstream req(dir_ / "requests.jsonl");
  req << json{{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"}, {"params", {{"protocolVersion", "2025-06-18"}}}}
             .dump()
      << "\n"
      << json{{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}}.dump() << "\n"
      << call(3, "ncu_analyze", {{"report", "profiles/saxpy.ncu-rep"}}).dump() << "\n"
      << call(4, "wiki_search", {{"query", "okapistage"}}).dump() << "\n";
  req.close();
  proc::RunOptions o;
  o.argv = {"/bin/sh",
            "-c",
            "exec \"$0\" mcp --role reviewer --workspace \"$1\" --wiki-db \"$2\" < \"$3\"",
            kda.string(),
            (dir_ / "ws").string(),
            (dir_ / "db" / "wiki.db").string(),
            (dir_ / "requests.jsonl").string()};
  o.timeout_seconds = 120;
  auto res = proc::run(o);
  ASSERT_TRUE(res.ok()) << res.status().message();
  EXPECT_TRUE(res->exit.success()) << res->stderr_text;
  std::map<int, json> r;
  size_t start = 0;
  for (size_t nl; (nl = res->stdout_text.find('\n', start)) != std::string::npos; start = nl + 1) {
    json j = json::parse(res->stdout_text.substr(start, nl - start));
    r[j["id"].get<int>()] = j;
  }
  ASSERT_EQ(r.size(), 4u) << res->stdout_text;
  bool has_ncu = false;
  for (const auto& t : r[2]["result"]["tools"]) has_ncu = has_ncu || t["name"] == "ncu_analyze";
  EXPECT_TRUE(has_ncu);
  EXPECT_EQ(r[3]["result"]["isError"], false) << r[3].dump();
  if (loop::KnowledgeTools::wiki_built()) {
    EXPECT_EQ(r[4]["result"]["isError"], false) << r[4].dump();
    EXPECT_NE(r[4]["result"]["content"][0]["text"].get<std::string>().find("technique/okapi-staging"),
              std::string::npos);
    EXPECT_TRUE(stdfs::exists(dir_ / "db" / "wiki.db"));  // --wiki-db was used
  }
}

}  // namespace
}  // namespace kda::mcp
