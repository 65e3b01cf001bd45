// The evaluator's integrity gates as a vocabulary, and the ledger that records what each one did.
// A gate's record is written by the code that ran it: `pass` only after the check ran and found
// nothing (with how many times it ran), `fail` with the reason code of the rejection, `skipped` with
// why it did not apply (no timed calls, no input the probe applies to, no GPU, the task's policy).
// Nothing is recorded as passed by default. docs/integrity-gates.md says which gates apply where.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kda::eval {

enum class GateId {
  kImportAudit,        // static: the library's imports against the task policy
  kCorrectness,        // fresh-seed correctness trials against the reference
  kGuardBands,         // no write outside any input or output slot
  kInputCheck,         // inputs unchanged by every checked call
  kUnwritten,          // every output element written (the poison is gone)
  kThreads,            // no thread left running after a call (policy threads = false)
  kTimingClock,        // the runner's clock never exceeds the evaluator's around a request
  kDeterminism,        // the same inputs twice give the same outputs
  kProbes,             // correct on off-distribution inputs (task.toml [probes])
  kStress,             // correct on the pack's stress inputs (task.toml [inputs] stress)
  kTimedRecheck,       // outputs of timed calls re-checked after in-place input refills
  kMemoization,        // timed calls on never-seen inputs are not slower than on repeated ones
  kGpuActivity,        // every timed call launched a kernel (CUDA)
  kHostCpu,            // timed calls do not compute on the host behind a decoy kernel (CUDA)
  kLaunchAttestation,  // every kernel that ran was compiled from the candidate's sources (CUDA)
  kRoofline,           // no latency below the workload's bytes/FLOPs floor
  kGraphContract,      // the call captured into a CUDA graph, its replays on fresh inputs correct (CUDA)
};
inline constexpr int kGateCount = static_cast<int>(GateId::kGraphContract) + 1;

enum class GateStatus { kPass, kFail, kSkipped };

std::string_view gate_name(GateId id);            // "guard-bands", "timed-output-recheck", ...
std::string_view gate_summary(GateId id);         // one line: what the gate checks
std::string_view gate_status_name(GateStatus s);  // "pass" | "fail" | "skipped"
std::optional<GateId> gate_from_name(std::string_view name);

struct Gate {
  std::string name;
  GateStatus status = GateStatus::kSkipped;
  std::string detail;  // evidence (pass, fail) or why it did not apply (skipped)
  std::string reason;  // reason code when it failed (e.g. "forbidden_import:threads")
  bool passed() const { return status == GateStatus::kPass; }
  bool failed() const { return status == GateStatus::kFail; }
};

// Per-workload record of the gates: each check that ran counts once; a gate that never ran is
// reported as skipped, with the reason given by skip() or, failing that, `not_reached`.
class GateLedger {
 public:
  // One application of `id` that found nothing wrong.
  void ran(GateId id, int times = 1) { entry(id).runs += times; }
  // Evidence shown with a passing gate (e.g. "6 fresh calls 1.02x the repeated ones").
  void note(GateId id, std::string detail) { entry(id).detail = std::move(detail); }
  // The gate does not apply here; `why` is shown instead of a result. A later ran() wins.
  void skip(GateId id, std::string why) { entry(id).skip_why = std::move(why); }
  void fail(GateId id, std::string reason, std::string detail);
  int runs(GateId id) const { return entries_[static_cast<size_t>(id)].runs; }
  // Every gate in vocabulary order. `not_reached` explains gates that neither ran nor were
  // skipped (e.g. "the workload stopped at guard-bands").
  std::vector<Gate> records(std::string_view not_reached) const;

 private:
  struct Entry {
    int runs = 0;
    std::string detail, skip_why;
    std::optional<std::string> fail_reason;
  };
  Entry& entry(GateId id) { return entries_[static_cast<size_t>(id)]; }
  std::array<Entry, kGateCount> entries_{};
};

}  // namespace kda::eval
