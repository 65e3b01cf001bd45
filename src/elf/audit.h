// The static gate's binary audit: which dynamic imports, exports and needed libraries of a
// candidate's library break the task's policy (threat catalogue S2, S11, S13, T1-T5; issue 4).
// A finding is evidence, not proof: the runtime gates (sandbox, CUPTI, thread counts) still run.
// Each category is documented in docs/integrity-gates.md.
#pragma once

#include <string>
#include <vector>

#include "elf/elf_file.h"

namespace kda::elf {

// Unstated means "not allowed" (evaluation-threats.md §4).
struct ImportPolicy {
  // Kernel libraries the task allows, by family name: "cublas" (covers cublasLt), "cudnn",
  // "nccl", "cufft", "curand", "cusparse", "cusolver", "cutensor", "nvrtc", or any other
  // library's base name (without "lib" and ".so"), e.g. "gomp".
  std::vector<std::string> allowed_libraries;
  bool allow_streams = false;  // stream creation, events and stream-event waits
  bool allow_threads = false;  // pthread_create, std::thread, OpenMP/TBB
  bool allow_graphs = false;   // CUDA graphs and stream capture
  // DT_RUNPATH/DT_RPATH entries that are not dynamic loading because kda's build set them itself
  // (binding "torch": torch's library directory); any other entry is flagged.
  std::vector<std::string> allowed_runpaths;
};

struct AuditFinding {
  std::string symbol;    // the import/export/library that triggered it
  std::string category;  // stable id, e.g. "threads" (see audit_categories())
  std::string reason;    // one sentence for the trace and `kda eval --explain`
};

struct AuditReport {
  // Ordered as audit_categories() (so the first finding is the most specific), then by symbol.
  std::vector<AuditFinding> findings;
  bool clean() const { return findings.empty(); }
  bool has(const std::string& category) const;
  // "threads: pthread_create; file_io: fopen" (empty when clean).
  std::string summary() const;
};

struct AuditCategory {
  std::string id;
  std::string description;
  std::string allowed_by;  // the policy switch that lifts it, or "" if none
};

// Every category the audit can report, in report order.
const std::vector<AuditCategory>& audit_categories();

AuditReport audit_imports(const ElfInfo& info, const ImportPolicy& policy);

}  // namespace kda::elf
