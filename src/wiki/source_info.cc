#include "wiki/source_info.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "util/fs.h"

namespace kda::wiki {

namespace {

// Runs argv, returns stdout (capped at 4 KiB) when it exits 0 within 10 s, else "".
std::string run_capture(std::vector<std::string> argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "";
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return "";
  }
  if (pid == 0) {
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    dup2(fds[1], 1);
    dup2(devnull, 2);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  char buf[512];
  bool timed_out = false;
  while (true) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    if (out.size() < 4096) out.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(-pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return "";
  return out;
}

}  // namespace

std::string git_head(const std::filesystem::path& dir) {
  std::string out = run_capture({"git", "-C", dir.string(), "rev-parse", "HEAD"});
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  bool hex = out.size() >= 40 &&
             std::all_of(out.begin(), out.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
  return hex ? out : "";
}

std::string license_of(const std::filesystem::path& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> candidates;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (e.is_regular_file(ec) &&
        (name.starts_with("LICENSE") || name.starts_with("LICENCE") || name.starts_with("COPYING")))
      candidates.push_back(e.path());
  }
  std::sort(candidates.begin(), candidates.end());
  for (const auto& c : candidates) {
    auto text = fs::read_file(c);
    if (!text.ok()) continue;
    size_t pos = 0;
    while (pos < text->size()) {
      size_t nl = text->find('\n', pos);
      if (nl == std::string::npos) nl = text->size();
      std::string line = text->substr(pos, nl - pos);
      pos = nl + 1;
      size_t b = line.find_first_not_of(" \t\r*#/");
      if (b == std::string::npos) continue;
      size_t e = line.find_last_not_of(" \t\r");
      line = line.substr(b, e - b + 1);
      if (line.size() > 100) line.resize(100);
      return line;
    }
  }
  return "";
}

}  // namespace kda::wiki
