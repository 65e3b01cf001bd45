#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <fstream>

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
    if (!std::ofstream(allowed / "ok.txt")) return 11;                // allowed write
    if (std::ofstream(secret / "no.txt")) return 12;                  // denied write
    if (std::ifstream(secret / "s.txt")) return 13;                   // denied read
    if (std::ofstream(std::filesystem::temp_directory_path() / "kda-ll-escape")) return 14;
    return 0;
  });
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_TRUE(std::filesystem::exists(allowed / "ok.txt"));
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
