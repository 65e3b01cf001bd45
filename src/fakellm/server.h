// A scripted fake LLM server for offline tests: HTTP/1.1 on 127.0.0.1, speaking the Anthropic
// Messages API (/v1/messages), OpenAI chat completions (/v1/chat/completions) and the OpenAI
// Responses API (/v1/responses), streaming (SSE) and not. What it answers comes from scenarios
// (docs/fake-llm.md): the scenario is picked by a substring of the user text, the step by the
// number of assistant turns already in the conversation the client sent — never by a server-side
// counter, so a retried or duplicated request gets the same answer. Faults (HTTP errors with
// Retry-After, cut streams, malformed JSON, delays) are injected per step or globally.
//
// Used in-process by tests (Server::start) and as the `kda-fake-llm` binary by the CLI-agent tests.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace kda::fakellm {

struct Options {
  // The scenarios document: a list of scenarios, or {"scenarios": [...], "faults": [...], ...}
  // (format in docs/fake-llm.md). Validated by start(); errors name the field.
  nlohmann::json scenarios = nlohmann::json::array();
  // Fallback working directory for "write"/"edit"/"read" aliases and ${workdir}, used when the
  // request names none ("Primary working directory:" or <cwd>) and the scenario sets none.
  std::optional<std::filesystem::path> workdir;
  // Request log, one JSON object per line (appended, flushed per request). Empty: memory only.
  std::optional<std::filesystem::path> log_path;
  bool log_bodies = false;  // also log each raw request body (as parsed JSON) under "body"
  int port = 0;             // 0: the kernel picks a free port
};

class Server {
 public:
  // Binds 127.0.0.1:options.port, starts the accept thread and returns. Bad scenarios -> kBadInput.
  static Result<std::unique_ptr<Server>> start(Options options);
  ~Server();  // stops
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;
  std::string base_url() const;  // "http://127.0.0.1:<port>" (Anthropic style; add /v1 for OpenAI)

  // Closes the listener and every connection, joins all threads. Idempotent.
  void stop();

  // Every request served so far, in arrival order (same objects as the JSONL log; see the docs).
  std::vector<nlohmann::json> log() const;

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reads and parses a scenarios file (JSON). Errors name the file.
Result<nlohmann::json> load_scenarios(const std::filesystem::path& path);

}  // namespace kda::fakellm
