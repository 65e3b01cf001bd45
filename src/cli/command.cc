#include "cli/command.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kda::cli {

int exit_code_for(const Status& status) {
  if (status.ok()) return kExitOk;
  switch (status.kind()) {
    case ErrorKind::kBadInput:
    case ErrorKind::kNotFound: return kExitBadInput;
    case ErrorKind::kFailed: return kExitFailed;
    case ErrorKind::kIo:
    case ErrorKind::kInternal: return kExitInternal;
  }
  return kExitInternal;
}

int fail(Io& io, std::string_view command, const Status& status) {
  io.err << command << ": " << status.message() << "\n";
  return exit_code_for(status);
}

std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

OptionSpec json_option() { return {.name = "json", .help = "print the result as JSON on stdout"}; }

namespace {

const OptionSpec* find_option(const CommandSpec& spec, std::string_view name) {
  for (const auto& o : spec.options)
    if (o.name == name) return &o;
  return nullptr;
}

const OptionSpec* find_short(const CommandSpec& spec, char c) {
  for (const auto& o : spec.options)
    if (o.short_name != 0 && o.short_name == c) return &o;
  return nullptr;
}

}  // namespace

bool Args::flag(std::string_view name) const {
  for (const auto& [n, v] : options_)
    if (n == name) return true;
  return false;
}

bool Args::given(std::string_view name) const {
  return flag(name) && std::find(defaulted_.begin(), defaulted_.end(), name) == defaulted_.end();
}

std::optional<std::string> Args::value(std::string_view name) const {
  for (auto it = options_.rbegin(); it != options_.rend(); ++it)
    if (it->first == name) return it->second;
  return std::nullopt;
}

std::string Args::value_or(std::string_view name, std::string fallback) const {
  auto v = value(name);
  return v ? *v : std::move(fallback);
}

std::vector<std::string> Args::values(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [n, v] : options_)
    if (n == name) out.push_back(v);
  return out;
}

Result<std::optional<long long>> Args::integer(std::string_view name) const {
  auto v = value(name);
  if (!v) return std::optional<long long>{};
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno != 0)
    return Status::bad_input(fmt::format("--{}: expected an integer, got '{}'", name, *v));
  return std::optional<long long>(x);
}

Result<std::optional<double>> Args::number(std::string_view name) const {
  auto v = value(name);
  if (!v) return std::optional<double>{};
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0') return Status::bad_input(fmt::format("--{}: expected a number, got '{}'", name, *v));
  return std::optional<double>(x);
}

std::string Args::positional(std::string_view name) const {
  for (const auto& [n, v] : positionals_)
    if (n == name) return v;
  return {};
}

std::vector<std::string> Args::positionals(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [n, v] : positionals_)
    if (n == name) out.push_back(v);
  return out;
}

Result<Args> parse_args(const CommandSpec& spec, std::span<const std::string> argv) {
  Args args;
  std::vector<std::string> pos;
  bool only_positionals = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (only_positionals || a.size() < 2 || a[0] != '-') {
      pos.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positionals = true;
      continue;
    }
    const OptionSpec* o = nullptr;
    std::optional<std::string> inline_value;
    if (a.starts_with("--")) {
      std::string body = a.substr(2);
      if (auto eq = body.find('='); eq != std::string::npos) {
        inline_value = body.substr(eq + 1);
        body.resize(eq);
      }
      o = find_option(spec, body);
      if (o == nullptr)
        return Status::bad_input(fmt::format("kda {}: unknown option --{} (see --help)", spec.name, body));
    } else {
      if (a.size() != 2) return Status::bad_input(fmt::format("kda {}: unknown option {} (see --help)", spec.name, a));
      o = find_short(spec, a[1]);
      if (o == nullptr) return Status::bad_input(fmt::format("kda {}: unknown option {} (see --help)", spec.name, a));
    }
    if (o->metavar.empty()) {
      if (inline_value) return Status::bad_input(fmt::format("kda {}: --{} takes no value", spec.name, o->name));
      args.options_.emplace_back(o->name, "1");
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= argv.size())
        return Status::bad_input(fmt::format("kda {}: --{} needs a value ({})", spec.name, o->name, o->metavar));
      inline_value = argv[++i];
    }
    if (!o->repeatable) {
      for (const auto& [n, v] : args.options_)
        if (n == o->name) return Status::bad_input(fmt::format("kda {}: --{} given twice", spec.name, o->name));
    }
    args.options_.emplace_back(o->name, *inline_value);
  }
  // Options not given: environment fallback (read once, here), then the default.
  for (const auto& o : spec.options) {
    bool given = false;
    for (const auto& [n, v] : args.options_) given = given || n == o.name;
    if (given) continue;
    const char* e = o.env.empty() ? nullptr : std::getenv(o.env.c_str());
    if (e != nullptr && *e != '\0') {
      if (!o.metavar.empty())
        args.options_.emplace_back(o.name, e);
      else if (std::string_view(e) != "0")
        args.options_.emplace_back(o.name, "1");
    } else if (!o.default_value.empty()) {
      args.options_.emplace_back(o.name, o.default_value);
      args.defaulted_.push_back(o.name);
    }
  }
  size_t p = 0;
  for (const auto& ps : spec.positionals) {
    if (ps.variadic) {
      if (ps.required && p >= pos.size())
        return Status::bad_input(fmt::format("kda {}: missing <{}> (see --help)", spec.name, ps.name));
      for (; p < pos.size(); ++p) args.positionals_.emplace_back(ps.name, pos[p]);
      break;
    }
    if (p >= pos.size()) {
      if (ps.required) return Status::bad_input(fmt::format("kda {}: missing <{}> (see --help)", spec.name, ps.name));
      continue;
    }
    args.positionals_.emplace_back(ps.name, pos[p++]);
  }
  if (p < pos.size())
    return Status::bad_input(fmt::format("kda {}: unexpected argument '{}' (see --help)", spec.name, pos[p]));
  return args;
}

std::string help_text(const CommandSpec& spec) {
  std::ostringstream s;
  s << "usage: kda " << spec.name;
  if (!spec.options.empty()) s << " [options]";
  for (const auto& p : spec.positionals) {
    std::string t = "<" + p.name + ">" + (p.variadic ? "..." : "");
    s << " " << (p.required ? t : "[" + t + "]");
  }
  s << "\n\n" << spec.summary << "\n";
  if (!spec.description.empty()) s << "\n" << spec.description << "\n";
  if (!spec.positionals.empty()) {
    s << "\narguments:\n";
    for (const auto& p : spec.positionals) s << fmt::format("  {:<26}{}\n", "<" + p.name + ">", p.help);
  }
  s << "\noptions:\n";
  for (const auto& o : spec.options) {
    std::string left = o.short_name ? fmt::format("-{}, --{}", o.short_name, o.name) : fmt::format("    --{}", o.name);
    if (!o.metavar.empty()) left += " " + o.metavar;
    std::string right = o.help;
    if (!o.default_value.empty()) right += fmt::format(" (default: {})", o.default_value);
    if (!o.env.empty()) right += fmt::format(" [env: {}]", o.env);
    if (o.repeatable) right += " (repeatable)";
    s << fmt::format("  {:<26}{}\n", left, right);
  }
  s << fmt::format("  {:<26}{}\n", "-h, --help", "show this help");
  return s.str();
}

}  // namespace kda::cli
