// `kda solution init`: a solution directory for a task pack that builds, loads and passes its own
// checks of kda's C ABI (docs/solutions.md): the entry point with the definition's inputs and
// outputs in order, a check of each one's dtype, device and rank, the axes read from the shapes
// (constant axes checked), typed pointers (byte_offset applied) and the place where the outputs are
// computed. Until that place is written the entry returns kNotImplemented, which kda eval reports
// as a RUNTIME_ERROR naming it.
#pragma once

#include <string>

#include "task/solution.h"
#include "task/task_pack.h"
#include "util/status.h"

namespace kda::task {

inline constexpr int kScaffoldNotImplemented = 100;

struct ScaffoldOptions {
  // "cpp" | "cuda" | "python" | "triton" (CUDA packs); empty: the pack's (cuda for a CUDA pack, else cpp).
  // A python or triton scaffold is kernel.py whose run() checks the shapes and raises
  // NotImplementedError where the outputs are to be computed.
  std::string language;
  std::string name;  // empty: <definition>_<language>_draft
  std::string author = "you";
};

// The solution (sources inline); kBadInput for a language the pack cannot run.
Result<Solution> scaffold_solution(const TaskPack& pack, const ScaffoldOptions& options);

}  // namespace kda::task
