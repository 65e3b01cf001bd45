// kda-fake-llm: the scripted fake LLM server as a process (docs/fake-llm.md). Runs until SIGTERM
// or SIGINT; prints the port on stdout and writes it to --port-file once it listens.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "fakellm/server.h"
#include "util/fs.h"

namespace {

constexpr const char* kUsage =
    "usage: kda-fake-llm --scenarios FILE [--port-file FILE] [--log FILE] [--log-bodies]\n"
    "                    [--workdir DIR] [--port N]\n"
    "A scripted fake LLM server on 127.0.0.1 (Anthropic Messages, OpenAI chat completions and\n"
    "Responses). Scenario format: docs/fake-llm.md. Runs until SIGTERM or SIGINT.\n";

int fail(const std::string& message, int code) {
  std::cerr << "kda-fake-llm: " << message << "\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenarios_path, port_file;
  kda::fakellm::Options options;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--scenarios") {
      if (!value(scenarios_path)) return fail("--scenarios needs a file", 2);
    } else if (a == "--port-file") {
      if (!value(port_file)) return fail("--port-file needs a file", 2);
    } else if (a == "--log") {
      if (!value(v)) return fail("--log needs a file", 2);
      options.log_path = v;
    } else if (a == "--log-bodies") {
      options.log_bodies = true;
    } else if (a == "--workdir") {
      if (!value(v)) return fail("--workdir needs a directory", 2);
      options.workdir = v;
    } else if (a == "--port") {
      if (!value(v)) return fail("--port needs a number", 2);
      char* end = nullptr;
      long p = std::strtol(v.c_str(), &end, 10);
      if (*end != '\0' || p < 0 || p > 65535) return fail("--port: not a port number: " + v, 2);
      options.port = static_cast<int>(p);
    } else {
      std::cerr << kUsage;
      return fail("unknown argument " + a, 2);
    }
  }
  if (scenarios_path.empty()) {
    std::cerr << kUsage;
    return fail("--scenarios is required", 2);
  }
  auto doc = kda::fakellm::load_scenarios(scenarios_path);
  if (!doc.ok()) return fail(doc.status().message(), 2);
  options.scenarios = std::move(doc).value();

  // Block the stop signals before any thread starts, then wait for one of them here.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto server = kda::fakellm::Server::start(options);
  if (!server.ok()) {
    return fail(scenarios_path + ": " + server.status().message(),
                server.status().kind() == kda::ErrorKind::kBadInput ? 2 : 3);
  }
  int port = (*server)->port();
  if (!port_file.empty()) {
    kda::Status s = kda::fs::write_file_atomic(port_file, std::to_string(port) + "\n");
    if (!s.ok()) return fail("writing the port file: " + s.message(), 3);
  }
  std::cout << port << std::endl;
  int sig = 0;
  sigwait(&set, &sig);
  (*server)->stop();
  return 0;
}
