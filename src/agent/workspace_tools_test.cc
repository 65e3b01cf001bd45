#include "agent/workspace_tools.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/landlock.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kda::agent {
namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

std::string slurp(const stdfs::path& p) {
  auto r = fs::read_file(p);
  return r.ok() ? *r : std::string("<missing>");
}

void put(const stdfs::path& p, const std::string& text) {
  stdfs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// Layout: <tmp>/ws (workspace: solution/ writable, solution/protected.txt protected, notes.md
// read-only), <tmp>/pack (readable), <tmp>/outside (neither).
class WorkspaceToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-wstools");
    ASSERT_TRUE(d.ok());
    tmp_ = *d;
    ws_ = tmp_ / "ws";
    put(ws_ / "solution" / "kernel.cu", "__global__ void k() {\n  int x = 1;\n  int y = 1;\n}\n");
    put(ws_ / "solution" / "protected.txt", "do not touch\n");
    put(ws_ / "notes.md", "line1\nline2\nline3\nneedle here\nline5\n");
    put(ws_ / "sub" / "deep.h", "#define NEEDLE 1\n");
    put(tmp_ / "pack" / "definition.json", "{\"name\": \"gemm\"}\n");
    put(tmp_ / "outside" / "secret.txt", "secret\n");
    make(false);
  }
  void TearDown() override {
    tools_.reset();
    std::error_code ec;
    if (!tmp_.empty()) stdfs::remove_all(tmp_, ec);
  }
  void make(bool read_only) {
    WorkspaceToolsOptions o;
    o.workspace = ws_;
    o.writable = {"solution"};
    o.readable = {tmp_ / "pack"};
    o.protected_paths = {ws_ / "solution" / "protected.txt"};
    o.read_only = read_only;
    o.command_timeout = std::chrono::seconds(20);
    o.on_event = [this](const AgentEvent& e) { events_.push_back(e); };
    tools_ = std::make_unique<WorkspaceTools>(std::move(o));
  }
  ToolOutcome call(const std::string& name, const json& args) { return tools_->call(name, args); }
  int count_events(const std::string& kind, bool ok) {
    int n = 0;
    for (const auto& e : events_) n += e.kind == kind && e.ok == ok;
    return n;
  }

  stdfs::path tmp_, ws_;
  std::unique_ptr<WorkspaceTools> tools_;
  std::vector<AgentEvent> events_;
};

TEST_F(WorkspaceToolsTest, ToolListDependsOnReadOnly) {
  auto names = [&] {
    std::vector<std::string> v;
    for (const auto& t : tools_->tools()) v.push_back(t.name);
    return v;
  };
  EXPECT_EQ(names(),
            (std::vector<std::string>{"list_files", "read_file", "grep", "write_file", "edit_file", "run_command"}));
  for (const auto& t : tools_->tools()) EXPECT_EQ(t.input_schema["type"], "object") << t.name;
  make(true);
  EXPECT_EQ(names(), (std::vector<std::string>{"list_files", "read_file", "grep"}));
  for (const auto& t : tools_->tools()) EXPECT_TRUE(t.read_only);
}

TEST_F(WorkspaceToolsTest, ListFiles) {
  auto r = call("list_files", json::object());
  ASSERT_FALSE(r.is_error) << r.text;
  EXPECT_NE(r.text.find("solution/kernel.cu\n"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("sub/\n"), std::string::npos) << r.text;
  auto g = call("list_files", {{"glob", "*.cu"}});
  EXPECT_EQ(g.text, "solution/kernel.cu\n");
  auto p = call("list_files", {{"path", (tmp_ / "pack").string()}});
  EXPECT_EQ(p.text, "definition.json\n");
  EXPECT_TRUE(call("list_files", {{"path", 3}}).is_error);
}

TEST_F(WorkspaceToolsTest, ReadFileWithOffsetAndLimit) {
  auto all = call("read_file", {{"path", "notes.md"}});
  ASSERT_FALSE(all.is_error) << all.text;
  EXPECT_EQ(all.text, "line1\nline2\nline3\nneedle here\nline5\n");
  auto part = call("read_file", {{"path", "notes.md"}, {"offset", 2}, {"limit", 2}});
  EXPECT_EQ(part.text.substr(0, 12), "line2\nline3\n");
  EXPECT_NE(part.text.find("pass offset=4"), std::string::npos) << part.text;
  EXPECT_TRUE(call("read_file", {{"path", "notes.md"}, {"offset", 99}}).is_error);
  EXPECT_TRUE(call("read_file", {{"path", "missing.txt"}}).is_error);
  EXPECT_TRUE(call("read_file", json::object()).is_error);
  auto pack = call("read_file", {{"path", (tmp_ / "pack" / "definition.json").string()}});
  EXPECT_FALSE(pack.is_error) << pack.text;
}

TEST_F(WorkspaceToolsTest, GrepRegexAndSubstring) {
  auto r = call("grep", {{"pattern", "need[a-z]+"}});
  ASSERT_FALSE(r.is_error) << r.text;
  EXPECT_EQ(r.text, "notes.md:4: needle here\n");
  auto ci = call("grep", {{"pattern", "needle"}, {"ignore_case", true}});
  EXPECT_NE(ci.text.find("sub/deep.h:1: #define NEEDLE 1"), std::string::npos) << ci.text;
  auto plain = call("grep", {{"pattern", "[a-z"}, {"regex", false}});
  EXPECT_FALSE(plain.is_error);
  EXPECT_EQ(plain.text, "(no matches)\n");
  EXPECT_TRUE(call("grep", {{"pattern", "[a-z"}}).is_error);  // invalid regex
  auto scoped = call("grep", {{"pattern", "int"}, {"path", "solution"}, {"glob", "*.cu"}});
  EXPECT_EQ(scoped.data["matches"], 2) << scoped.text;
}

TEST_F(WorkspaceToolsTest, WriteFileEmitsEvent) {
  auto r = call("write_file", {{"path", "solution/new.cu"}, {"content", "abc"}});
  ASSERT_FALSE(r.is_error) << r.text;
  EXPECT_EQ(slurp(ws_ / "solution" / "new.cu"), "abc");
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, "file_write");
  EXPECT_TRUE(events_[0].ok);
  EXPECT_EQ(events_[0].detail["path"], "solution/new.cu");
  EXPECT_EQ(events_[0].detail["sha256"], sha256_hex("abc"));
  EXPECT_EQ(events_[0].detail["bytes"], 3);
}

TEST_F(WorkspaceToolsTest, WritesCreateParentsAndKeepPermissions) {
  ASSERT_FALSE(call("write_file", {{"path", "solution/a/b/c.sh"}, {"content", "#!/bin/sh\necho 1\n"}}).is_error);
  stdfs::permissions(ws_ / "solution" / "a" / "b" / "c.sh", stdfs::perms::owner_exec, stdfs::perm_options::add);
  ASSERT_FALSE(call("edit_file", {{"path", "solution/a/b/c.sh"}, {"old_string", "1"}, {"new_string", "2"}}).is_error);
  auto perms = stdfs::status(ws_ / "solution" / "a" / "b" / "c.sh").permissions();
  EXPECT_NE(perms & stdfs::perms::owner_exec, stdfs::perms::none);
  EXPECT_EQ(slurp(ws_ / "solution" / "a" / "b" / "c.sh"), "#!/bin/sh\necho 2\n");
  for (const auto& e : stdfs::directory_iterator(ws_ / "solution" / "a" / "b"))  // no temp files left behind
    EXPECT_EQ(e.path().filename(), "c.sh");
}

TEST_F(WorkspaceToolsTest, EditFileNeedsAUniqueMatch) {
  auto missing = call("edit_file", {{"path", "solution/kernel.cu"}, {"old_string", "int z"}, {"new_string", "x"}});
  EXPECT_TRUE(missing.is_error);
  auto twice = call("edit_file", {{"path", "solution/kernel.cu"}, {"old_string", "= 1;"}, {"new_string", "= 2;"}});
  EXPECT_TRUE(twice.is_error);
  EXPECT_NE(twice.text.find("occurs 2 times"), std::string::npos) << twice.text;
  EXPECT_TRUE(events_.empty());
  auto once =
      call("edit_file", {{"path", "solution/kernel.cu"}, {"old_string", "int x = 1;"}, {"new_string", "int x = 3;"}});
  ASSERT_FALSE(once.is_error) << once.text;
  EXPECT_NE(slurp(ws_ / "solution" / "kernel.cu").find("int x = 3;\n  int y = 1;"), std::string::npos);
  auto all =
      call("edit_file",
           {{"path", "solution/kernel.cu"}, {"old_string", "int"}, {"new_string", "long"}, {"replace_all", true}});
  ASSERT_FALSE(all.is_error) << all.text;
  EXPECT_EQ(all.data["replacements"], 2);
  EXPECT_EQ(slurp(ws_ / "solution" / "kernel.cu"), "__global__ void k() {\n  long x = 3;\n  long y = 1;\n}\n");
  EXPECT_EQ(count_events("file_write", true), 2);
  EXPECT_EQ(events_.back().detail["sha256"], sha256_hex(slurp(ws_ / "solution" / "kernel.cu")));
}

TEST_F(WorkspaceToolsTest, DotDotEscapesAreDenied) {
  auto r = call("read_file", {{"path", "../outside/secret.txt"}});
  EXPECT_TRUE(r.is_error);
  EXPECT_NE(r.text.find("outside the workspace"), std::string::npos) << r.text;
  auto w = call("write_file", {{"path", "solution/../../outside/x.txt"}, {"content", "x"}});
  EXPECT_TRUE(w.is_error);
  EXPECT_FALSE(stdfs::exists(tmp_ / "outside" / "x.txt"));
  EXPECT_TRUE(call("list_files", {{"path", ".."}}).is_error);
  EXPECT_TRUE(call("grep", {{"pattern", "secret"}, {"path", "../outside"}}).is_error);
  EXPECT_EQ(count_events("denied", false), 4);
}

TEST_F(WorkspaceToolsTest, AbsolutePathsOutsideAreDenied) {
  EXPECT_TRUE(call("read_file", {{"path", (tmp_ / "outside" / "secret.txt").string()}}).is_error);
  EXPECT_TRUE(call("read_file", {{"path", "/etc/passwd"}}).is_error);
  auto w = call("write_file", {{"path", (tmp_ / "outside" / "y.txt").string()}, {"content", "y"}});
  EXPECT_TRUE(w.is_error);
  EXPECT_FALSE(stdfs::exists(tmp_ / "outside" / "y.txt"));
  // Inside the workspace but not writable (the task's notes), and the readable pack.
  EXPECT_TRUE(call("write_file", {{"path", "notes.md"}, {"content", "x"}}).is_error);
  EXPECT_TRUE(
      call("edit_file",
           {{"path", (tmp_ / "pack" / "definition.json").string()}, {"old_string", "gemm"}, {"new_string", "x"}})
          .is_error);
  EXPECT_EQ(slurp(ws_ / "notes.md").substr(0, 5), "line1");
  EXPECT_EQ(count_events("denied", false), 5);
  EXPECT_EQ(count_events("file_write", true), 0);
}

TEST_F(WorkspaceToolsTest, SymlinksOutOfTheWorkspaceAreDenied) {
  stdfs::create_directory_symlink(tmp_ / "outside", ws_ / "solution" / "link");
  stdfs::create_symlink(tmp_ / "outside" / "secret.txt", ws_ / "solution" / "secret_link.txt");
  EXPECT_TRUE(call("read_file", {{"path", "solution/link/secret.txt"}}).is_error);
  EXPECT_TRUE(call("read_file", {{"path", "solution/secret_link.txt"}}).is_error);
  EXPECT_TRUE(call("write_file", {{"path", "solution/link/z.txt"}, {"content", "z"}}).is_error);
  EXPECT_TRUE(call("write_file", {{"path", "solution/secret_link.txt"}, {"content", "z"}}).is_error);
  EXPECT_EQ(slurp(tmp_ / "outside" / "secret.txt"), "secret\n");
  EXPECT_FALSE(stdfs::exists(tmp_ / "outside" / "z.txt"));
  // grep does not follow symlinks out either.
  auto g = call("grep", {{"pattern", "secret"}, {"path", "solution"}});
  EXPECT_EQ(g.text, "(no matches)\n") << g.text;
}

TEST_F(WorkspaceToolsTest, ProtectedFileIsNeverWritable) {
  auto w = call("write_file", {{"path", "solution/protected.txt"}, {"content", "changed"}});
  EXPECT_TRUE(w.is_error);
  EXPECT_NE(w.text.find("protected"), std::string::npos) << w.text;
  auto e = call("edit_file", {{"path", "solution/./protected.txt"}, {"old_string", "do"}, {"new_string", "x"}});
  EXPECT_TRUE(e.is_error);
  EXPECT_EQ(slurp(ws_ / "solution" / "protected.txt"), "do not touch\n");
  EXPECT_FALSE(call("read_file", {{"path", "solution/protected.txt"}}).is_error);  // reading is fine
  ASSERT_EQ(count_events("denied", false), 2);
  EXPECT_EQ(events_[0].detail["tool"], "write_file");
}

TEST_F(WorkspaceToolsTest, GitMetadataIsNeverWritable) {
  stdfs::create_directories(ws_ / "solution" / ".git" / "hooks");
  auto w = call("write_file", {{"path", "solution/.git/hooks/post-commit"}, {"content", "#!/bin/sh\nid\n"}});
  EXPECT_TRUE(w.is_error);
  EXPECT_NE(w.text.find(".git"), std::string::npos) << w.text;
  EXPECT_TRUE(call("write_file", {{"path", "solution/.git/config"}, {"content", "[core]"}}).is_error);
  EXPECT_FALSE(stdfs::exists(ws_ / "solution" / ".git" / "hooks" / "post-commit"));
  EXPECT_FALSE(call("write_file", {{"path", "solution/x.git"}, {"content", "ok"}}).is_error);
  EXPECT_EQ(count_events("denied", false), 2);
}

TEST_F(WorkspaceToolsTest, ReviewerIsReadOnly) {
  make(true);
  auto w = call("write_file", {{"path", "solution/kernel.cu"}, {"content", "x"}});
  EXPECT_TRUE(w.is_error);
  EXPECT_TRUE(call("run_command", {{"command", "true"}}).is_error);
  EXPECT_EQ(count_events("denied", false), 2);
  EXPECT_FALSE(call("read_file", {{"path", "solution/kernel.cu"}}).is_error);
  EXPECT_NE(slurp(ws_ / "solution" / "kernel.cu"), "x");
  EXPECT_TRUE(call("no_such_tool", json::object()).is_error);
}

class WorkspaceCommandTest : public WorkspaceToolsTest {
 protected:
  void SetUp() override {
    if (sandbox::landlock_abi() == 0) GTEST_SKIP() << "Landlock not available";
    WorkspaceToolsTest::SetUp();
  }
};

TEST_F(WorkspaceCommandTest, RunsInTheWorkspaceAndReports) {
  auto r = call("run_command", {{"command", "pwd; cat notes.md | wc -l; echo err >&2; exit 3"}});
  EXPECT_TRUE(r.is_error);
  EXPECT_NE(r.text.find("exit 3"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find(ws_.filename().string() + "\n5\n"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("[stderr]\nerr"), std::string::npos) << r.text;
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, "command");
  EXPECT_FALSE(events_[0].ok);
  EXPECT_EQ(events_[0].detail["exit"], 3);
  EXPECT_EQ(events_[0].detail["command"], "pwd; cat notes.md | wc -l; echo err >&2; exit 3");
  EXPECT_TRUE(events_[0].detail["wall_s"].is_number());
  auto ok = call("run_command", {{"command", "echo hi > solution/out.txt && echo tmp > $TMPDIR/t && cat $TMPDIR/t"}});
  EXPECT_FALSE(ok.is_error) << ok.text;
  EXPECT_EQ(slurp(ws_ / "solution" / "out.txt"), "hi\n");
  EXPECT_TRUE(events_.back().ok);
}

TEST_F(WorkspaceCommandTest, TimeoutKillsTheCommand) {
  auto r = call("run_command", {{"command", "sleep 30"}, {"timeout_s", 1}});
  EXPECT_TRUE(r.is_error);
  EXPECT_TRUE(r.data["timed_out"].get<bool>()) << r.text;
  EXPECT_LT(r.data["wall_s"].get<double>(), 10.0);
}

TEST_F(WorkspaceCommandTest, CommandCannotWriteOutsideTheWritablePaths) {
  const auto outside = tmp_ / "outside" / "escape.txt";
  auto r = call("run_command", {{"command", "echo x > '" + outside.string() + "'"}});
  EXPECT_TRUE(r.is_error) << r.text;
  EXPECT_FALSE(stdfs::exists(outside));
  EXPECT_TRUE(call("run_command", {{"command", "echo x > notes.md"}}).is_error);
  EXPECT_EQ(slurp(ws_ / "notes.md").substr(0, 5), "line1");
  EXPECT_TRUE(call("run_command", {{"command", "python3 -c 'open(\"../outside/p.txt\",\"w\")' || exit 1"}}).is_error);
  EXPECT_FALSE(stdfs::exists(tmp_ / "outside" / "p.txt"));
  EXPECT_TRUE(call("run_command", {{"command", "cat ../outside/secret.txt"}}).is_error);  // reads too
  EXPECT_EQ(count_events("command", false), 4);
}

TEST_F(WorkspaceCommandTest, CommandChangingAProtectedFileIsFlagged) {
  auto r = call("run_command", {{"command", "echo changed > solution/protected.txt"}});
  EXPECT_TRUE(r.is_error);
  EXPECT_NE(r.text.find("protected"), std::string::npos) << r.text;
  EXPECT_EQ(count_events("denied", false), 1);
  EXPECT_EQ(events_.back().detail["path"], "solution/protected.txt");
}

TEST_F(WorkspaceCommandTest, CommandHasNoNetwork) {
  if (sandbox::landlock_abi() < 4) GTEST_SKIP() << "Landlock network rules need ABI >= 4";
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  auto r = call("run_command", {{"command", "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port)}});
  EXPECT_TRUE(r.is_error) << r.text;
  EXPECT_TRUE(r.data["network_confined"].get<bool>());
  ::close(fd);
}

}  // namespace
}  // namespace kda::agent
