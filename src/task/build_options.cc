#include "task/build_options.h"

#include <algorithm>
#include <filesystem>
#include <regex>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "util/strings.h"

namespace kda::task {

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
    std::vector<std::string>* into = field == "defines"        ? &out.defines
                                     : field == "include_dirs" ? &out.include_dirs
                                     : field == "flags"        ? &out.flags
                                                               : nullptr;
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
        if (!inside)
          return at(item, field, fmt::format("'{}' must be a directory inside the solution (relative, no ..)", *v));
        if (!has_sources) return at(item, field, fmt::format("'{}' holds none of the solution's sources", *v));
      }
      if (field == "flags" && std::find(allowed.begin(), allowed.end(), *v) == allowed.end())
        return at(item, field,
                  fmt::format("'{}' is not allowed for {} (allowed: {})", *v, language, util::join(allowed, " ")));
      into->push_back(*v);
    }
  }
  return out;
}

}  // namespace kda::task
