#include "eval/solution_build.h"

#include <algorithm>
#include <regex>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "build/builder.h"
#include "util/strings.h"

namespace kda::eval {

Result<SolutionBuildOptions> parse_build_options(const std::string& text, const std::string& language,
                                                 const std::vector<std::string>& source_paths) {
  const std::string file = kBuildOptionsFile;
  toml::table t;
  try {
    t = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    return Status::bad_input(fmt::format("{}:{}: {}", file, e.source().begin.line, e.description()));
  }
  auto at = [&](const toml::node& n, const std::string& field, const std::string& what) {
    return Status::bad_input(fmt::format("{}:{}: {}: {}", file, n.source().begin.line, field, what));
  };
  SolutionBuildOptions out;
  const std::vector<std::string>& allowed = language == "cuda" ? kAllowedCudaFlags : kAllowedCppFlags;
  static const std::regex define_re("[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?");
  for (const auto& [key, node] : t) {
    const std::string field(key.str());
    std::vector<std::string>* into = field == "defines" ? &out.defines : field == "include_dirs" ? &out.include_dirs
                                   : field == "flags"   ? &out.flags   : nullptr;
    if (into == nullptr) return at(node, field, "unknown field (build.toml has defines, include_dirs and flags)");
    const toml::array* arr = node.as_array();
    if (arr == nullptr) return at(node, field, "expected an array of strings");
    for (const toml::node& item : *arr) {
      const auto v = item.value<std::string>();
      if (!v) return at(item, field, "expected an array of strings");
      if (field == "defines" && !std::regex_match(*v, define_re))
        return at(item, field, fmt::format("'{}' is not NAME or NAME=VALUE (letters, digits, _ . + -)", *v));
      if (field == "include_dirs") {
        const std::filesystem::path d(*v);
        const bool inside = !d.empty() && d.is_relative() &&
                            std::none_of(d.begin(), d.end(), [](const std::filesystem::path& c) { return c == ".."; });
        const std::string prefix = d.lexically_normal().generic_string();
        const bool has_sources = std::any_of(source_paths.begin(), source_paths.end(), [&](const std::string& p) {
          return prefix == "." || p.starts_with(prefix + (prefix.ends_with("/") ? "" : "/"));
        });
        if (!inside) return at(item, field, fmt::format("'{}' must be a directory inside the solution (relative, no ..)", *v));
        if (!has_sources) return at(item, field, fmt::format("'{}' holds none of the solution's sources", *v));
      }
      if (field == "flags" && std::find(allowed.begin(), allowed.end(), *v) == allowed.end())
        return at(item, field, fmt::format("'{}' is not allowed for {} (allowed: {})", *v, language, util::join(allowed, " ")));
      into->push_back(*v);
    }
  }
  return out;
}

Result<BuiltLibrary> build_solution(const task::Solution& solution, const BuildSettings& settings) {
  const std::string& ep = solution.spec.entry_point;
  const auto sep = ep.find("::");
  if (sep == std::string::npos)
    return Status::bad_input("solution '" + solution.name + "': entry_point '" + ep + "' is not file::function");
  build::BuildRequest req;
  req.language = solution.spec.language;
  for (const auto& s : solution.sources) req.sources.push_back({s.path, s.content});
  req.entry_file = ep.substr(0, sep);
  req.entry_symbol = ep.substr(sep + 2);
  req.binding = solution.spec.binding.value_or("");
  req.cuda_arch = settings.cuda_arch;
  // A language the builder does not know is its own error; a binding kda does not build is a verdict.
  const bool buildable = req.language == "cpp" || req.language == "cuda";
  if (auto refused = buildable ? task::not_evaluable_reason(solution) : std::nullopt) {
    BuiltLibrary lib;
    lib.log = *refused + "\n";
    lib.info = {{"language", req.language}, {"status", *refused}, {"cache_hit", false}};
    return lib;
  }
  req.debug_lineinfo = settings.lineinfo;
  if (const task::SourceFile* opts = solution.source(kBuildOptionsFile)) {
    std::vector<std::string> paths;
    for (const auto& s : solution.sources) paths.push_back(s.path);
    auto parsed = parse_build_options(opts->content, req.language, paths);
    if (!parsed.ok()) {
      BuiltLibrary lib;
      lib.info = {{"language", req.language}, {"status", parsed.status().message()}, {"cache_hit", false}};
      lib.log = parsed.status().message() + "\n";
      return lib;
    }
    for (const auto& d : parsed->defines) req.extra_flags.push_back("-D" + d);
    for (const auto& d : parsed->include_dirs)
      req.extra_flags.push_back("-Isrc/" + std::filesystem::path(d).lexically_normal().generic_string());
    for (const auto& f : parsed->flags) req.extra_flags.push_back(f);
  }
  // spec.dependencies against the task policy: a library it allows is linked, a header-only one
  // needs nothing, anything else does not build (and says what the policy allows).
  for (const std::string& dep : solution.spec.dependencies) {
    auto in = [&dep](const std::vector<std::string>& v) { return std::find(v.begin(), v.end(), dep) != v.end(); };
    if (in(kHeaderOnlyDependencies)) continue;
    if (in(settings.allowed_libraries)) {
      req.libraries.push_back(dep);
      continue;
    }
    std::string allowed;
    for (const auto& l : settings.allowed_libraries) allowed += (allowed.empty() ? "" : ", ") + l;
    std::string header_only;
    for (const auto& l : kHeaderOnlyDependencies) header_only += (header_only.empty() ? "" : ", ") + l;
    BuiltLibrary lib;
    lib.info = {{"language", req.language},
                {"status", fmt::format("dependency '{}' is not allowed by the task policy ([policy] libraries = [{}]; "
                                       "header-only, always allowed: {})", dep, allowed, header_only)},
                {"cache_hit", false}};
    lib.log = lib.info["status"].get<std::string>() + "\n";
    return lib;
  }
  KDA_ASSIGN_OR_RETURN(build::BuildResult r, build::build_solution(req));
  BuiltLibrary lib;
  lib.ok = r.ok;
  lib.library = r.library;
  lib.symbol = r.entry_export.empty() ? req.entry_symbol : r.entry_export;
  lib.log = r.log;
  nlohmann::json resources = nlohmann::json::array();
  for (const auto& k : r.resources)
    resources.push_back({{"kernel", k.demangled}, {"mangled", k.name}, {"arch", k.arch}, {"registers", k.registers},
                         {"shared_mem_static", k.shared_mem_static}, {"spill_stores", k.spill_stores},
                         {"spill_loads", k.spill_loads}, {"stack", k.stack}});
  lib.info = {{"language", req.language}, {"status", r.status}, {"cache_hit", r.cache_hit}, {"key", r.key},
              {"compile_seconds", r.compile_seconds}, {"resources", resources},
              {"compilers", r.compilers}};
  return lib;
}

std::string build_failure_summary(const BuiltLibrary& lib) {
  std::string status = lib.info.value("status", std::string("does not build"));
  if (status.find("error") == std::string::npos) return status;
  const auto lines = build::error_lines(lib.log, 1);
  return lines.empty() ? status : status + ": " + lines.front();
}

}  // namespace kda::eval
