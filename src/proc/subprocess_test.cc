#include "proc/subprocess.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "proc/signals.h"
#include "proc/unique_fd.h"

namespace kda::proc {
namespace {

RunResult must_run(RunOptions o) {
  auto r = run(o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(r).value() : RunResult{};
}

RunResult sh(const std::string& script, double timeout = 0, size_t cap = 1 << 20) {
  RunOptions o;
  o.argv = {"sh", "-c", script};
  o.timeout_seconds = timeout;
  o.output_cap = cap;
  return must_run(o);
}

// True once `pid` no longer exists (or is a zombie waiting for init to reap it).
bool process_gone(pid_t pid, std::chrono::milliseconds within) {
  auto until = std::chrono::steady_clock::now() + within;
  do {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    if (!stat) return true;
    std::string line;
    std::getline(stat, line);
    auto close = line.rfind(')');
    if (close != std::string::npos && close + 2 < line.size() && (line[close + 2] == 'Z' || line[close + 2] == 'X'))
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

TEST(Signals, Names) {
  EXPECT_EQ(signal_name(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(signal_name(SIGKILL), "SIGKILL");
  EXPECT_EQ(signal_name(SIGABRT), "SIGABRT");
  EXPECT_EQ(signal_name(SIGRTMIN + 2), "SIGRTMIN+2");
  EXPECT_EQ(signal_name(1000), "signal 1000");
}

TEST(Run, ExitCodes) {
  auto ok = sh("exit 0");
  EXPECT_TRUE(ok.exit.success());
  EXPECT_EQ(ok.exit.describe(), "exit 0");
  auto three = sh("exit 3");
  EXPECT_FALSE(three.exit.success());
  EXPECT_EQ(three.exit.exit_code, 3);
  EXPECT_EQ(three.exit.signal, 0);
  EXPECT_EQ(three.exit.describe(), "exit 3");
}

TEST(Run, SignalIsNamed) {
  auto r = sh("kill -SEGV $$");
  EXPECT_EQ(r.exit.signal, SIGSEGV);
  EXPECT_FALSE(r.exit.timed_out);
  EXPECT_EQ(r.exit.describe(), "killed by SIGSEGV");
  auto a = sh("kill -ABRT $$");
  EXPECT_EQ(a.exit.describe(), "killed by SIGABRT");
}

TEST(Run, CapturesStdoutAndStderrSeparately) {
  auto r = sh("echo out; echo err >&2");
  EXPECT_EQ(r.stdout_text, "out\n");
  EXPECT_EQ(r.stderr_text, "err\n");
  EXPECT_GT(r.exit.peak_rss_kb, 0);
  EXPECT_GT(r.exit.wall_seconds, 0.0);
}

TEST(Run, StdinIsDevNull) {
  auto r = sh("cat; echo done");  // would hang if stdin were the terminal or a pipe
  EXPECT_EQ(r.stdout_text, "done\n");
}

TEST(Run, TimeoutKillsTheWholeGroupIncludingGrandchildren) {
  auto start = std::chrono::steady_clock::now();
  auto r = sh("sleep 100 & echo $!; wait", 0.5);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(r.exit.timed_out);
  EXPECT_EQ(r.exit.signal, SIGKILL);
  EXPECT_NE(r.exit.describe().find("timed out"), std::string::npos);
  EXPECT_LT(took, 10.0);
  pid_t grandchild = std::stoi(r.stdout_text);
  ASSERT_GT(grandchild, 1);
  EXPECT_TRUE(process_gone(grandchild, std::chrono::seconds(3))) << "sleep " << grandchild << " survived";
}

TEST(Run, BackgroundStraysDieWhenTheChildExits) {
  auto r = sh("sleep 100 & echo $!");
  EXPECT_TRUE(r.exit.success());
  pid_t stray = std::stoi(r.stdout_text);
  EXPECT_TRUE(process_gone(stray, std::chrono::seconds(3)));
}

TEST(Run, OutputCapKeepsTheHeadAndSaysHowMuchWasDropped) {
  auto r = sh("head -c 100000 /dev/zero | tr '\\000' a; echo tail >&2", 0, 1000);
  EXPECT_TRUE(r.exit.success());
  EXPECT_EQ(r.stdout_text.substr(0, 1000), std::string(1000, 'a'));
  EXPECT_NE(r.stdout_text.find("[truncated 99000 bytes]"), std::string::npos) << r.stdout_text.substr(1000);
  EXPECT_EQ(r.stderr_text, "tail\n");
}

TEST(Run, ExplicitEnvironmentReplacesTheParents) {
  ::setenv("KDA_PROC_TEST_SECRET", "leak", 1);
  RunOptions o;
  o.argv = {"env"};
  o.env = std::vector<std::string>{"FOO=bar", "PATH=/usr/bin:/bin"};
  auto r = must_run(o);
  EXPECT_EQ(r.stdout_text, "FOO=bar\nPATH=/usr/bin:/bin\n");

  RunOptions inherit;
  inherit.argv = {"sh", "-c", "echo $KDA_PROC_TEST_SECRET"};
  EXPECT_EQ(must_run(inherit).stdout_text, "leak\n");
  ::unsetenv("KDA_PROC_TEST_SECRET");
}

TEST(Run, WorkingDirectory) {
  RunOptions o;
  o.argv = {"pwd"};
  o.cwd = "/";
  EXPECT_EQ(must_run(o).stdout_text, "/\n");
  o.cwd = "/nonexistent-kda-dir";
  auto r = run(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent-kda-dir"), std::string::npos);
}

TEST(Run, MissingProgramIsNotFound) {
  RunOptions o;
  o.argv = {"kda-no-such-program-xyz"};
  auto r = run(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kNotFound);
  EXPECT_NE(r.status().message().find("kda-no-such-program-xyz"), std::string::npos);
}

TEST(Child, NoLeakedFdsOnlyMappedOnes) {
  int leaky = ::open("/dev/null", O_RDONLY);  // deliberately without O_CLOEXEC
  ASSERT_GE(leaky, 0);
  auto p = make_pipe();
  ASSERT_TRUE(p.ok());
  ChildOptions o;
  o.argv = {"sleep", "100"};
  o.fds = {{p->write.get(), 3}};
  auto c = Child::spawn(o);
  ::close(leaky);
  ASSERT_TRUE(c.ok()) << c.status().message();
  // spawn() returns after exec, so /proc/<pid>/fd shows the program's fds; but the dynamic loader of
  // the new program briefly opens ld.so.cache and its libraries, so look again for up to 2 s: a
  // leaked fd stays, a loader's goes.
  const std::vector<int> want{0, 1, 2, 3};
  std::vector<int> fds;
  for (int attempt = 0; attempt < 200; ++attempt) {
    fds.clear();
    for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(c->pid()) + "/fd"))
      fds.push_back(std::stoi(entry.path().filename().string()));
    std::sort(fds.begin(), fds.end());
    if (fds == want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(fds, want);
}

TEST(Child, ExtraPipesBecomeFd3And4) {
  auto to_child = make_pipe();
  auto from_child = make_pipe();
  ASSERT_TRUE(to_child.ok() && from_child.ok());
  ChildOptions o;
  o.argv = {"sh", "-c", "read line <&3; echo \"got $line\" >&4"};
  // Map in crossed order so a naive dup2 sequence would clobber one source.
  o.fds = {{to_child->read.get(), 3}, {from_child->write.get(), 4}};
  auto c = Child::spawn(o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  to_child->read.reset();
  from_child->write.reset();
  ASSERT_EQ(::write(to_child->write.get(), "ping\n", 5), 5);
  char buf[64] = {};
  ssize_t n = ::read(from_child->read.get(), buf, sizeof buf - 1);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), "got ping\n");
  auto e = c->wait(Deadline::after_seconds(20));
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->success());
}

TEST(Child, FdMappingsAreValidated) {
  ChildOptions o;
  o.argv = {"true"};
  o.fds = {{0, 1}};
  EXPECT_EQ(Child::spawn(o).status().kind(), ErrorKind::kBadInput);
  o.fds = {{0, 5}, {1, 5}};
  EXPECT_EQ(Child::spawn(o).status().kind(), ErrorKind::kBadInput);
}

TEST(Child, WaitTimesOutThenKillGroup) {
  ChildOptions o;
  o.argv = {"sleep", "100"};
  auto c = Child::spawn(o);
  ASSERT_TRUE(c.ok());
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(c->wait(Deadline::after(std::chrono::milliseconds(200))).has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(190));
  EXPECT_FALSE(c->exited());
  c->kill_group();
  auto e = c->wait(Deadline::after_seconds(10));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->signal, SIGKILL);
  EXPECT_TRUE(c->exited());
}

TEST(Child, WaitOrKillMarksTimeout) {
  ChildOptions o;
  o.argv = {"sleep", "100"};
  auto c = Child::spawn(o);
  ASSERT_TRUE(c.ok());
  auto e = c->wait_or_kill(Deadline::after(std::chrono::milliseconds(100)));
  EXPECT_TRUE(e.timed_out);
  EXPECT_FALSE(e.success());
}

TEST(Child, DestructorKillsAndReaps) {
  pid_t pid = -1;
  {
    ChildOptions o;
    o.argv = {"sleep", "100"};
    auto c = Child::spawn(o);
    ASSERT_TRUE(c.ok());
    pid = c->pid();
  }
  int status = 0;
  errno = 0;
  EXPECT_EQ(::waitpid(pid, &status, WNOHANG), -1);  // already reaped: no zombie left behind
  EXPECT_EQ(errno, ECHILD);
  EXPECT_TRUE(process_gone(pid, std::chrono::seconds(2)));
}

TEST(Child, PreExecHookRunsInTheChild) {
  ChildOptions o;
  o.argv = {"sh", "-c", "umask"};
  o.pre_exec = [] {
    ::umask(077);
    return 0;
  };
  auto c = Child::spawn(o);
  ASSERT_TRUE(c.ok());
  c->wait();
  EXPECT_EQ(c->take_stdout(), "0077\n");
}

TEST(Child, PreExecFailureFailsTheSpawn) {
  ChildOptions o;
  o.argv = {"true"};
  o.pre_exec = [] { return EPERM; };
  auto c = Child::spawn(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().kind(), ErrorKind::kIo);
  EXPECT_NE(c.status().message().find("pre_exec"), std::string::npos) << c.status().message();
}

TEST(Child, IgnoredSigpipeIsNotInherited) {
  auto old = ::signal(SIGPIPE, SIG_IGN);
  // yes writes until the reader goes away; with SIGPIPE at default it dies by the signal.
  auto r = sh("yes | head -c 10 > /dev/null; kill -PIPE $$");
  ::signal(SIGPIPE, old);
  EXPECT_EQ(r.exit.signal, SIGPIPE);
}

TEST(Child, PipeModeGivesTheCallerTheFd) {
  ChildOptions o;
  o.argv = {"sh", "-c", "echo piped"};
  o.stdout_mode = Stdio::kPipe;
  o.stderr_mode = Stdio::kNull;
  auto c = Child::spawn(o);
  ASSERT_TRUE(c.ok());
  ASSERT_GE(c->stdout_fd(), 0);
  EXPECT_EQ(c->stderr_fd(), -1);
  char buf[32] = {};
  ssize_t n = ::read(c->stdout_fd(), buf, sizeof buf);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), "piped\n");
  EXPECT_TRUE(c->wait()->success());
}

}  // namespace
}  // namespace kda::proc
