#include "eval/static_gate.h"

#include <fmt/format.h>

#include "build/builder.h"
#include "elf/audit.h"
#include "elf/elf_file.h"

namespace kda::eval {

namespace {

// The dynamic-import audit against the task's policy (categories in docs/integrity-gates.md).
Gate import_audit_gate(const elf::ElfInfo& info, const task::TaskSettings& settings, const BuiltLibrary& lib) {
  elf::ImportPolicy policy;
  policy.allowed_libraries = settings.libraries;
  if (!lib.python_module.empty()) {  // binding torch: torch's own libraries, at the runpath kda's build set
    policy.allowed_libraries.insert(policy.allowed_libraries.end(), std::begin(build::kTorchLibraries),
                                    std::end(build::kTorchLibraries));
    policy.allowed_libraries.insert(policy.allowed_libraries.end(), std::begin(build::kTorchCudaLibraries),
                                    std::end(build::kTorchCudaLibraries));
    for (const auto& d : lib.info.value("torch_library_dirs", nlohmann::json::array()))
      policy.allowed_runpaths.push_back(d.get<std::string>());
  }
  policy.allow_streams = settings.streams;
  policy.allow_threads = settings.threads;
  policy.allow_graphs = settings.cuda_graphs;
  elf::AuditReport report = elf::audit_imports(info, policy);
  if (report.clean())
    return {"import-audit",
            GateStatus::kPass,
            fmt::format("{} imports, all allowed by the task policy", info.imports.size()),
            {}};
  return {"import-audit", GateStatus::kFail, report.summary(), "forbidden_import:" + report.findings.front().category};
}

}  // namespace

std::vector<Gate> static_gates(const BuiltLibrary& lib, const task::TaskSettings& settings) {
  std::vector<Gate> gates;
  if (lib.python_source()) {  // a torch extension is an ELF library: audited
    gates.push_back({"import-audit",
                     GateStatus::kSkipped,
                     "a Python solution: no compiled library whose dynamic imports could be read (the runtime gates "
                     "apply as to any solution)",
                     {}});
    return gates;
  }
  auto info = elf::read_elf_file(lib.library);
  if (!info.ok()) {
    gates.push_back({"elf", GateStatus::kFail, info.status().message(), "unreadable_library"});
    return gates;
  }
  gates.push_back(import_audit_gate(*info, settings, lib));
  return gates;
}

}  // namespace kda::eval
