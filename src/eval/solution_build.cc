#include "eval/solution_build.h"

#include <algorithm>

#include <fmt/format.h>

#include "build/builder.h"
#include "eval/code_digest.h"
#include "eval/machine_headers.h"
#include "eval/torch_oracle.h"
#include "util/strings.h"

namespace kda::eval {

namespace {

// A python or triton solution: its sources staged for kda-runner's interpreter. spec.dependencies
// name Python packages here (torch, triton), which the interpreter either imports or not: they are
// not checked against the policy's link libraries.
Result<BuiltLibrary> stage_python_solution(const build::BuildRequest& req, const task::Solution& solution) {
  KDA_ASSIGN_OR_RETURN(build::BuildResult r, build::build_solution(req));
  BuiltLibrary lib;
  lib.ok = r.ok;
  lib.python = true;
  lib.returns_outputs = !solution.spec.destination_passing_style;
  lib.library = r.library;
  lib.symbol = r.entry_export;
  lib.log = r.log;
  if (r.ok && req.language == "triton") {  // <cache>/<key>/src/<entry file> -> <cache>/<key>/jit
    std::filesystem::path dir = r.library;
    while (dir.has_relative_path() && dir.filename() != r.key) dir = dir.parent_path();
    if (dir.filename() == r.key) lib.jit_dir = dir / "jit";
  }
  lib.info = {{"language", req.language},
              {"status", r.status},
              {"cache_hit", r.cache_hit},
              {"key", r.key},
              {"destination_passing_style", solution.spec.destination_passing_style}};
  if (r.ok)
    lib.info["code_digest"] = python_code_digest(solution.sources, solution.spec.entry_point, lib.returns_outputs);
  return lib;
}

// The machine's header libraries (kMachineHeaderLibraries) a solution includes: each one found is
// added to the request's include directories; one not configured is named for the build's status.
struct MachineHeaderUse {
  nlohmann::json found = nlohmann::json::array();  // MachineHeaders::to_json of each
  std::vector<std::string> missing, variables;
};

Result<MachineHeaderUse> add_machine_headers(const task::Solution& solution, build::BuildRequest& req) {
  MachineHeaderUse use;
  for (const auto& lib : kMachineHeaderLibraries) {
    if (!solution_uses(solution, lib)) continue;
    KDA_ASSIGN_OR_RETURN(std::optional<MachineHeaders> h, find_machine_headers(lib));
    if (!h) {
      use.missing.push_back(lib.name);
      use.variables.push_back(lib.variable);
      continue;
    }
    req.include_dirs.insert(req.include_dirs.end(), h->include_dirs.begin(), h->include_dirs.end());
    use.found.push_back(h->to_json());
  }
  return use;
}

// A solution refused before any compiler runs: COMPILE_ERROR with `why` as its status and log.
BuiltLibrary refused_build(const std::string& language, const std::string& why) {
  BuiltLibrary lib;
  lib.info = {{"language", language}, {"status", why}, {"cache_hit", false}};
  lib.log = why + "\n";
  return lib;
}

// binding "torch": the installed torch to build against, or why the solution cannot build here.
std::optional<std::string> add_torch(const BuildSettings& settings, build::BuildRequest& req) {
  if (!settings.cuda)
    return std::string(
        "binding \"torch\" builds for a CUDA pack only (FlashInfer-Bench's torch builder needs CUDA); this pack runs "
        "on the host: use binding null (kda's C ABI) or tvm-ffi");
  auto torch = find_torch_extension();
  if (!torch.ok()) return "binding \"torch\" cannot build here: " + torch.status().message();
  req.torch = *torch;
  return std::nullopt;
}

}  // namespace

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
  const bool python = req.language == "python" || req.language == "triton";
  const bool buildable = req.language == "cpp" || req.language == "cuda" || python;
  if (auto refused = buildable ? task::not_evaluable_reason(solution) : std::nullopt)
    return refused_build(req.language, *refused);
  if (python) return stage_python_solution(req, solution);
  req.debug_lineinfo = settings.lineinfo;
  if (const task::SourceFile* opts = solution.source(task::kBuildOptionsFile)) {
    std::vector<std::string> paths;
    for (const auto& s : solution.sources) paths.push_back(s.path);
    auto parsed = task::parse_build_options(opts->content, req.language, paths);
    if (!parsed.ok()) return refused_build(req.language, parsed.status().message());
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
    if (dep == "torch" && req.binding == "torch") continue;  // the binding's own: linked below (add_torch)
    if (in(settings.allowed_libraries)) {
      req.libraries.push_back(dep);
      continue;
    }
    std::string allowed;
    for (const auto& l : settings.allowed_libraries) allowed += (allowed.empty() ? "" : ", ") + l;
    std::string header_only;
    for (const auto& l : kHeaderOnlyDependencies) header_only += (header_only.empty() ? "" : ", ") + l;
    return refused_build(req.language,
                         fmt::format("dependency '{}' is not allowed by the task policy ([policy] libraries = [{}]; "
                                     "header-only, always allowed: {})",
                                     dep, allowed, header_only));
  }
  KDA_ASSIGN_OR_RETURN(MachineHeaderUse machine, add_machine_headers(solution, req));
  if (req.binding == "torch")
    if (auto refused = add_torch(settings, req)) return refused_build(req.language, *refused);
  KDA_ASSIGN_OR_RETURN(build::BuildResult r, build::build_solution(req));
  BuiltLibrary lib;
  lib.ok = r.ok;
  if (req.torch) {
    lib.python = true;
    lib.python_module = req.torch->module;
    lib.returns_outputs = !solution.spec.destination_passing_style;
  }
  lib.library = r.library;
  lib.symbol = r.entry_export.empty() ? req.entry_symbol : r.entry_export;
  lib.log = r.log;
  nlohmann::json resources = nlohmann::json::array();
  for (const auto& k : r.resources)
    resources.push_back({{"kernel", k.demangled},
                         {"mangled", k.name},
                         {"arch", k.arch},
                         {"registers", k.registers},
                         {"shared_mem_static", k.shared_mem_static},
                         {"spill_stores", k.spill_stores},
                         {"spill_loads", k.spill_loads},
                         {"stack", k.stack}});
  lib.info = {{"language", req.language},
              {"status", r.status},
              {"cache_hit", r.cache_hit},
              {"key", r.key},
              {"compile_seconds", r.compile_seconds},
              {"resources", resources},
              {"compilers", r.compilers}};
  if (r.ok) lib.info["code_digest"] = compiled_code_digest(lib.library, lib.symbol, req.binding, lib.returns_outputs);
  if (!machine.found.empty()) lib.info["machine_headers"] = machine.found;
  if (req.torch) {  // what the extension was built against, and the runpath its import audit allows
    lib.info["torch"] = req.torch->version;
    lib.info["torch_library_dirs"] = req.torch->library_dirs;
  }
  if (!r.ok && !machine.missing.empty())
    lib.info["status"] = r.status + " (the solution includes " + util::join(machine.missing, ", ") +
                         " headers it does not carry, and this machine has none configured: set " +
                         util::join(machine.variables, ", ") + "; docs/solutions.md)";
  return lib;
}

std::string build_failure_summary(const BuiltLibrary& lib) {
  std::string status = lib.info.value("status", std::string("does not build"));
  if (status.find("error") == std::string::npos) return status;
  const auto lines = build::error_lines(lib.log, 1);
  return lines.empty() ? status : status + ": " + lines.front();
}

}  // namespace kda::eval
