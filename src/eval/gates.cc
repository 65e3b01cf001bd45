#include "eval/gates.h"

#include <fmt/format.h>

namespace kda::eval {

namespace {

struct GateInfo {
  GateId id;
  std::string_view name;
  std::string_view summary;
};

// Vocabulary order = report order: static, correctness, per-call, timing, device.
constexpr std::array<GateInfo, kGateCount> kGates{{
    {GateId::kImportAudit, "import-audit", "the library's dynamic imports are allowed by the task policy"},
    {GateId::kCorrectness, "correctness", "outputs match the reference on fresh secret inputs"},
    {GateId::kGuardBands, "guard-bands", "no write outside any input or output"},
    {GateId::kInputCheck, "input-checksum", "inputs unchanged by every checked call"},
    {GateId::kUnwritten, "unwritten-output", "every output element written by the call"},
    {GateId::kThreads, "threads", "no thread left running after a call"},
    {GateId::kTimingClock, "timing-clock", "the runner's clock within the evaluator's around each request"},
    {GateId::kDeterminism, "determinism", "the same inputs twice give the same outputs"},
    {GateId::kProbes, "probes", "correct on off-distribution inputs"},
    {GateId::kStress, "stress", "correct on the pack's stress inputs (real runs' extremes)"},
    {GateId::kTimedRecheck, "timed-output-recheck", "outputs of timed calls re-checked after in-place input refills"},
    {GateId::kMemoization, "fresh-vs-repeat", "timed calls on never-seen inputs no slower than on repeated ones"},
    {GateId::kGpuActivity, "gpu-activity", "every timed call launched a kernel of its own"},
    {GateId::kHostCpu, "host-cpu", "timed calls do not compute on the host"},
    {GateId::kLaunchAttestation, "launch-attestation", "every kernel that ran was compiled from the candidate"},
    {GateId::kRoofline, "roofline", "no latency below the workload's bytes/FLOPs floor"},
    {GateId::kGraphContract, "graph-contract",
     "one call captured into a CUDA graph; its replays on fresh inputs in the same buffers are correct"},
}};

const GateInfo& info(GateId id) { return kGates[static_cast<size_t>(id)]; }

}  // namespace

std::string_view gate_name(GateId id) { return info(id).name; }
std::string_view gate_summary(GateId id) { return info(id).summary; }

std::string_view gate_status_name(GateStatus s) {
  switch (s) {
    case GateStatus::kPass: return "pass";
    case GateStatus::kFail: return "fail";
    case GateStatus::kSkipped: return "skipped";
  }
  return "?";
}

std::optional<GateId> gate_from_name(std::string_view name) {
  for (const auto& g : kGates)
    if (g.name == name) return g.id;
  return std::nullopt;
}

void GateLedger::fail(GateId id, std::string reason, std::string detail) {
  Entry& e = entry(id);
  e.fail_reason = std::move(reason);
  e.detail = std::move(detail);
}

std::vector<Gate> GateLedger::records(std::string_view not_reached) const {
  std::vector<Gate> out;
  for (const auto& g : kGates) {
    const Entry& e = entries_[static_cast<size_t>(g.id)];
    Gate r{std::string(g.name), GateStatus::kSkipped, {}, {}};
    if (e.fail_reason) {
      r.status = GateStatus::kFail;
      r.reason = *e.fail_reason;
      r.detail = e.detail;
    } else if (e.runs > 0) {
      r.status = GateStatus::kPass;
      r.detail =
          e.detail.empty() ? fmt::format("{} ({} check{})", g.summary, e.runs, e.runs == 1 ? "" : "s") : e.detail;
    } else {
      r.detail = !e.skip_why.empty() ? e.skip_why : std::string(not_reached);
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace kda::eval
