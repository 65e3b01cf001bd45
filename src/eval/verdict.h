// kda's verdicts. FlashInfer-Bench's seven statuses stay the `status` of a trace; kda's `verdict`
// refines them, and every integrity violation has its own verdict whose FlashInfer-Bench status is
// RUNTIME_ERROR — so no tool can mistake a violation for PASSED.
#pragma once

#include <optional>
#include <string_view>

namespace kda::eval {

enum class Verdict {
  kPassed,
  kIncorrectShape,
  kIncorrectDtype,
  kIncorrectNumerical,
  kRuntimeError,
  kCompileError,
  kTimeout,
  // Integrity violations (documented in docs/integrity-gates.md).
  kForbiddenImport,     // static gate: the library imports something the task policy forbids
  kOutOfBounds,         // a guard band around an input or output was written
  kInputMutated,        // an input's checksum changed across a call
  kThreadLeak,          // the runner has more threads after a call than before
  kNondeterministic,    // same inputs twice gave different outputs (policy: bitwise)
  kStaleOutput,         // a timed call's re-checked output was wrong (caches, skipped work)
  kSandboxViolation,    // the runner was killed for a forbidden syscall (SIGSYS)
  kBelowRoofline,       // faster than the workload's bytes/FLOPs floor on this device
  kTimingInconsistent,  // reported time exceeds the evaluator's wall clock / CUPTI span mismatch
  kNoGpuActivity,       // a CUDA candidate launched nothing
  kForeignKernel,       // a kernel launched during a timed call was not compiled from the candidate's sources
  kMemoization,         // repeated input sets timed much faster than never-seen ones: outputs remembered
};

std::string_view verdict_name(Verdict v);                         // "PASSED", "VIOLATION_INPUT_MUTATED", ...
std::optional<Verdict> verdict_from_name(std::string_view name);  // verdict_name's inverse
std::string_view verdict_status(Verdict v);                       // the FlashInfer-Bench status

}  // namespace kda::eval
