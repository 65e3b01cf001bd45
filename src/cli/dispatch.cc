#include <algorithm>
#include <ostream>
#include <sstream>
#include <streambuf>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "util/fs.h"

namespace kda::cli {

namespace {

constexpr const char* kVersion = "0.1.0";

size_t word_count(const std::string& name) {
  return static_cast<size_t>(std::count(name.begin(), name.end(), ' ')) + 1;
}

// The command whose name matches the longest prefix of argv's leading words.
const CommandSpec* match(std::span<const std::string> argv, size_t* consumed) {
  const CommandSpec* best = nullptr;
  size_t best_words = 0;
  for (const auto& c : all_commands()) {
    size_t n = word_count(c.name);
    if (n > argv.size() || n <= best_words) continue;
    std::string joined;
    for (size_t i = 0; i < n; ++i) joined += (i ? " " : "") + argv[i];
    if (joined == c.name) {
      best = &c;
      best_words = n;
    }
  }
  *consumed = best_words;
  return best;
}

void print_overview(std::ostream& out, const std::string& prefix) {
  out << "usage: kda <command> [options] [args]\n\n"
         "kda turns coding agents into CUDA kernel design agents: a closed loop of writing,\n"
         "official evaluation, review and measurement.\n\ncommands:\n";
  for (const auto& c : all_commands()) {
    if (!prefix.empty() && !c.name.starts_with(prefix + " ")) continue;
    out << fmt::format("  {:<22}{}\n", c.name, c.summary);
  }
  out << "\n'kda <command> --help' describes one command. Exit codes: 0 ok, 1 the evaluated thing failed,\n"
         "2 bad usage or input, 3 internal error.\n";
}

// Passes everything through to `sink` and remembers how much went by (stdout) and, capped, what
// (stderr), so that a --json command that fails without a result can still answer in JSON.
class WatchBuf : public std::streambuf {
 public:
  WatchBuf(std::streambuf* sink, size_t keep) : sink_(sink), keep_(keep) {}
  size_t written() const { return written_; }
  const std::string& kept() const { return kept_; }

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    const char ch = static_cast<char>(c);
    return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    written_ += static_cast<size_t>(n);
    if (kept_.size() < keep_) kept_.append(s, static_cast<size_t>(std::min<std::streamsize>(n, keep_ - kept_.size())));
    return sink_->sputn(s, n);
  }
  int sync() override { return sink_->pubsync(); }

 private:
  std::streambuf* sink_;
  size_t keep_;
  size_t written_ = 0;
  std::string kept_;
};

// The JSON a failed --json command prints when it wrote no result: its exit code and what it said on
// stderr (the last line as "error", every line in "messages").
nlohmann::json error_json(int rc, const std::string& err_text) {
  nlohmann::json messages = nlohmann::json::array();
  std::istringstream in(err_text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) messages.push_back(line);
  const char* kind = rc == kExitBadInput ? "bad_input" : rc == kExitInternal ? "internal" : "failed";
  return {
      {"ok", false},
      {"exit_code", rc},
      {"kind", kind},
      {"error", messages.empty() ? std::string("exit code ") + std::to_string(rc) : messages.back().get<std::string>()},
      {"messages", messages}};
}

bool has_json_option(const CommandSpec& cmd) {
  return std::any_of(cmd.options.begin(), cmd.options.end(), [](const OptionSpec& o) { return o.name == "json"; });
}

bool is_group(const std::string& word) {
  return std::any_of(all_commands().begin(), all_commands().end(),
                     [&](const CommandSpec& c) { return c.name.starts_with(word + " "); });
}

}  // namespace

int dispatch(std::span<const std::string> argv, Io& io) {
  if (argv.empty() || argv[0] == "--help" || argv[0] == "-h" || argv[0] == "help") {
    if (argv.size() >= 2 && argv[0] == "help") {
      size_t used = 0;
      if (const CommandSpec* c = match(argv.subspan(1), &used)) {
        io.out << help_text(*c);
        return kExitOk;
      }
    }
    print_overview(argv.empty() ? io.err : io.out, "");
    return argv.empty() ? kExitBadInput : kExitOk;
  }
  if (argv[0] == "--version") {
    io.out << "kda " << kVersion << "\n";
    return kExitOk;
  }
  size_t used = 0;
  const CommandSpec* cmd = match(argv, &used);
  if (cmd == nullptr) {
    if (is_group(argv[0])) {
      bool asked = argv.size() > 1 && (argv[1] == "--help" || argv[1] == "-h");
      print_overview(asked ? io.out : io.err, argv[0]);
      if (!asked && argv.size() > 1) io.err << "kda: unknown command '" << argv[0] << " " << argv[1] << "'\n";
      return asked ? kExitOk : kExitBadInput;
    }
    io.err << "kda: unknown command '" << argv[0] << "' (see kda --help)\n";
    return kExitBadInput;
  }
  auto rest = argv.subspan(used);
  if (std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
      std::find(rest.begin(), rest.end(), "-h") != rest.end()) {
    io.out << help_text(*cmd);
    return kExitOk;
  }
  // With --json, a command that fails without writing a result answers with error_json on stdout.
  const bool json = has_json_option(*cmd) && std::find(rest.begin(), rest.end(), "--json") != rest.end();
  if (!json) {
    auto args = parse_args(*cmd, rest);
    if (!args.ok()) {
      io.err << args.status().message() << "\n";
      return kExitBadInput;
    }
    return cmd->run(*args, io);
  }
  WatchBuf out_watch(io.out.rdbuf(), 0), err_watch(io.err.rdbuf(), 16 * 1024);
  std::ostream out(&out_watch), err(&err_watch);
  Io watched{out, err};
  int rc = kExitOk;
  auto args = parse_args(*cmd, rest);
  if (!args.ok()) {
    err << args.status().message() << "\n";
    rc = kExitBadInput;
  } else {
    rc = cmd->run(*args, watched);
  }
  out.flush();
  err.flush();
  if (rc != kExitOk && out_watch.written() == 0) io.out << error_json(rc, err_watch.kept()).dump(2) << "\n";
  return rc;
}

std::string commands_markdown() {
  std::ostringstream s;
  s << "# kda command reference\n\n"
       "Generated by `kda docs` from the same declarations the parser uses; do not edit by hand.\n\n"
       "Exit codes: 0 ok, 1 the evaluated thing failed, 2 bad usage or input, 3 internal error.\n"
       "Results go to stdout (a table, or JSON with `--json`), diagnostics and progress to stderr.\n"
       "With `--json`, a command that fails without a result prints one object instead:\n"
       "`{\"ok\": false, \"exit_code\": N, \"kind\": \"bad_input\"|\"internal\"|\"failed\", \"error\": <last stderr "
       "line>, \"messages\": [...]}`.\n\n";
  for (const auto& c : all_commands()) {
    s << "## kda " << c.name << "\n\n" << c.summary << "\n\n```\n" << help_text(c) << "```\n\n";
  }
  return s.str();
}

CommandSpec docs_command() {
  return {
      .name = "docs",
      .summary = "Print the Markdown command reference (docs/cli.md) generated from the command table",
      .description =
          "The same declarations drive parsing, --help and this reference; a test keeps docs/cli.md current.",
      .options = {{.name = "output", .short_name = 'o', .metavar = "FILE", .help = "write to FILE instead of stdout"}},
      .run =
          [](const Args& args, Io& io) {
            std::string md = commands_markdown();
            if (auto path = args.value("output")) {
              auto st = fs::write_file_atomic(*path, md);
              if (!st.ok()) {
                io.err << st.message() << "\n";
                return exit_code_for(st);
              }
              return static_cast<int>(kExitOk);
            }
            io.out << md;
            return static_cast<int>(kExitOk);
          },
  };
}

}  // namespace kda::cli
