// The official evaluator: builds the reference, the baseline and the candidate, runs each in its
// own runner process, checks correctness on fresh secret seeds, then times candidate and baseline
// interleaved, with integrity gates throughout. See docs/evaluator.md.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/compare.h"
#include "eval/gates.h"
#include "eval/stats.h"
#include "eval/verdict.h"
#include "task/manifest.h"
#include "task/solution.h"
#include "task/task_pack.h"

namespace kda::eval {

struct EvalOptions {
  std::filesystem::path runner_binary;  // kda-runner
  std::string workloads = "dev";        // all | dev | holdout | uuid[,uuid...] (unique prefixes too)
  std::optional<uint64_t> seed;         // master seed (reproduce a run); fresh secret seed otherwise
  bool with_baseline = true;            // time the pack's baseline interleaved with the candidate
  // Time this solution as the baseline instead of the pack's (a head-to-head of two solutions on the
  // same inputs, interleaved; e.g. a dispatcher against its best single configuration).
  std::optional<task::Solution> baseline;
  std::optional<int> trials, warmup, iterations;  // override task.toml
  std::optional<double> call_timeout_s;           // override task.toml [timing] call_timeout_s
  // Require the CUDA graph contract (gate graph-contract) whatever task.toml [contract] graph says:
  // `kda eval --graph-contract`, for a kernel that is to be deployed inside a captured graph.
  bool require_graph_contract = false;
  // The manifest sealed when a run started: any changed, added or removed file of the pack
  // (definition, tolerances, workloads, reference, baselines) fails the evaluation.
  std::optional<task::Manifest> sealed;
  bool sandbox = true;  // Landlock + seccomp in candidate and baseline runners
  std::string cuda_arch = "90a";
  // CUDA: runners generate the plain random inputs on the device from their seeds (no host fill, no
  // uploads of input bytes; inputs are checked by keyed digests). false: host values, uploaded.
  bool device_inputs = true;
  // The reference runner: "pack" (the pack's reference solution) or "torch" (the definition's Python
  // reference in the torch oracle, src/runner/torch_oracle.py; needs a python3 that imports torch).
  std::string reference = "pack";
  // Knock-out tests only (not reachable from the CLI): gates switched off to prove that each one is
  // what rejects its hack. Names: import-audit, timing-clock, threads, guard-bands, input-check,
  // unwritten, recheck, random-rechecks, determinism, host-cpu, roofline, launch-attestation,
  // probes, fresh-vs-repeat (fresh input sets are still timed; only the verdict is off), fresh-inputs
  // (the pack's generator gets trial seed 0: generated inputs fixed per workload, as before issue 17).
  std::set<std::string> disabled_gates;
  // Called with one line per event worth showing on stderr (progress on long runs).
  std::function<void(const std::string&)> progress;
};

struct WorkloadResult {
  std::string uuid;
  nlohmann::json axes;
  Verdict verdict = Verdict::kPassed;
  std::string reason;  // stable code: "unwritten_output", "forbidden_import:threads", ... ("" when PASSED)
  std::string message;
  std::string log;
  std::optional<CheckResult> check;
  SampleStats candidate;  // latency in ms (per-trial medians pooled: median of iterations per trial)
  SampleStats baseline;
  double latency_ms = 0;  // mean over trials of the median over iterations
  double baseline_ms = 0;
  std::vector<double> trial_ms, baseline_trial_ms;  // each trial's median (interleaved, trial by trial)
  double reference_ms = 0;
  double speedup = 0;  // baseline / candidate
  std::optional<double> roofline_floor_ms;
  std::vector<Gate> gates;                        // every gate of the vocabulary: pass, fail or skipped (with why)
  nlohmann::json kda = nlohmann::json::object();  // kernels, cupti span, resources...
};

// Where the evaluator's wall time went (seconds; phases overlap nothing, the rest is runner start-up,
// layouts, poisoning and bookkeeping).
struct EvalPhases {
  double build_s = 0;         // builds (warm cache: hashing only)
  double materialize_s = 0;   // input generation on the host (probe transforms included)
  double load_s = 0;          // writing inputs to arenas / device-side generation requests
  double prepare_call_s = 0;  // before each call: guard refill, output poisoning, poisoned copy, thread count
  double call_wall_s = 0;     // call requests, evaluator's clock (includes transfers, flush, the call itself)
  double verify_call_s = 0;   // after checked calls: guards, input compare / digests, unwritten outputs;
                              // reading back every checked call's outputs (the reference's too)
  double check_s = 0;         // output comparison
  // Inside call_wall_s, as the CUDA runner accounts it: before the call (upload, poison, L2 flush,
  // sync) and after it (CUPTI records, download, input digests). Zero on the host backend.
  double runner_pre_s = 0;
  double runner_post_s = 0;
  double runners_s = 0;  // starting runner processes and loading their libraries (device context, CUPTI)
  double layout_s = 0;   // per-workload arena layouts (maps, device mirrors)
  int64_t calls = 0;     // call requests to all runners
  // `wall_s`: the report's wall time; the JSON adds other_s, the part no phase accounts for.
  nlohmann::json to_json(double wall_s) const;
};

struct EvalReport {
  std::string definition;
  std::string solution;
  std::string backend;
  std::string baseline_name;  // the solution timed as the baseline ("" when none)
  uint64_t seed = 0;          // recorded so a run can be reproduced with --seed
  std::vector<WorkloadResult> workloads;
  bool all_passed = false;
  double score_mean = 0;  // FlashInfer-Bench score: arithmetic mean of speedups (0 if any failed)
  double score_geomean = 0;
  // 95 % interval of score_geomean over the trials (geomean_speedup_ci; absent with one trial, a
  // failure or no baseline).
  std::optional<Interval> geomean_ci;
  double wall_s = 0;     // evaluator wall time
  double in_call_s = 0;  // time spent inside reference/baseline/candidate calls (runner-reported)
  EvalPhases phases;
  nlohmann::json build = nlohmann::json::object();
  // The machine the runners reported ("hardware", on CUDA "driver", "cuda_driver_api",
  // "cuda_runtime"), for the traces' environment.
  nlohmann::json environment = nlohmann::json::object();
  std::vector<Gate> static_gates;
};

// A CUDA pack needs a machine with an NVIDIA driver: kBadInput saying so when none of
// `driver_files` exists (by default /proc/driver/nvidia/version, /dev/nvidiactl, /dev/nvidia0 and
// WSL's /dev/dxg), instead of a runner failing later with cudaErrorInsufficientDriver.
Status check_gpu_machine(const task::TaskPack& pack, const std::vector<std::filesystem::path>& driver_files = {});

// Evaluates `candidate` on `pack`. Errors are the evaluator's own (bad pack, reference does not
// build, runner missing, a CUDA pack where no GPU driver is); everything the candidate does wrong is
// a verdict in the report.
Result<EvalReport> evaluate(const task::TaskPack& pack, const task::Solution& candidate, const EvalOptions& options);

// The uuids of the workloads `which` selects (all | dev | holdout | uuid[,uuid...], unique prefixes
// too), in evaluation order; kBadInput when it names none or an unknown one (what evaluate() says).
Result<std::vector<std::string>> selected_workload_uuids(const task::TaskPack& pack, const std::string& which);

// What a screening session did (Screener::stats).
struct ScreenStats {
  int64_t candidates = 0;               // evaluations in the session
  int64_t candidate_runner_starts = 0;  // candidate runner processes started (the first, and after failures)
  int64_t reloads = 0;                  // candidates loaded into a live runner instead
  int64_t reference_calls = 0;          // reference outputs computed
  int64_t reference_reused = 0;         // ... and taken from the session's memory instead
  int64_t input_sets_reused = 0;        // input sets (and probe sets) taken from memory instead of generated
};

// Screening (kda tune): one evaluator session kept open across many candidates of one pack, so one
// measurement costs milliseconds rather than the seconds of starting runners and rebuilding the
// reference. Every candidate gets exactly evaluate()'s checks and gates on options.workloads, with
// five differences: no baseline is timed; a candidate stops at its first failed workload; no random
// rechecks (the last call of each half and every fresh set are still checked); the master seed is drawn once per session, so every
// candidate meets the same secret input sets and the reference's outputs for them are computed
// once; and the candidate runner stays alive, loading each next library from the build cache into
// the same process (replaced after any failure). A screening number is a ranking, not a result:
// candidates share a process, so only a fresh official evaluate() counts (kda tune ends with one).
// What a screening evaluation checks before it times a candidate.
enum class ScreenChecks {
  // The correctness trials only: the first look at many configurations (the determinism repeat, the
  // probes and the re-checks of timed outputs wait for the ones that go on).
  kCorrectness,
  // Every check; one this candidate passed on the same inputs earlier in the session (a later rung
  // re-timing it) is recorded as skipped, saying so.
  kAll,
};

class Screener {
 public:
  static Result<std::unique_ptr<Screener>> open(const task::TaskPack& pack, EvalOptions options);
  ~Screener();
  // `workloads`: as EvalOptions::workloads (all | dev | holdout | uuid[,uuid...]).
  Result<EvalReport> evaluate(const task::Solution& candidate, const std::string& workloads, int trials, int warmup,
                              int iterations, ScreenChecks checks = ScreenChecks::kAll);
  ScreenStats stats() const;

 private:
  Screener();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// FlashInfer-Bench trace line (plus kda's fields) for one workload result.
nlohmann::json trace_json(const EvalReport& report, const WorkloadResult& w, const task::TaskPack& pack);
nlohmann::json report_json(const EvalReport& report, const task::TaskPack& pack);
// A trace as trace_json() writes it, read back (kda eval --on: the shards the servers evaluated):
// the verdict, reason, message, axes, latencies with their statistics and per-trial medians, the
// speedup, the gates and kda's other fields. kBadInput naming the field that is missing or wrong.
Result<WorkloadResult> workload_from_trace(const nlohmann::json& trace);
// The report's totals from its workloads, as evaluate() computes them: all_passed, the mean and
// geomean speedups (0 unless all passed) and the geomean's 95 % interval over the trials.
void score_report(EvalReport& report);

}  // namespace kda::eval
