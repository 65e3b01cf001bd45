// Declarative subcommands: one CommandSpec drives parsing, --help, environment fallbacks and docs/cli.md.
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "util/status.h"

namespace kda::cli {

// Exit codes (contract): 0 ok, 1 the evaluated thing failed, 2 bad usage or input, 3 internal error.
enum ExitCode : int { kExitOk = 0, kExitFailed = 1, kExitBadInput = 2, kExitInternal = 3 };
int exit_code_for(const Status& status);

struct OptionSpec {
  std::string name;     // long name without "--"
  char short_name = 0;  // optional one-letter alias
  std::string metavar;  // empty: a boolean flag; otherwise the option takes a value
  std::string help;
  std::string env;            // environment variable used when the option is absent
  std::string default_value;  // used when neither the option nor env is given
  bool repeatable = false;    // may be given several times (values() returns all)
};

struct PositionalSpec {
  std::string name;
  std::string help;
  bool required = true;
  bool variadic = false;  // takes all remaining positionals (must be last)
};

// Parsed arguments of one command.
class Args {
 public:
  bool flag(std::string_view name) const;
  // True when the user set the option (command line or environment), false when only its default applies.
  bool given(std::string_view name) const;
  // Command line, then env fallback, then default (resolved at parse time); nullopt when none applies.
  std::optional<std::string> value(std::string_view name) const;
  std::string value_or(std::string_view name, std::string fallback) const;
  std::vector<std::string> values(std::string_view name) const;
  // Parses an option as a number; bad text is a kBadInput error naming the option.
  Result<std::optional<long long>> integer(std::string_view name) const;
  Result<std::optional<double>> number(std::string_view name) const;
  std::string positional(std::string_view name) const;  // "" if absent
  std::vector<std::string> positionals(std::string_view name) const;

 private:
  friend Result<Args> parse_args(const struct CommandSpec&, std::span<const std::string>);
  std::vector<std::pair<std::string, std::string>> options_;  // (name, value); flags get "1"
  std::vector<std::pair<std::string, std::string>> positionals_;
  std::vector<std::string> defaulted_;  // options whose value is the spec's default
};

// Output streams of a command: results to out, diagnostics and progress to err.
struct Io {
  std::ostream& out;
  std::ostream& err;
};

// A command's failure: "<command>: <message>" on stderr, and the exit code the status maps to
// (fail(io, "kda eval", st)).
int fail(Io& io, std::string_view command, const Status& status);

// A command's --json document: two-space indent, invalid UTF-8 replaced rather than thrown on.
std::string json_text(const nlohmann::json& j);

struct CommandSpec {
  std::string name;         // words after "kda", e.g. "task validate"
  std::string summary;      // one line
  std::string description;  // paragraphs for --help and docs
  std::vector<PositionalSpec> positionals;
  std::vector<OptionSpec> options;
  std::function<int(const Args&, Io&)> run;
};

Result<Args> parse_args(const CommandSpec& spec, std::span<const std::string> argv);
std::string help_text(const CommandSpec& spec);

// The option every command with machine-readable output declares.
OptionSpec json_option();

}  // namespace kda::cli
