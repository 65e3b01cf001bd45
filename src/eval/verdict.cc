#include "eval/verdict.h"

namespace kda::eval {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kPassed: return "PASSED";
    case Verdict::kIncorrectShape: return "INCORRECT_SHAPE";
    case Verdict::kIncorrectDtype: return "INCORRECT_DTYPE";
    case Verdict::kIncorrectNumerical: return "INCORRECT_NUMERICAL";
    case Verdict::kRuntimeError: return "RUNTIME_ERROR";
    case Verdict::kCompileError: return "COMPILE_ERROR";
    case Verdict::kTimeout: return "TIMEOUT";
    case Verdict::kForbiddenImport: return "VIOLATION_FORBIDDEN_IMPORT";
    case Verdict::kOutOfBounds: return "VIOLATION_OUT_OF_BOUNDS";
    case Verdict::kInputMutated: return "VIOLATION_INPUT_MUTATED";
    case Verdict::kThreadLeak: return "VIOLATION_THREAD_LEAK";
    case Verdict::kNondeterministic: return "VIOLATION_NONDETERMINISTIC";
    case Verdict::kStaleOutput: return "VIOLATION_STALE_OUTPUT";
    case Verdict::kSandboxViolation: return "VIOLATION_SANDBOX";
    case Verdict::kBelowRoofline: return "VIOLATION_BELOW_ROOFLINE";
    case Verdict::kTimingInconsistent: return "VIOLATION_TIMING";
    case Verdict::kNoGpuActivity: return "VIOLATION_NO_GPU_ACTIVITY";
    case Verdict::kForeignKernel: return "VIOLATION_FOREIGN_KERNEL";
    case Verdict::kMemoization: return "VIOLATION_MEMOIZATION";
  }
  return "?";
}

std::optional<Verdict> verdict_from_name(std::string_view name) {
  for (int v = 0; v <= static_cast<int>(Verdict::kMemoization); ++v)
    if (verdict_name(static_cast<Verdict>(v)) == name) return static_cast<Verdict>(v);
  return std::nullopt;
}

std::string_view verdict_status(Verdict v) {
  switch (v) {
    case Verdict::kPassed:
    case Verdict::kIncorrectShape:
    case Verdict::kIncorrectDtype:
    case Verdict::kIncorrectNumerical:
    case Verdict::kRuntimeError:
    case Verdict::kCompileError:
    case Verdict::kTimeout: return verdict_name(v);
    default: return "RUNTIME_ERROR";
  }
}

}  // namespace kda::eval
