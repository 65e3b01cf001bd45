#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <fstream>
#include <string>
#include <vector>

#include "proc/subprocess.h"
#include "sandbox/landlock.h"
#include "sandbox/seccomp.h"
#include "util/fs.h"

namespace kda::sandbox {
namespace {

// Runs `body` in a forked child and returns its wait status.
template <typename F>
int in_child(F body) {
  pid_t pid = ::fork();
  if (pid == 0) _exit(body());
  int st = 0;
  ::waitpid(pid, &st, 0);
  return st;
}

TEST(Landlock, ConfinesWritesAndReads) {
  if (landlock_abi() == 0) GTEST_SKIP() << "Landlock not available";
  auto dir = fs::make_temp_dir(std::filesystem::temp_directory_path(), "kda-ll");
  ASSERT_TRUE(dir.ok());
  auto allowed = *dir / "allowed";
  auto secret = *dir / "secret";
  std::filesystem::create_directories(allowed);
  std::filesystem::create_directories(secret);
  { std::ofstream(secret / "s.txt") << "x"; }
  int st = in_child([&] {
    LandlockPolicy p;
    p.read_write = {allowed};
    p.read_only = {"/usr", "/lib", "/lib64", "/etc"};
    if (!apply_landlock(p).ok()) return 10;
    if (!std::ofstream(allowed / "ok.txt")) return 11;  // allowed write
    if (std::ofstream(secret / "no.txt")) return 12;    // denied write
    if (std::ifstream(secret / "s.txt")) return 13;     // denied read
    if (std::ofstream(std::filesystem::temp_directory_path() / "kda-ll-escape")) return 14;
    return 0;
  });
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_TRUE(std::filesystem::exists(allowed / "ok.txt"));
  std::filesystem::remove_all(*dir);
}

// A listening loopback TCP socket on an ephemeral port; connects complete through the backlog.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 8) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    port = ntohs(a.sin_port);
  }
  ~Listener() {
    if (fd >= 0) ::close(fd);
  }
};

std::vector<std::filesystem::path> system_ro() { return {"/usr", "/bin", "/lib", "/lib64", "/etc", "/dev"}; }

// Runs argv under the prepared ruleset; returns the exit code (or -1 if it did not start/exit).
int run_confined(const PreparedLandlock& ll, std::vector<std::string> argv) {
  proc::RunOptions o;
  o.argv = std::move(argv);
  o.timeout_seconds = 20;
  o.pre_exec = [&ll] { return ll.restrict_self(); };
  auto r = proc::run(o);
  if (!r.ok() || r->exit.signal != 0 || r->exit.timed_out) return -1;
  return r->exit.exit_code;
}

TEST(PreparedLandlock, ConfinesExecedChildWrites) {
  if (landlock_abi() == 0) GTEST_SKIP() << "Landlock not available";
  auto dir = fs::make_temp_dir(std::filesystem::temp_directory_path(), "kda-pll");
  ASSERT_TRUE(dir.ok());
  auto inside = *dir / "inside";
  auto outside = *dir / "outside";
  std::filesystem::create_directories(inside);
  std::filesystem::create_directories(outside);
  LandlockPolicy p;
  p.read_only = system_ro();
  p.read_write = {inside};
  auto ll = prepare_landlock(p);
  ASSERT_TRUE(ll.ok()) << ll.status().message();
  EXPECT_TRUE(ll->report().filesystem);
  // The parent itself stays unrestricted.
  { EXPECT_TRUE(std::ofstream(outside / "parent.txt") << "p"); }
  EXPECT_NE(run_confined(*ll, {"/bin/sh", "-c", "echo x > \"$0\"", (outside / "x.txt").string()}), 0);
  EXPECT_FALSE(std::filesystem::exists(outside / "x.txt"));
  EXPECT_EQ(run_confined(*ll, {"/bin/sh", "-c", "echo x > \"$0\"", (inside / "x.txt").string()}), 0);
  EXPECT_TRUE(std::filesystem::exists(inside / "x.txt"));
  // The same prepared ruleset restricts a second child too, and reads outside are denied.
  EXPECT_NE(run_confined(*ll, {"/bin/cat", (outside / "parent.txt").string()}), 0);
  std::filesystem::remove_all(*dir);
}

TEST(PreparedLandlock, TcpConnectOnlyToAllowedPorts) {
  if (landlock_abi() < 4) GTEST_SKIP() << "Landlock network rules need ABI >= 4";
  Listener allowed, denied;
  ASSERT_GT(allowed.port, 0);
  ASSERT_GT(denied.port, 0);
  LandlockPolicy p;
  p.read_only = system_ro();
  p.allowed_tcp_connect_ports = {allowed.port};
  auto ll = prepare_landlock(p);
  ASSERT_TRUE(ll.ok()) << ll.status().message();
  EXPECT_TRUE(ll->report().network);
  auto connect = [&](int port) {
    return run_confined(*ll, {"/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/$0", std::to_string(port)});
  };
  EXPECT_EQ(connect(allowed.port), 0);
  EXPECT_NE(connect(denied.port), 0);
}

TEST(PreparedLandlock, EmptyFailsClosedAndApplyStillWorks) {
  PreparedLandlock empty;
  EXPECT_FALSE(empty.valid());
  EXPECT_EQ(empty.restrict_self(), EBADF);
  if (landlock_abi() == 0) GTEST_SKIP() << "Landlock not available";
  auto dir = fs::make_temp_dir(std::filesystem::temp_directory_path(), "kda-pll");
  ASSERT_TRUE(dir.ok());
  int st = in_child([&] {
    LandlockPolicy p;
    p.read_write = {*dir};
    auto r = apply_landlock(p);
    if (!r.ok() || !r->filesystem) return 10;
    if (std::ofstream(std::filesystem::temp_directory_path() / "kda-pll-escape")) return 11;
    return 0;
  });
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  std::filesystem::remove_all(*dir);
}

TEST(Seccomp, KillsForkAndDeniesSockets) {
  if (!seccomp_available()) GTEST_SKIP() << "built without libseccomp";
  int st = in_child([] {
    if (!apply_seccomp({}).ok()) return 10;
    if (::socket(AF_INET, SOCK_STREAM, 0) >= 0 || errno != EACCES) return 11;
    ::fork();  // must kill the process
    return 12;
  });
  ASSERT_TRUE(WIFSIGNALED(st)) << "exit " << WEXITSTATUS(st);
  EXPECT_EQ(WTERMSIG(st), SIGSYS);
}

}  // namespace
}  // namespace kda::sandbox
