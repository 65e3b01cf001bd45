#include "eval/machine_headers.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>

#include "eval/runner_client.h"
#include "proc/subprocess.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kda::eval {

namespace stdfs = std::filesystem;

nlohmann::json MachineHeaders::to_json() const {
  return {{"name", name}, {"dir", dir}, {"source", source}, {"version", version}, {"include_dirs", include_dirs}};
}

bool solution_uses(const task::Solution& solution, const MachineHeaderLibrary& lib) {
  for (const auto& d : solution.spec.dependencies)
    for (const auto& name : lib.dependencies)
      if (d == name) return true;
  for (const auto& s : solution.sources) {
    for (const auto& prefix : lib.include_prefixes) {
      // `#include <p...` or `#include "p...`, spaces allowed after '#' and before the bracket.
      for (size_t at = s.content.find(prefix); at != std::string::npos; at = s.content.find(prefix, at + 1)) {
        if (at == 0 || (s.content[at - 1] != '<' && s.content[at - 1] != '"')) continue;
        const size_t line = s.content.rfind('\n', at);
        const std::string head = s.content.substr(line == std::string::npos ? 0 : line + 1,
                                                  at - 1 - (line == std::string::npos ? 0 : line + 1));
        static const std::regex include_re(R"(^\s*#\s*include\s*$)");
        if (std::regex_match(head, include_re)) return true;
      }
    }
  }
  return false;
}

std::string machine_headers_version(const MachineHeaderLibrary& lib, const std::string& include_dir) {
  auto text = fs::read_file(stdfs::path(include_dir) / lib.version_header);
  if (!text.ok()) return {};
  std::string version;
  for (const auto& macro : lib.version_macros) {
    const std::regex re("#\\s*define\\s+" + macro + "\\s+([0-9]+)");
    std::smatch m;
    if (!std::regex_search(*text, m, re)) return {};
    version += (version.empty() ? "" : ".") + m[1].str();
  }
  return version;
}

namespace {

bool has_marker(const MachineHeaderLibrary& lib, const stdfs::path& include_dir) {
  std::error_code ec;
  return stdfs::is_regular_file(include_dir / lib.marker, ec);
}

// A checkout (its checkout_dirs that exist, the first holding the marker) or an include directory.
std::optional<MachineHeaders> headers_at(const MachineHeaderLibrary& lib, const stdfs::path& dir,
                                         const std::string& source) {
  std::error_code ec;
  const stdfs::path root = stdfs::weakly_canonical(stdfs::absolute(dir, ec), ec);
  MachineHeaders h{.name = lib.name, .dir = root.string(), .source = source};
  if (has_marker(lib, root)) {
    h.include_dirs = {root.string()};
  } else {
    for (const auto& sub : lib.checkout_dirs)
      if (stdfs::is_directory(root / sub, ec)) h.include_dirs.push_back((root / sub).string());
    if (h.include_dirs.empty() || !has_marker(lib, h.include_dirs.front())) return std::nullopt;
  }
  h.version = machine_headers_version(lib, h.include_dirs.front());
  return h;
}

// The directory of an installed Python package, found without importing it ("" when absent).
std::string python_package_dir(const std::string& package) {
  std::string python = python_interpreter();
  if (python.empty()) python = "python3";
  if (!proc::find_program(python).ok()) return {};
  proc::RunOptions o;
  o.argv = {python, "-c",
            "import importlib.util as u, sys\n"
            "s = u.find_spec(sys.argv[1])\n"
            "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')\n",
            package};
  o.timeout_seconds = 30;
  auto r = proc::run(o);
  if (!r.ok() || r->exit.exit_code != 0) return {};
  return util::trimmed(r->stdout_text);
}

Result<std::optional<MachineHeaders>> find_uncached(const MachineHeaderLibrary& lib) {
  if (const char* v = std::getenv(lib.variable.c_str()); v != nullptr && *v != '\0') {
    auto h = headers_at(lib, v, lib.variable);
    if (!h)
      return Status::bad_input(lib.variable + "=" + v + ": no " + lib.marker + " there or under " +
                               util::join(lib.checkout_dirs, " or ") + " (it names a " + lib.name +
                               " checkout or its include directory)");
    return h;
  }
  if (lib.python_package.empty()) return std::optional<MachineHeaders>{};
  const std::string package = python_package_dir(lib.python_package);
  if (package.empty()) return std::optional<MachineHeaders>{};
  return headers_at(lib, stdfs::path(package) / lib.package_dir, "python package " + lib.python_package);
}

}  // namespace

Result<std::optional<MachineHeaders>> find_machine_headers(const MachineHeaderLibrary& lib) {
  static std::mutex mu;
  static std::map<std::string, Result<std::optional<MachineHeaders>>> found;
  const char* v = std::getenv(lib.variable.c_str());
  const std::string key = lib.name + "\n" + (v != nullptr ? v : "");  // a changed variable is looked up anew
  std::lock_guard lock(mu);
  auto it = found.find(key);
  if (it == found.end()) it = found.emplace(key, find_uncached(lib)).first;
  return it->second;
}

}  // namespace kda::eval
