// eval::detail::Session: one evaluation, its builds, its three runners and its phases; evaluator.h is
// the interface (evaluate, Screener). The session reads as its phases, one file each:
//   session.cc           builds, runners, layouts, checked calls, reference outputs, input loads
//   session_workload.cc  one workload: layout, correctness trials, probes, then timing; the run
//   session_timing.cc    the timed trials and the gates on them (re-checks, fresh-versus-repeat,
//                        GPU activity, host CPU time, roofline, launch attestation)
#pragma once

#include <sys/random.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "eval/arena.h"
#include "eval/evaluator.h"
#include "eval/gates.h"
#include "eval/input_digest.h"
#include "eval/inputs.h"
#include "eval/runner_client.h"
#include "eval/screen_cache.h"
#include "eval/solution_build.h"
#include "eval/torch_oracle.h"

namespace kda::eval::detail {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

inline uint64_t fresh_secret_seed() {
  uint64_t s = 0;
  if (::getrandom(&s, sizeof(s), 0) != static_cast<ssize_t>(sizeof(s)))
    s = static_cast<uint64_t>(Clock::now().time_since_epoch().count()) * 0x9E3779B97F4A7C15ull;
  return s;
}

// Poison and guard seeds: derived from the secret master, so a candidate cannot predict them.
enum Purpose : uint64_t {
  kInputsCheck = 1,
  kInputsA = 2,
  kInputsB = 3,
  kPoison = 4,
  kGuard = 5,
  kRecheck = 6,
  kDigestKey = 7,
  kProbe = 8,
  kInputsFresh = 9,
  kFreshAt = 10,
  kReloadAt = 11,
  kInputsWarm = 12,
  kInputsConfirm = 13,
  kStressSet = 14,
  kGraphSet = 15
};

// Accumulates wall time into a phase of the report (where the evaluator's time goes).
class PhaseTimer {
 public:
  explicit PhaseTimer(double& sink) : sink_(sink), t0_(Clock::now()) {}
  ~PhaseTimer() { sink_ += std::chrono::duration<double>(Clock::now() - t0_).count(); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  double& sink_;
  Clock::time_point t0_;
};

// Timed iterations whose outputs (and guards, inputs, poison) are checked: the last of each half
// (where a pointer- or fingerprint-keyed cache goes stale) and kRandomRechecks more drawn from the
// secret seed. A kernel that counts calls cannot tell which ones are checked, and one that cheats
// on the majority of calls (the only way to move a median) is caught with near certainty.
constexpr int kRandomRechecks = 4;

// The host-CPU-time gate (CUDA): a candidate whose calls burn more than this much CPU time in the
// calling thread, and more than kHostCpuRatio times the GPU time of its kernels, computes on the host
// (S3 behind a decoy kernel). Measured on the H200 (bench/results/h200, run 8): honest rmsnorm calls
// spend 0.47-1.40 ms of thread CPU time (launch, CUPTI, blocking sync) whatever the kernel's length;
// the S3b hack 9.8 and 64 ms on the two larger dev workloads.
constexpr double kHostCpuFloorMs = 5.0;
constexpr double kHostCpuRatio = 2.0;

// The secret schedules of a trial (rechecks, fresh sets, forced reloads) draw from one LCG each,
// seeded from the master: a draw in [0, bound).
inline uint64_t draw(uint64_t& state, uint64_t bound) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return (state >> 33) % bound;
}

inline std::vector<bool> checked_iterations(int n, uint64_t seed, int random_rechecks) {
  std::vector<bool> out(static_cast<size_t>(std::max(n, 0)), false);
  if (n <= 0) return out;
  const int half = n / 2;
  if (half > 0) out[static_cast<size_t>(half - 1)] = true;
  out[static_cast<size_t>(n - 1)] = true;
  uint64_t s = seed;
  for (int k = 0; k < random_rechecks; ++k) out[static_cast<size_t>(draw(s, static_cast<uint64_t>(n)))] = true;
  return out;
}

// A rejection: the verdict, a stable machine-readable reason code (docs/integrity-gates.md), the
// human explanation with its evidence, and the runner's log where there is one.
struct Failure {
  Verdict verdict;
  std::string reason;
  std::string message;
  std::string log;
  std::optional<GateId> gate;  // the integrity gate that rejected the candidate, if one did
};

// A runner error that says its own guard refused the candidate's operation (kSandboxRefused, from a
// Python solution's audit hook): the sandbox verdict with reason "sandbox_refused:<category>".
std::optional<Failure> sandbox_refusal(const std::string& message, const std::string& log);

// Fresh input sets at secret places (the host's fresh-versus-repeat test): two per trial (one per 25 iterations; 7-20 % of the host packs' evaluation at one
// per 10, bench/results/host_overhead.md): with one per trial its fresh calls were slower than the
// reloaded repeats in 75-89 % of pairs on honest kernels (timing drifts within a trial), close to
// the 90 % that convicts; with two, 0.43-0.56 on average (host rmsnorm, 10 evaluations x 8 workloads).
constexpr int kHostFreshPerTrial = 2;
constexpr int kHostFreshEvery = 25;

// Where in a trial's n timed iterations the host's fresh input sets are called, drawn from the secret
// seed; never the last call of either half (the A and B rechecks) nor B's first call (fresh by
// itself). Empty when the trial is too short to have such a place.
inline std::vector<int> fresh_iterations(int n, uint64_t seed) {
  const int half = n / 2;
  std::vector<int> places;
  for (int i = 0; i < n; ++i)
    if (i != half - 1 && i != half && i != n - 1) places.push_back(i);
  const size_t want = std::min(places.size(), static_cast<size_t>(std::max(kHostFreshPerTrial, n / kHostFreshEvery)));
  uint64_t s = seed;
  for (size_t k = 0; k < want; ++k)  // partial Fisher-Yates: only the places kept are drawn
    std::swap(places[k], places[k + static_cast<size_t>(draw(s, places.size() - k))]);
  places.resize(want);
  std::sort(places.begin(), places.end());
  return places;
}

// Host: twice as many forced reloads as fresh sets, the repeats the fresh calls are compared with:
// places that are neither fresh, nor right after one (a reload too, but a cache of one entry holds
// the fresh set's outputs there, so it misses), nor B's first call, nor the first call (after the
// warm-up on A).
inline std::set<int> forced_reloads(int n, const std::vector<int>& fresh, uint64_t seed) {
  const int half = n / 2;
  const std::set<int> f(fresh.begin(), fresh.end());
  std::vector<int> places;
  for (int i = 1; i < n; ++i)
    if (!f.contains(i) && !f.contains(i - 1) && i != half) places.push_back(i);
  std::set<int> out;
  uint64_t s = seed;
  while (out.size() < 2 * fresh.size() && out.size() < places.size())
    out.insert(places[static_cast<size_t>(draw(s, places.size()))]);
  return out;
}

// What an evaluation built for its candidate (Session::build_all's value): the candidate's library and
// the baseline's, with what the static gates and the build record say. The reference's library is the
// session's own (a screening session builds it once).
struct Builds {
  const task::Solution* candidate = nullptr;  // its sources: a Python solution's kernels are attested by them
  BuiltLibrary library;                       // the candidate's
  std::optional<BuiltLibrary> baseline;       // none without a baseline (screening, --no-baseline)
  std::string baseline_name;
  std::optional<Failure> blocked;  // compile error or static-gate violation: every workload fails
  json info;                       // the report's build record
  std::vector<Gate> static_gates;
};

// One workload's evaluation: what evaluate_workload makes and passes through the layout, the
// correctness trials, the probes, the stresses, the timing and the graph contract.
struct WorkloadRun {
  const Builds& builds;
  std::string uuid;
  ResolvedWorkload resolved;
  ArenaLayout layout;
  GateLedger gates;           // what each gate did on this workload
  GateLedger baseline_gates;  // the same checks on the baseline's calls (not reported)
  // Input sets the candidate has been called on: a call on any other is fresh.
  std::set<uint64_t> cand_called;
  // Which input set each runner holds, and the digests of its device-side inputs.
  struct Loaded {
    uint64_t id = 0;
    std::vector<Digest128> digests;
  };
  std::map<const RunnerClient*, Loaded> loaded;
  std::map<uint64_t, std::vector<Digest128>> set_digests;  // per input set: what the first runner generated
  bool host_values = true;                                 // materialise plain random inputs on the host too
  std::vector<double> reference_samples;                   // the reference's own latencies
};

// One evaluation session: the pack, the options, the reference's build and the three runners, which
// outlive a candidate in a screening session. A candidate's evaluation is run(candidate): its builds
// (build_all) and each workload's WorkloadRun are values passed from phase to phase.
class Session {
 public:
  Session(const task::TaskPack& pack, const EvalOptions& options) : pack_(pack), options_(options) {}

  Result<EvalReport> run(const task::Solution& candidate);

  // Screening (Screener): the session stays open across candidates. The reference is built once,
  // what `cache` keeps (its outputs, the input sets, the checks passed) is reused, and the candidate
  // runner loads each next library in place. The cache outlives the session's use of it.
  void enable_screening(ScreenCache* cache) { screen_ = cache; }
  // The next candidate: everything about the previous one is forgotten but the runners.
  Result<EvalReport> rerun(const task::Solution& candidate);

 private:
  void progress(const std::string& line) const {
    if (options_.progress) options_.progress(line);
  }
  // Builds the reference (unless kept), the baseline and the candidate. A reference or baseline that
  // does not build is the pack's error; a candidate that does not is Builds::blocked.
  Result<Builds> build_all(const task::Solution& candidate);
  // Starts every runner that is not alive (the torch reference first, on its own), overlapping
  // the others' start-up: all are spawned before any hello is awaited (loading the CUDA libraries),
  // and all are sent their load before any load reply is awaited (creating the CUDA contexts). A
  // reference or baseline that does not start is the harness's failure (harness_error_), a
  // candidate that does not, the candidate's.
  std::optional<Failure> ensure_runners(const Builds& builds);
  // Tells every live runner among `which` the workload's layout, all at once (device allocations).
  std::optional<Failure> send_layouts(const ArenaLayout& layout, std::initializer_list<RunnerClient*> which = {});
  WorkloadResult evaluate_workload(const Builds& builds, const task::Workload& w);
  // The correctness trials: fresh secret inputs per trial; on the first, the same call twice (determinism).
  std::optional<Failure> correctness_trials(WorkloadRun& run, WorkloadResult& wr);

  // Reference outputs for `inputs` (and the reference's own latency sample).
  // Shared and immutable: a screening session hands the same outputs to every candidate.
  using Outputs = ScreenCache::Outputs;
  Result<Outputs> reference_outputs(WorkloadRun& run, const MaterializedInputs& inputs);
  // One checked candidate call: guards, poison, input checksum, threads, outputs.
  std::optional<Failure> checked_call(WorkloadRun& run, RunnerClient& runner, const MaterializedInputs& inputs,
                                      uint64_t salt, std::vector<tensor::Tensor>* outputs, CallRequest call,
                                      double* elapsed_ms, json* reply_extra);
  std::optional<Failure> classify(const CallOutcome& o) const;
  // After a call: the inputs are as loaded (device-side ones by the runner's digests, the rest in
  // the arena), else input_mutated.
  std::optional<Failure> input_check(WorkloadRun& run, RunnerClient& runner, const MaterializedInputs& inputs,
                                     const json& got_digests, GateLedger& led);
  // Adds one call request's wall time, and the runner's own accounting of it, to the phases.
  void account_call(const CallOutcome& o) {
    phases_.call_wall_s += o.wall_s;
    ++phases_.calls;
    if (!o.reply.is_object()) return;
    const json extra = o.reply.value("extra", json::object());
    phases_.runner_pre_s += static_cast<double>(extra.value("pre_ns", int64_t{0})) / 1e9;
    phases_.runner_post_s += static_cast<double>(extra.value("post_ns", int64_t{0})) / 1e9;
  }
  std::optional<Failure> compare(const std::vector<tensor::Tensor>& cand, const std::vector<tensor::Tensor>& ref,
                                 const MaterializedInputs& inputs, std::optional<CheckResult>* check) const;
  // The timed trials and the gates on them (session_timing.cc): per trial its input sets, the
  // warm-up, the interleaved timed calls, the deferred CUPTI records, the host-CPU gate; then the
  // fresh-versus-repeat gate, the latencies, launch attestation and the roofline gate.
  std::optional<Failure> timing_phase(WorkloadRun& run, WorkloadResult& wr);
  enum class SetUse;
  struct TrialInputs;
  struct TrialCalls;
  struct TimingTotals;
  std::optional<Failure> timed_trial(WorkloadRun& run, int t, int n_iter, TimingTotals& tot, WorkloadResult& wr);
  // Host timing reads the runner processes as much as the code. On the 2-core host the naive
  // baseline against itself showed (i) process bias: one candidate process ran 97 x 1031 at 100-126 us
  // in all eight trials where its baseline ran 88-91 us (0.88x), and at 0.2 us pairs read 1.00x-1.16x,
  // each steady within its trials; (ii) trial modes: a trial runs fast or about 1.4x slower as a whole
  // (251 x 4099: 0.95 against 1.41 ms), the other side's same trial often not, so the mean over three
  // trials read 0.71x-1.15x there. So (not while screening, whose candidate runner is reused across
  // configurations) every host trial after the first runs in a fresh candidate and baseline runner
  // (new processes, arenas and load addresses: fresh_timing_runners; knock-out "fresh-runners", which
  // also resets whatever a candidate counts or keeps in its process); a host latency is each side's
  // median trial median (not the fastest: a candidate that memoizes or runs another configuration in
  // a minority of its processes would be reported at that process, and the fresh-versus-repeat gate,
  // pooled over the trials, sees too little of it); a workload whose trial medians on either side
  // spread more than kHostTrialSpread gets more trials, one at a time, up to kHostMaxTrials; and calls
  // shorter than kShortHostCallMs get kShortHostCallPairs trials from the start.
  static constexpr double kShortHostCallMs = 0.005;
  static constexpr int kShortHostCallPairs = 8;
  static constexpr double kHostTrialSpread = 1.10;
  static constexpr int kHostMaxTrials = 8;
  bool short_host_call(const TimingTotals& tot) const;
  bool host_trials_spread(const TimingTotals& tot) const;
  std::optional<Failure> fresh_timing_runners(WorkloadRun& run);
  std::optional<Failure> trial_inputs(WorkloadRun& run, int t, int n_iter, TrialInputs& in);
  std::optional<Failure> timed_calls(WorkloadRun& run, int t, int n_iter, TrialInputs& in, TrialCalls& calls,
                                     TimingTotals& tot);
  // One timed CUDA call's CUPTI summary: GPU activity and a kernel, or no_gpu_activity; its latency.
  std::optional<Failure> gpu_call_checks(WorkloadRun& run, const json& extra, int i, TrialCalls& calls,
                                         TimingTotals& tot);
  std::optional<Failure> merge_deferred_records(WorkloadRun& run, TrialCalls& calls, TimingTotals& tot);
  std::optional<Failure> host_cpu_gate(WorkloadRun& run, const TrialCalls& calls, int t, WorkloadResult& wr);
  std::optional<Failure> roofline_gate(WorkloadRun& run, WorkloadResult& wr);
  // One correctness trial per probe kind of task.toml [probes], on transformed inputs; the probes
  // gate records what they did, or why none applied to this workload.
  std::optional<Failure> probe_trials(WorkloadRun& run);
  // One correctness trial per stress of task.toml [inputs] stress, on the generator's draw so
  // transformed; a failure names the stress (stress_mismatch).
  std::optional<Failure> stress_trials(WorkloadRun& run);
  void import_audit_record(WorkloadRun& run);
  void baseline_error_budget(WorkloadRun& run, const MaterializedInputs& inputs, const std::vector<tensor::Tensor>& ref,
                             WorkloadResult& wr);
  // The deployment contract (CUDA, after timing): one call captured into a CUDA graph on fresh inputs,
  // then replayed on kGraphReplays more fresh sets written into the same buffers, every launch's
  // outputs checked. Required by task.toml [contract] graph = true (a failure rejects the workload);
  // otherwise its result is recorded (kda.graph_safe) and the candidate runner replaced after a failure.
  std::optional<Failure> graph_contract(WorkloadRun& run, WorkloadResult& wr);
  // The contract's launches, capture first; nullopt when all were correct.
  std::optional<Failure> graph_launches(WorkloadRun& run, int* nodes);
  // How the workload's inputs are drawn, for the correctness gate's record: what was fresh.
  std::string fresh_wording(const WorkloadRun& run) const;
  std::optional<Failure> attest_kernels(WorkloadRun& run, const std::set<std::string>& seen);
  std::optional<Failure> attest_python_kernels(WorkloadRun& run, const std::set<std::string>& seen);
  // kCollect: the runner's CUPTI summaries of the trial's deferred timed calls, by call seq.
  std::optional<Failure> collect_records(RunnerClient& runner, std::map<uint64_t, json>* by_seq);
  // Fresh-versus-repeat: a candidate whose repeated input sets run much faster than never-seen ones
  // remembers outputs (VIOLATION_MEMOIZATION); records the comparison in wr.kda either way.
  std::optional<Failure> memoization_gate(WorkloadRun& run, const FreshRepeat& fr, bool paired, WorkloadResult& wr);
  // Host: a suspicion of remembered outputs measured again before it convicts (session_timing.cc).
  std::optional<Failure> confirm_memoization(WorkloadRun& run, FreshRepeat& confirm);

  // Inputs of one (workload, trial, purpose): host values only where something needs them (always
  // with host_values, for inputs the evaluator transforms before they are uploaded).
  Result<MaterializedInputs> materialize(const WorkloadRun& run, uint64_t seed, bool host_values,
                                         std::string_view stress = {}) {
    PhaseTimer timer(phases_.materialize_s);
    auto in = materialize_inputs(pack_, run.resolved, seed, blobs_, host_values, generator_seed(), stress);
    if (in.ok()) {
      in->id = ++next_set_id_;
      in->seed = seed;
    }
    return in;
  }
  // Screening: an input set of this workload kept from an earlier candidate (a copy with a new id).
  std::optional<MaterializedInputs> kept_set(const WorkloadRun& run, uint64_t seed, ScreenCache::SetKind kind) {
    return screen_ ? screen_->set(run.uuid, seed, kind, &next_set_id_) : std::nullopt;
  }
  void keep_set(const WorkloadRun& run, const MaterializedInputs& in, ScreenCache::SetKind kind) {
    if (screen_) screen_->keep_set(run.uuid, in, kind);
  }
  // Several sets at once, over the host's cores (the structured generators of the contest packs
  // run on the host: 5-15 s of a contest pack's dev evaluation on the H200, run 26). The first is
  // made alone, so the safetensors blobs are in the cache before the others only read it.
  Result<std::vector<MaterializedInputs>> materialize_all(const WorkloadRun& run, const std::vector<uint64_t>& seeds);
  // Makes `in` the runner's current input set unless it already is: on the host (and for runners
  // without device-side inputs) by writing the arena, which the next call uploads whole
  // (*full_upload); otherwise with kPrepare, the runner generating the random inputs on the device.
  std::optional<Failure> load_inputs(WorkloadRun& run, RunnerClient& r, const MaterializedInputs& in,
                                     bool* full_upload);
  bool device_inputs(const RunnerClient& r) const {
    return cuda() && options_.device_inputs && r.has_capability("device_inputs");
  }
  uint64_t guard_seed(const WorkloadRun& run) const { return derive_seed(*options_.seed, run.uuid, 0, kGuard); }
  static std::vector<tensor::Tensor> read_outputs(const WorkloadRun& run, RunnerClient& r) {
    std::vector<tensor::Tensor> out;
    for (const auto& s : run.layout.outputs) out.push_back(r.arena().read(s));
    return out;
  }
  std::vector<std::string> output_names() const {
    std::vector<std::string> n;
    for (const auto& o : pack_.definition.outputs) n.push_back(o.name);
    return n;
  }
  double call_timeout() const { return options_.call_timeout_s.value_or(pack_.settings.call_timeout_s); }
  int trials() const { return options_.trials.value_or(pack_.settings.trials); }
  int warmup() const { return options_.warmup.value_or(pack_.settings.warmup); }
  int iterations() const { return options_.iterations.value_or(pack_.settings.iterations); }
  bool cuda() const { return pack_.backend == task::Backend::kCuda; }
  const char* backend_name() const { return cuda() ? "cuda" : "host"; }
  // False only in knock-out tests (EvalOptions::disabled_gates).
  bool gate_on(const char* name) const { return !options_.disabled_gates.contains(name); }
  // Knock-out "fresh-inputs": the pack's generator gets trial seed 0 (what the bench tools pass), so
  // generated inputs are the same in every set, trial and run, as before issue 17.
  std::optional<uint64_t> generator_seed() const {
    return gate_on("fresh-inputs") ? std::nullopt : std::optional<uint64_t>(0);
  }
  static uint64_t outputs_begin(const WorkloadRun& run) {
    return run.layout.outputs.empty() ? 0 : run.layout.outputs.front().offset - kGuardBytes;
  }
  static constexpr const char* kOff = "switched off (knock-out test)";
  static void gate_off(WorkloadRun& run, GateId id) { run.gates.skip(id, kOff); }

  // Screening only: what the Screener keeps across candidates (null in an official evaluation).
  bool screening() const { return screen_ != nullptr; }
  bool screen_first_look() const { return screen_ && screen_->first_look(); }
  // The checks this candidate's library passed on the same inputs earlier in the screening session.
  bool verified_before(const WorkloadRun& run, uint64_t seed, ScreenCache::Check check) const {
    return screen_ && screen_->verified(run.builds.library.library.string(), run.uuid, seed, check);
  }
  void mark_verified(const WorkloadRun& run, uint64_t seed, ScreenCache::Check check) {
    if (screen_) screen_->mark_verified(run.builds.library.library.string(), run.uuid, seed, check);
  }
  void count(int64_t ScreenStats::*counter) {
    if (screen_) ++(screen_->stats().*counter);
  }
  static constexpr const char* kVerifiedBefore =
      "passed by this candidate on the same inputs earlier in this screening session";
  static constexpr const char* kScreenRungZero =
      "screening's first look at a configuration checks correctness only; this check runs when it goes on";

  std::optional<Failure> baseline_failure(const WorkloadRun& run, const Failure& f) {
    harness_error_ =
        Status::internal(fmt::format("baseline '{}' failed on workload {} ({}): {}{}", run.builds.baseline_name,
                                     run.uuid, f.reason, f.message, f.log.empty() ? "" : "\n" + f.log));
    return Failure{Verdict::kRuntimeError, "harness_error", "the baseline failed", {}};
  }

  // The session's lifetime: what every candidate of a screening session shares.
  const task::TaskPack& pack_;
  const EvalOptions& options_;
  BuiltLibrary ref_lib_;
  RunnerClient ref_, base_, cand_;
  std::filesystem::path cand_loaded_;  // the library the live candidate runner calls
  json environment_ = json::object();  // what the first runner to load said of the machine
  BlobCache blobs_;
  uint64_t seq_ = 0;                     // call sequence numbers
  uint64_t next_set_id_ = 0;             // input set ids
  std::optional<Status> harness_error_;  // the reference or baseline failed: the evaluation is void
  ScreenCache* screen_ = nullptr;        // screening only (null in an official evaluation)
  // Where the evaluator's time goes, reset per candidate (EvalReport::phases, in_call_s).
  mutable EvalPhases phases_;
  double in_call_s_ = 0;
};

// The workloads `which` selects (all | dev | holdout | uuid[,uuid...], unique prefixes too); sets
// *error and returns {} when it names none or an unknown one.
std::vector<const task::Workload*> select_workloads(const task::TaskPack& pack, const std::string& which,
                                                    Status* error);

}  // namespace kda::eval::detail
