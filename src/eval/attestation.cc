#include "eval/attestation.h"

#include <algorithm>
#include <iterator>
#include <regex>

namespace kda::eval {

std::vector<std::string> foreign_kernels(const std::set<std::string>& seen, const std::set<std::string>& own) {
  std::vector<std::string> out;
  std::set_difference(seen.begin(), seen.end(), own.begin(), own.end(), std::back_inserter(out));
  return out;
}

std::set<std::string> jit_kernel_names(const std::vector<task::SourceFile>& sources) {
  // A decorator line naming `jit` (as `jit`, `triton.jit`, `tl.jit(...)`), then the next `def`.
  static const std::regex jit_re(R"(^[ \t]*@[ \t]*(?:[A-Za-z_][A-Za-z0-9_]*[ \t]*\.[ \t]*)*jit\b)",
                                 std::regex::multiline);
  static const std::regex def_re(R"(^[ \t]*(?:async[ \t]+)?def[ \t]+([A-Za-z_][A-Za-z0-9_]*))", std::regex::multiline);
  std::set<std::string> names;
  for (const auto& s : sources) {
    if (s.path.size() < 3 || s.path.compare(s.path.size() - 3, 3, ".py") != 0) continue;
    for (auto it = std::sregex_iterator(s.content.begin(), s.content.end(), jit_re); it != std::sregex_iterator();
         ++it) {
      std::smatch def;
      auto from = s.content.cbegin() + it->position() + it->length();
      if (std::regex_search(from, s.content.cend(), def, def_re)) names.insert(def[1].str());
    }
  }
  return names;
}

namespace {

bool from_jit(const std::string& kernel, const std::set<std::string>& jit_names) {
  if (jit_names.count(kernel)) return true;
  // Triton 2 named a kernel <function>_<signature>, e.g. _rmsnorm_0d1d2d3de.
  static const std::regex suffix_re("_[0-9a-z]+");
  for (const auto& name : jit_names)
    if (kernel.size() > name.size() + 1 && kernel.compare(0, name.size(), name) == 0 &&
        std::regex_match(kernel.substr(name.size()), suffix_re))
      return true;
  return false;
}

}  // namespace

const PythonKernelRule* python_kernel_rule(const std::string& language) {
  for (const auto& r : kPythonKernelRules)
    if (r.language == language) return &r;
  return nullptr;
}

std::vector<std::string> foreign_python_kernels(const std::set<std::string>& seen,
                                                const std::set<std::string>& jit_names, const std::string& language) {
  return foreign_python_kernels(seen, jit_names, python_kernel_rule(language));
}

std::vector<std::string> foreign_python_kernels(const std::set<std::string>& seen,
                                                const std::set<std::string>& jit_names, const PythonKernelRule* rule) {
  std::vector<std::string> out;
  for (const auto& k : seen) {
    if (from_jit(k, jit_names)) continue;
    bool allowed = false;
    if (rule != nullptr) {
      for (const auto& p : rule->allowed_prefixes) allowed = allowed || k.compare(0, p.size(), p) == 0;
      for (const auto& sub : rule->allowed_substrings) allowed = allowed || k.find(sub) != std::string::npos;
    }
    if (!allowed) out.push_back(k);
  }
  return out;
}

}  // namespace kda::eval
