#include "eval/evaluator.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "eval/arena.h"
#include "eval/attestation.h"
#include "eval/input_digest.h"
#include "eval/inputs.h"
#include "eval/probes.h"
#include "eval/roofline.h"
#include "eval/runner_client.h"
#include "eval/solution_build.h"
#include "eval/static_gate.h"
#include "eval/topk_checker.h"
#include "eval/torch_oracle.h"
#include "util/parallel.h"
#include "util/strings.h"

namespace kda::eval {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

uint64_t fresh_secret_seed() {
  uint64_t s = 0;
  if (::getrandom(&s, sizeof(s), 0) != static_cast<ssize_t>(sizeof(s)))
    s = static_cast<uint64_t>(Clock::now().time_since_epoch().count()) * 0x9E3779B97F4A7C15ull;
  return s;
}

// Poison and guard seeds: derived from the secret master, so a candidate cannot predict them.
enum Purpose : uint64_t {
  kInputsCheck = 1, kInputsA = 2, kInputsB = 3, kPoison = 4, kGuard = 5, kRecheck = 6, kDigestKey = 7, kProbe = 8,
  kInputsFresh = 9, kFreshAt = 10, kReloadAt = 11, kInputsWarm = 12
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
uint64_t draw(uint64_t& state, uint64_t bound) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return (state >> 33) % bound;
}

std::vector<bool> checked_iterations(int n, uint64_t seed, int random_rechecks) {
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

// Fresh input sets at secret places (the host's fresh-versus-repeat test): two per trial (one per 25 iterations; 7-20 % of the host packs' evaluation at one
// per 10, bench/results/host_overhead.md): with one per trial its fresh calls were slower than the
// reloaded repeats in 75-89 % of pairs on honest kernels (timing drifts within a trial), close to
// the 90 % that convicts; with two, 0.43-0.56 on average (host rmsnorm, 10 evaluations x 8 workloads).
constexpr int kHostFreshPerTrial = 2;
constexpr int kHostFreshEvery = 25;
// A screening session remembers reference outputs and input sets up to this many bytes together
// (then computes the rest per candidate): the largest CUDA rmsnorm workload's sets take 64 MiB each.
constexpr uint64_t kScreenBytes = uint64_t{8} << 30;

// Where in a trial's n timed iterations the host's fresh input sets are called, drawn from the secret
// seed; never the last call of either half (the A and B rechecks) nor B's first call (fresh by
// itself). Empty when the trial is too short to have such a place.
std::vector<int> fresh_iterations(int n, uint64_t seed) {
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
std::set<int> forced_reloads(int n, const std::vector<int>& fresh, uint64_t seed) {
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

// One evaluation: owns the builds and the three runners.
class Session {
 public:
  Session(const task::TaskPack& pack, const task::Solution& candidate, const EvalOptions& options)
      : pack_(pack), candidate_(&candidate), options_(options) {}

  Result<EvalReport> run();

  // Screening (Screener): the session stays open across candidates. The reference is built once,
  // its outputs are remembered per input set (the master seed is fixed for the session, so every
  // candidate meets the same sets), and the candidate runner loads each next library in place.
  void enable_screening() { screening_ = true; }
  void set_screen_checks(ScreenChecks c) { screen_checks_ = c; }
  // The next candidate: everything about the previous one is forgotten but the runners.
  Result<EvalReport> rerun(const task::Solution& candidate);
  ScreenStats screen_stats() const { return screen_stats_; }

 private:
  void progress(const std::string& line) const {
    if (options_.progress) options_.progress(line);
  }
  Status build_all();
  // Starts every runner that is not alive (the torch reference first, on its own), overlapping
  // the others' start-up: all are spawned before any hello is awaited (loading the CUDA libraries),
  // and all are sent their load before any load reply is awaited (creating the CUDA contexts). A
  // reference or baseline that does not start is the harness's failure (harness_error_), a
  // candidate that does not, the candidate's.
  std::optional<Failure> ensure_runners();
  // Tells every live runner the workload's layout, the three at once (device allocations).
  std::optional<Failure> send_layouts();
  WorkloadResult evaluate_workload(const task::Workload& w);

  // Reference outputs for `inputs` (and the reference's own latency sample).
  // Shared and immutable: a screening session hands the same outputs to every candidate.
  using Outputs = std::shared_ptr<const std::vector<tensor::Tensor>>;
  Result<Outputs> reference_outputs(const MaterializedInputs& inputs);
  // One checked candidate call: guards, poison, input checksum, threads, outputs.
  std::optional<Failure> checked_call(RunnerClient& runner, const MaterializedInputs& inputs, uint64_t salt,
                                      std::vector<tensor::Tensor>* outputs, json call, double* elapsed_ms,
                                      json* reply_extra);
  std::optional<Failure> classify(const CallOutcome& o) const;
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
  std::optional<Failure> timing_phase(WorkloadResult& wr);
  // One correctness trial per probe kind of task.toml [probes], on transformed inputs; the probes
  // gate records what they did, or why none applied to this workload.
  std::optional<Failure> probe_trials();
  // How the workload's inputs are drawn, for the correctness gate's record: what was fresh.
  std::string fresh_wording() const;
  std::optional<Failure> attest_kernels(const std::set<std::string>& seen);
  // kCollect: the runner's CUPTI summaries of the trial's deferred timed calls, by call seq.
  std::optional<Failure> collect_records(RunnerClient& runner, std::map<uint64_t, json>* by_seq);
  // Fresh-versus-repeat: a candidate whose repeated input sets run much faster than never-seen ones
  // remembers outputs (VIOLATION_MEMOIZATION); records the comparison in wr.kda either way.
  std::optional<Failure> memoization_gate(const FreshRepeat& fr, bool paired, WorkloadResult& wr);

  // Inputs of one (workload, trial, purpose): host values only where something needs them (always
  // with host_values, for inputs the evaluator transforms before they are uploaded).
  Result<MaterializedInputs> materialize(uint64_t seed, bool host_values) {
    PhaseTimer timer(phases_.materialize_s);
    auto in = materialize_inputs(pack_, resolved_, seed, blobs_, host_values, generator_seed());
    if (in.ok()) {
      in->id = ++next_set_id_;
      in->seed = seed;
    }
    return in;
  }
  // Screening: input sets kept by (workload, seed, kind) within the session's byte budget, shared
  // with the reference outputs (the same sets recur for every candidate). A kept set comes back as
  // a copy with a new id: to the runners it is a set like any other.
  enum SetKind : int { kRawSet = 0, kProbeSet = 1 };
  std::optional<MaterializedInputs> kept_set(uint64_t seed, SetKind kind) {
    if (!screening_) return std::nullopt;
    auto it = set_cache_.find({current_uuid_, seed, kind});
    if (it == set_cache_.end()) return std::nullopt;
    ++screen_stats_.input_sets_reused;
    MaterializedInputs copy = *it->second;
    copy.id = ++next_set_id_;
    return copy;
  }
  // Takes the tensors' bytes from the session's budget; false (nothing taken) when they do not fit.
  bool reserve_screen_bytes(const std::vector<tensor::Tensor>& tensors) {
    uint64_t bytes = 0;
    for (const auto& t : tensors) bytes += static_cast<uint64_t>(t.nbytes());
    if (screen_bytes_ + bytes > kScreenBytes) return false;
    screen_bytes_ += bytes;
    return true;
  }
  void keep_set(const MaterializedInputs& in, SetKind kind) {
    if (!screening_ || !reserve_screen_bytes(in.tensors)) return;
    set_cache_.emplace(std::make_tuple(current_uuid_, in.seed, static_cast<int>(kind)),
                       std::make_shared<const MaterializedInputs>(in));
  }
  // Several sets at once, over the host's cores (the structured generators of the contest packs
  // run on the host: 5-15 s of a contest pack's dev evaluation on the H200, run 26). The first is
  // made alone, so the safetensors blobs are in the cache before the others only read it.
  Result<std::vector<MaterializedInputs>> materialize_all(const std::vector<uint64_t>& seeds);
  // Makes `in` the runner's current input set unless it already is: on the host (and for runners
  // without device-side inputs) by writing the arena, which the next call uploads whole
  // (*full_upload); otherwise with kPrepare, the runner generating the random inputs on the device.
  std::optional<Failure> load_inputs(RunnerClient& r, const MaterializedInputs& in, bool* full_upload);
  bool device_inputs(const RunnerClient& r) const {
    return cuda() && options_.device_inputs && r.has_capability("device_inputs");
  }
  uint64_t guard_seed() const { return derive_seed(*options_.seed, current_uuid_, 0, kGuard); }
  std::vector<tensor::Tensor> read_outputs(RunnerClient& r) {
    std::vector<tensor::Tensor> out;
    for (const auto& s : layout_.outputs) out.push_back(r.arena().read(s));
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
  bool cuda() const { return report_.backend == "cuda"; }
  // False only in knock-out tests (EvalOptions::disabled_gates).
  bool gate_on(const char* name) const { return !options_.disabled_gates.contains(name); }
  // Knock-out "fresh-inputs": the pack's generator gets trial seed 0 (what the bench tools pass), so
  // generated inputs are the same in every set, trial and run, as before issue 17.
  std::optional<uint64_t> generator_seed() const {
    return gate_on("fresh-inputs") ? std::nullopt : std::optional<uint64_t>(0);
  }
  uint64_t outputs_begin() const { return layout_.outputs.empty() ? 0 : layout_.outputs.front().offset - kGuardBytes; }

  const task::TaskPack& pack_;
  const task::Solution* candidate_;
  const EvalOptions& options_;
  EvalReport report_;
  BuiltLibrary ref_lib_, base_lib_, cand_lib_;
  bool have_baseline_ = false;
  std::optional<Failure> candidate_blocked_;  // compile error or static-gate violation: every workload fails
  RunnerClient ref_, base_, cand_;
  ArenaLayout layout_;
  ResolvedWorkload resolved_;
  BlobCache blobs_;
  uint64_t seq_ = 0;
  std::string current_uuid_;
  std::vector<double> reference_samples_;
  std::optional<Status> harness_error_;  // the reference or baseline failed: the evaluation is void
  // What each gate did on the current workload (reset per workload).
  GateLedger gates_;
  // Input sets the candidate has been called on in this workload: a call on any other is fresh.
  std::set<uint64_t> cand_called_;
  GateLedger baseline_gates_;  // the same checks on the baseline's calls (not reported)
  static constexpr const char* kOff = "switched off (knock-out test)";
  void gate_off(GateId id) { gates_.skip(id, kOff); }
  // Which input set each runner holds, and the digests of its device-side inputs.
  struct Loaded {
    uint64_t id = 0;
    std::vector<Digest128> digests;
  };
  std::map<const RunnerClient*, Loaded> loaded_;
  std::map<uint64_t, std::vector<Digest128>> set_digests_;  // per input set: what the first runner generated
  uint64_t next_set_id_ = 0;
  bool host_values_ = true;  // materialise plain random inputs on the host too
  mutable EvalPhases phases_;
  // Screening only.
  bool screening_ = false;
  ScreenChecks screen_checks_ = ScreenChecks::kAll;
  // Screening: the checks a candidate passed, by (built library, workload, inputs seed, check): a
  // later rung re-timing the same configuration does not repeat them on the same inputs.
  std::set<std::tuple<std::string, std::string, uint64_t, int>> verified_;
  enum CheckKind : int { kCheckCorrectness = 0, kCheckDeterminism = 1, kCheckProbe = 2 };
  bool verified_before(uint64_t seed, CheckKind kind) const {
    return screening_ && verified_.contains({cand_lib_.library.string(), current_uuid_, seed, kind});
  }
  void mark_verified(uint64_t seed, CheckKind kind) {
    if (screening_) verified_.insert({cand_lib_.library.string(), current_uuid_, seed, kind});
  }
  static constexpr const char* kVerifiedBefore = "passed by this candidate on the same inputs earlier in this screening session";
  static constexpr const char* kScreenRungZero =
      "screening's first look at a configuration checks correctness only; this check runs when it goes on";
  std::filesystem::path cand_loaded_;  // the library the live candidate runner calls
  std::map<std::pair<std::string, uint64_t>, Outputs> ref_cache_;  // (workload, input set seed)
  std::map<std::tuple<std::string, uint64_t, int>, std::shared_ptr<const MaterializedInputs>> set_cache_;
  uint64_t screen_bytes_ = 0;  // held by both caches
  std::map<std::pair<std::string, uint64_t>, std::string> probe_what_;  // what each kept probe set's transforms were
  ScreenStats screen_stats_;

  std::optional<Failure> baseline_failure(const Failure& f) {
    harness_error_ = Status::internal(fmt::format("baseline '{}' failed on workload {} ({}): {}{}", report_.baseline_name,
                                                  current_uuid_, f.reason, f.message, f.log.empty() ? "" : "\n" + f.log));
    return Failure{Verdict::kRuntimeError, "harness_error", "the baseline failed", {}};
  }
};

Status Session::build_all() {
  BuildSettings bs{.cuda_arch = options_.cuda_arch};
  if (!screening_ || !ref_lib_.ok) {
    progress("building reference");
    KDA_ASSIGN_OR_RETURN(ref_lib_, build_solution(pack_.reference, bs));
  }
  if (!ref_lib_.ok)
    return Status::bad_input(fmt::format("{}: the reference solution does not build:\n{}", pack_.root.string(), ref_lib_.log));
  const task::Solution* base = !options_.with_baseline ? nullptr
                               : options_.baseline   ? &*options_.baseline
                                                     : pack_.baseline();
  if (base != nullptr) {
    report_.baseline_name = options_.baseline ? options_.baseline->name : pack_.baseline_name;
    progress("building baseline " + report_.baseline_name);
    KDA_ASSIGN_OR_RETURN(base_lib_, build_solution(*base, bs));
    if (!base_lib_.ok)
      return Status::bad_input(fmt::format("{}: baseline '{}' does not build:\n{}", pack_.root.string(), report_.baseline_name,
                                           base_lib_.log));
    have_baseline_ = true;
  }
  progress("building candidate " + candidate_->name);
  KDA_ASSIGN_OR_RETURN(cand_lib_, build_solution(*candidate_, bs));
  report_.build = {{"candidate", cand_lib_.info}, {"reference", ref_lib_.info}};
  if (have_baseline_) report_.build["baseline"] = base_lib_.info;
  if (!cand_lib_.ok) {
    candidate_blocked_ = Failure{Verdict::kCompileError, "compile_error",
                                 "the candidate does not build: " + build_failure_summary(cand_lib_), cand_lib_.log};
    return {};
  }
  report_.static_gates = static_gates(cand_lib_, pack_.settings);
  for (const auto& g : report_.static_gates) {
    if (g.failed() && gate_on("import-audit")) {
      candidate_blocked_ = Failure{Verdict::kForbiddenImport, g.reason, g.name + ": " + g.detail, {}, GateId::kImportAudit};
      break;
    }
  }
  return {};
}

std::optional<Failure> Session::ensure_runners() {
  auto harness = [this](const std::string& message) {
    harness_error_ = Status::internal(message);
    return Failure{Verdict::kRuntimeError, "harness_error", message, {}};
  };
  PhaseTimer timer(phases_.runners_s);
  if (!ref_.alive() && options_.reference == "torch") {
    auto r = start_torch_reference(options_.runner_binary, report_.backend, pack_.root / "definition.json",
                                   std::max(120.0, call_timeout()));
    if (!r.ok()) return harness("torch reference: " + r.status().message());
    ref_ = std::move(*r);
  }
  struct Start {
    RunnerClient* slot;
    RunnerRole role;
    const BuiltLibrary* lib;
    std::optional<RunnerClient> client;
    std::string error;
  };
  std::vector<Start> starts;
  if (!ref_.alive()) starts.push_back({&ref_, RunnerRole::kReference, &ref_lib_, {}, {}});
  if (have_baseline_ && !base_.alive()) starts.push_back({&base_, RunnerRole::kBaseline, &base_lib_, {}, {}});
  const double load_timeout = std::max(60.0, call_timeout());
  // Screening: a live candidate runner takes the next candidate's library in place; one that
  // cannot is replaced.
  if (screening_ && cand_.alive() && cand_loaded_ != cand_lib_.library) {
    auto o = cand_.reload(cand_lib_.library, cand_lib_.symbol, load_timeout);
    if (o.kind == CallOutcome::Kind::kOk) {
      cand_loaded_ = cand_lib_.library;
      ++screen_stats_.reloads;
    } else {
      cand_.stop();
    }
  }
  if (!cand_.alive()) starts.push_back({&cand_, RunnerRole::kCandidate, &cand_lib_, {}, {}});
  for (Start& st : starts) {
    RunnerOptions ro{.runner_binary = options_.runner_binary,
                     .backend = report_.backend,
                     .role = st.role,
                     .sandbox = options_.sandbox && st.role != RunnerRole::kReference};
    // The build cache: where every later candidate's library comes from.
    if (screening_ && st.role == RunnerRole::kCandidate) ro.reload_root = st.lib->library.parent_path().parent_path();
    auto r = RunnerClient::spawn(ro);
    if (!r.ok()) {
      st.error = r.status().message();
      continue;
    }
    st.client.emplace(std::move(*r));
  }
  for (Start& st : starts) {
    if (!st.client) continue;
    if (Status h = st.client->await_hello(); !h.ok()) {
      st.error = h.message();
      st.client.reset();
      continue;
    }
    st.client->send_load(st.lib->library, st.lib->symbol, load_timeout);
  }
  for (Start& st : starts) {
    if (!st.client) continue;
    auto o = st.client->receive();
    if (o.kind == CallOutcome::Kind::kOk) {
      if (report_.environment.empty() && o.reply.contains("environment") && o.reply["environment"].is_object())
        report_.environment = o.reply["environment"];
      *st.slot = std::move(*st.client);
      if (st.role == RunnerRole::kCandidate) {
        cand_loaded_ = st.lib->library;
        ++screen_stats_.candidate_runner_starts;
      }
      continue;
    }
    st.error = fmt::format("{} runner could not load {}: {}{}", role_name(st.role), st.lib->library.string(), o.message,
                           o.log.empty() ? "" : "\n" + o.log);
  }
  for (const Start& st : starts)
    if (!st.error.empty() && st.role != RunnerRole::kCandidate) return harness(st.error);
  for (const Start& st : starts)
    if (!st.error.empty()) return Failure{Verdict::kRuntimeError, "runtime_error", st.error, {}};
  return std::nullopt;
}

std::optional<Failure> Session::send_layouts() {
  PhaseTimer timer(phases_.layout_s);
  std::vector<RunnerClient*> live;
  for (RunnerClient* r : {&ref_, &base_, &cand_}) {
    if (!r->alive()) continue;
    r->send_layout(layout_, 120);
    live.push_back(r);
  }
  std::optional<Failure> first;
  for (RunnerClient* r : live) {
    auto f = classify(r->receive());  // every reply is read, so no runner is left mid-request
    if (!f || first) continue;
    if (r != &cand_)
      harness_error_ = Status::internal(fmt::format("{} runner: {}", r == &ref_ ? "reference" : "baseline", f->message));
    first = f;
  }
  return first;
}

std::optional<Failure> Session::classify(const CallOutcome& o) const {
  switch (o.kind) {
    case CallOutcome::Kind::kOk: return std::nullopt;
    case CallOutcome::Kind::kTimeout: return Failure{Verdict::kTimeout, "timeout", o.message, o.log};
    case CallOutcome::Kind::kCrashed:
      if (o.signal == SIGSYS)
        return Failure{Verdict::kSandboxViolation, "sandbox_killed", "runner killed by SIGSYS: a forbidden system call (fork, exec, "
                                                   "ptrace, process_vm_*) was attempted", o.log};
      return Failure{Verdict::kRuntimeError, "runtime_error", o.message, o.log};
    case CallOutcome::Kind::kFailed: return Failure{Verdict::kRuntimeError, "runtime_error", o.message, o.log};
  }
  return std::nullopt;
}

Result<Session::Outputs> Session::reference_outputs(const MaterializedInputs& inputs) {
  const std::pair<std::string, uint64_t> key{current_uuid_, inputs.seed};
  if (screening_) {
    if (auto it = ref_cache_.find(key); it != ref_cache_.end()) {
      ++screen_stats_.reference_reused;
      return it->second;
    }
  }
  bool full_upload = false;
  if (auto f = load_inputs(ref_, inputs, &full_upload)) {
    if (!harness_error_)
      harness_error_ = Status::internal(fmt::format("the reference runner could not take the inputs of workload {}: {}",
                                                    current_uuid_, f->message));
    return *harness_error_;
  }
  json call{{"flush", true}, {"upload", true}, {"upload_from", full_upload ? 0 : outputs_begin()}, {"download", true},
            {"timed", true}};
  if (device_inputs(ref_)) {  // poisoned on the device: nothing to upload
    json poison = json::array();
    for (size_t k = 0; k < layout_.outputs.size(); ++k) poison.push_back({k, ++seq_});
    call["poison"] = std::move(poison);
    call["upload"] = false;
  } else {
    for (const auto& s : layout_.outputs) ref_.arena().poison(s, ++seq_);
  }
  call["seq"] = ++seq_;
  auto o = ref_.call(call, std::max(call_timeout(), 600.0));
  account_call(o);
  if (o.kind != CallOutcome::Kind::kOk) {
    harness_error_ = Status::internal(fmt::format("the reference failed on workload {}: {}{}", current_uuid_, o.message,
                                                  o.log.empty() ? "" : "\n" + o.log));
    return *harness_error_;
  }
  reference_samples_.push_back(static_cast<double>(o.reply.value("elapsed_ns", int64_t{0})) / 1e6);
  report_.in_call_s += static_cast<double>(o.reply.value("elapsed_ns", int64_t{0})) / 1e9;
  PhaseTimer timer(phases_.verify_call_s);
  auto out = std::make_shared<const std::vector<tensor::Tensor>>(read_outputs(ref_));
  ++screen_stats_.reference_calls;
  if (screening_ && reserve_screen_bytes(*out)) ref_cache_.emplace(key, out);
  return out;
}

std::optional<Failure> Session::checked_call(RunnerClient& runner, const MaterializedInputs& inputs, uint64_t salt,
                                             std::vector<tensor::Tensor>* outputs, json call, double* elapsed_ms,
                                             json* reply_extra) {
  // One secret guard pattern per workload: on CUDA, calls that upload only the outputs leave the
  // device copy of the input guards as they were, so the pattern must not change between calls.
  const uint64_t guard_seed = this->guard_seed();
  // Only the candidate's checks are its gates' record (the baseline's failures are the harness's).
  GateLedger& led = &runner == &cand_ ? gates_ : baseline_gates_;
  SharedArena& arena = runner.arena();
  const bool download = call.value("download", true);
  bool fresh_inputs = false;
  if (auto f = load_inputs(runner, inputs, &fresh_inputs)) return f;
  call["upload_from"] = fresh_inputs ? 0 : outputs_begin();
  // Output i's poison for this call: written before it, looked for after it (unwritten elements).
  auto poison_seed = [&](size_t i) { return derive_seed(*options_.seed, current_uuid_, salt * 131 + i, kPoison); };
  // On the host the candidate works in the shared arena itself, so guards are refilled only with
  // fresh inputs: damage done by an unchecked call stays visible until the next checked one.
  int threads_before = 0;
  {
    PhaseTimer timer(phases_.prepare_call_s);
    if (device_inputs(runner)) {
      // Outputs are poisoned on the device from the same seeded blocks, and nothing is uploaded: the
      // guard bands have lived there since kPrepare.
      json poison = json::array();
      for (size_t i = 0; i < layout_.outputs.size(); ++i) poison.push_back({i, poison_seed(i)});
      call["poison"] = std::move(poison);
      call["upload"] = false;
    } else {
      if (fresh_inputs || cuda()) arena.fill_guards(layout_, guard_seed);
      for (size_t i = 0; i < layout_.outputs.size(); ++i) arena.poison(layout_.outputs[i], poison_seed(i));
    }
    threads_before = runner.thread_count();
  }
  call["seq"] = ++seq_;
  auto o = runner.call(call, call_timeout());
  account_call(o);
  // Driver functions fetched by name that are not tensor-map encoders: refused by the runner, and a
  // violation whatever the call then did (src/runner/entry_point_guard.h).
  if (o.reply.is_object()) {
    const json refused = o.reply.value("extra", json::object()).value("driver_entry_points_refused", json::array());
    if (refused.is_array() && !refused.empty())
      return Failure{Verdict::kForbiddenImport, "forbidden_import:driver_entry_point",
                     "the call fetched driver function(s) by name that only tensor-map encoding may fetch: " +
                         refused.dump(), {}, GateId::kImportAudit};
  }
  if (auto f = classify(o)) return f;
  const auto elapsed_ns = o.reply.value("elapsed_ns", int64_t{0});
  report_.in_call_s += static_cast<double>(elapsed_ns) / 1e9;
  if (elapsed_ms) *elapsed_ms = static_cast<double>(elapsed_ns) / 1e6;
  if (reply_extra) *reply_extra = o.reply.value("extra", json::object());
  // The runner's clock is a claim: it cannot exceed the evaluator's own clock around the request.
  if (!gate_on("timing-clock")) {
    led.skip(GateId::kTimingClock, kOff);
  } else if (static_cast<double>(elapsed_ns) / 1e9 > o.wall_s + 1e-3) {
    return Failure{Verdict::kTimingInconsistent, "timing_inconsistent",
                   fmt::format("runner reported {:.3f} ms but the request took {:.3f} ms", elapsed_ns / 1e6, o.wall_s * 1e3),
                   {}, GateId::kTimingClock};
  } else {
    led.ran(GateId::kTimingClock);
  }
  const int threads_after = runner.thread_count();
  if (!gate_on("threads")) {
    led.skip(GateId::kThreads, kOff);
  } else if (pack_.settings.threads) {
    led.skip(GateId::kThreads, "task policy allows threads (threads = true)");
  } else if (threads_before <= 0 || threads_after <= 0) {
    led.skip(GateId::kThreads, "the runner's thread count could not be read");
  } else if (threads_after > threads_before) {
    return Failure{Verdict::kThreadLeak, "thread_count_changed",
                   fmt::format("runner had {} threads before the call and {} after: work may continue after return "
                               "(task policy: threads = false)", threads_before, threads_after), {}, GateId::kThreads};
  } else {
    led.ran(GateId::kThreads);
  }
  if (!download) return std::nullopt;
  // {"download_outputs": false}: guard bands and inputs only (the runner copies no outputs back).
  const bool with_outputs = call.value("download_outputs", true);
  PhaseTimer timer(phases_.verify_call_s);
  if (!gate_on("guard-bands")) {
    led.skip(GateId::kGuardBands, kOff);
  } else if (auto bad = arena.damaged_guards(layout_, guard_seed); !bad.empty()) {
    std::string names;
    for (const auto& b : bad) names += (names.empty() ? "" : ", ") + b;
    return Failure{Verdict::kOutOfBounds, "out_of_bounds", "guard band written around: " + names, {}, GateId::kGuardBands};
  } else {
    led.ran(GateId::kGuardBands);
  }
  // Inputs are compared with the evaluator's own copy; calls in between that did not re-upload
  // them leave any mutation in place, so a checked call sees what every earlier call did.
  // Device-side inputs are digested by the runner after the call under the evaluation's secret key;
  // scalars (passed as host values) and host-side inputs are compared in the arena.
  const bool by_digest = device_inputs(runner);
  const auto& want = loaded_[&runner].digests;
  const json got_digests = o.reply.value("extra", json::object()).value("input_digests", json::array());
  std::string mutated;
  for (size_t i = 0; i < layout_.inputs.size(); ++i) {
    bool same;
    if (by_digest && !layout_.inputs[i].scalar)
      same = i < want.size() && i < got_digests.size() && got_digests[i].is_array() && got_digests[i].size() == 2 &&
             got_digests[i][0].get<uint64_t>() == want[i].lo && got_digests[i][1].get<uint64_t>() == want[i].hi;
    else
      same = arena.equals(layout_.inputs[i], inputs.tensors[i]);
    if (!same) mutated += (mutated.empty() ? "" : ", ") + layout_.inputs[i].name;
  }
  if (!gate_on("input-check")) {
    led.skip(GateId::kInputCheck, kOff);
  } else if (!mutated.empty()) {
    return Failure{Verdict::kInputMutated, "input_mutated", "the call modified input(s): " + mutated, {}, GateId::kInputCheck};
  } else {
    led.ran(GateId::kInputCheck);
  }
  if (!with_outputs) return std::nullopt;
  std::vector<tensor::Tensor> got = read_outputs(runner);
  if (!gate_on("unwritten")) led.skip(GateId::kUnwritten, kOff);
  for (size_t k = 0; k < got.size() && gate_on("unwritten"); ++k) {
    // Elements whose bits still equal the poison written before the call.
    int64_t left = count_poisoned(layout_.outputs[k].dtype, poison_seed(k), got[k].data(), static_cast<uint64_t>(got[k].nbytes()));
    if (left > 0)
      return Failure{Verdict::kIncorrectNumerical, "unwritten_output",
                     fmt::format("{} of {} elements of output '{}' were never written (the poison is still there)", left,
                                 got[k].numel(), layout_.outputs[k].name), {}, GateId::kUnwritten};
  }
  if (gate_on("unwritten")) led.ran(GateId::kUnwritten);
  if (outputs) *outputs = std::move(got);
  return std::nullopt;
}

std::optional<Failure> Session::compare(const std::vector<tensor::Tensor>& cand, const std::vector<tensor::Tensor>& ref,
                                        const MaterializedInputs& inputs, std::optional<CheckResult>* check) const {
  PhaseTimer timer(phases_.check_s);
  Tolerance tol{pack_.settings.atol, pack_.settings.rtol, pack_.settings.matched_ratio};
  CheckResult c = pack_.settings.checker == task::Checker::kTopkIndices
                      ? check_topk_indices(pack_.definition, inputs.tensors, cand, ref, tol)
                      : check_default(output_names(), cand, ref, tol, pack_.settings.compare_outputs);
  bool pass = c.verdict == CheckVerdict::kPass;
  Verdict v = c.verdict == CheckVerdict::kIncorrectShape   ? Verdict::kIncorrectShape
              : c.verdict == CheckVerdict::kIncorrectDtype ? Verdict::kIncorrectDtype
                                                           : Verdict::kIncorrectNumerical;
  std::string msg = c.message;
  std::string reason = v == Verdict::kIncorrectShape   ? "incorrect_shape"
                       : v == Verdict::kIncorrectDtype ? "incorrect_dtype"
                                                       : "incorrect_numerical";
  if (check && (!check->has_value() || !pass || c.max_abs > (*check)->max_abs)) *check = std::move(c);
  if (pass) return std::nullopt;
  return Failure{v, reason, msg, {}};
}

Result<std::vector<MaterializedInputs>> Session::materialize_all(const std::vector<uint64_t>& seeds) {
  std::vector<MaterializedInputs> out;
  if (seeds.empty()) return out;
  PhaseTimer timer(phases_.materialize_s);
  std::vector<std::optional<Result<MaterializedInputs>>> made(seeds.size());
  std::vector<bool> kept(seeds.size(), false);
  for (size_t i = 0; i < seeds.size(); ++i)
    if (auto k = kept_set(seeds[i], kRawSet)) {
      made[i] = std::move(*k);
      kept[i] = true;
    }
  std::vector<std::pair<uint64_t, uint64_t>> todo;
  for (uint64_t i = 0; i < seeds.size(); ++i)
    if (!kept[i]) todo.emplace_back(i, i + 1);
  auto make = [&](uint64_t i) {
    made[i] = materialize_inputs(pack_, resolved_, seeds[i], blobs_, host_values_, generator_seed());
  };
  if (!todo.empty()) make(todo.front().first);
  if (todo.size() > 1)
    util::run_ranges(std::vector<std::pair<uint64_t, uint64_t>>(todo.begin() + 1, todo.end()),
                     [&](size_t, uint64_t begin, uint64_t) { make(begin); });
  for (size_t i = 0; i < made.size(); ++i) {
    if (!made[i]->ok()) return made[i]->status();
    out.push_back(std::move(**made[i]));
    if (kept[i]) continue;
    out.back().id = ++next_set_id_;
    out.back().seed = seeds[i];
    keep_set(out.back(), kRawSet);
  }
  return out;
}

std::optional<Failure> Session::load_inputs(RunnerClient& r, const MaterializedInputs& in, bool* full_upload) {
  Loaded& loaded = loaded_[&r];
  *full_upload = false;
  if (loaded.id == in.id) return std::nullopt;
  loaded = {};
  SharedArena& arena = r.arena();
  if (!device_inputs(r)) {
    if (!in.host_values) return Failure{Verdict::kRuntimeError, "harness_error", "inputs have no host values", {}};
    PhaseTimer timer(phases_.load_s);
    for (size_t i = 0; i < layout_.inputs.size(); ++i) arena.write(layout_.inputs[i], in.tensors[i]);
    loaded.id = in.id;
    *full_upload = true;
    return std::nullopt;
  }
  PhaseTimer timer(phases_.load_s);
  json specs = json::array();
  for (size_t i = 0; i < layout_.inputs.size(); ++i) {
    const bool random = in.plain_random[i];
    if (!random) arena.write(layout_.inputs[i], in.tensors[i]);
    json spec{{"random", random}};
    if (random) {
      spec["seed"] = in.random[i].seed;
      spec["stream"] = in.random[i].stream;
      if (in.random[i].fingerprint_seed) spec["fingerprint_seed"] = *in.random[i].fingerprint_seed;
    }
    specs.push_back(std::move(spec));
  }
  arena.fill_guards(layout_, guard_seed());
  const uint64_t key = derive_seed(*options_.seed, current_uuid_, 0, kDigestKey);
  auto o = r.prepare(json{{"inputs", specs}, {"digest_key", key}}, std::max(60.0, call_timeout()));
  if (auto f = classify(o)) return f;
  const json digests = o.reply.value("digests", json::array());
  if (digests.size() != layout_.inputs.size())
    return Failure{Verdict::kRuntimeError, "harness_error", "the runner returned no digest per input", {}};
  for (const auto& d : digests) loaded.digests.push_back({d.at(0).get<uint64_t>(), d.at(1).get<uint64_t>()});
  // Every runner must hold the same inputs: the first to generate a set fixes its digests, and where
  // the evaluator has host values (the topk checker reads them) they must agree with the device's
  // (checked on the first set of each workload: hashing on the host is not free).
  auto [it, first] = set_digests_.try_emplace(in.id, loaded.digests);
  const bool check_host = first && in.host_values && set_digests_.size() == 1;
  std::string differs;
  for (size_t i = 0; i < layout_.inputs.size(); ++i) {
    bool same = it->second[i] == loaded.digests[i];
    if (same && check_host)
      same = digest_bytes(in.tensors[i].data(), static_cast<uint64_t>(in.tensors[i].nbytes()), key) == loaded.digests[i];
    if (!same) differs += (differs.empty() ? "" : ", ") + layout_.inputs[i].name;
  }
  if (!differs.empty()) {
    harness_error_ = Status::internal(fmt::format(
        "workload {}: the device-generated input(s) {} differ {} (a runner or GPU fault; re-run with --host-inputs)",
        current_uuid_, differs, first ? "from the host generation" : "between runners"));
    return Failure{Verdict::kRuntimeError, "harness_error", "device-side inputs disagree", {}};
  }
  loaded.id = in.id;
  return std::nullopt;
}

std::optional<Failure> Session::timing_phase(WorkloadResult& wr) {
  const int n_iter = iterations();
  if (n_iter <= 0) {
    for (GateId id : {GateId::kTimedRecheck, GateId::kMemoization, GateId::kGpuActivity, GateId::kHostCpu,
                      GateId::kLaunchAttestation, GateId::kRoofline})
      gates_.skip(id, "no timed calls (iterations = 0)");
    return std::nullopt;
  }
  std::vector<double> cand_medians, base_medians, cand_all, base_all;
  // Candidate latencies on input sets it had never been called on, and on sets it had (pooled over
  // the trials): the fresh-versus-repeat test against remembered outputs.
  std::vector<std::pair<double, double>> pairs;  // CUDA
  std::vector<double> fresh_ms, repeat_ms;        // host
  std::set<std::string> kernels_seen;
  json cupti = json::array();
  for (int t = 0; t < trials(); ++t) {
    // Two input sets at the same addresses: the first half of the iterations runs on A, the
    // second on B, which shares A's sparse fingerprint. Outputs are re-checked at the end of
    // each half, so pointer-, shape- or fingerprint-keyed caches produce stale outputs there.
    // Remembered outputs (a cache keyed on all input bytes or any part of them, one entry or many)
    // answer a set from memory only once they have seen it. CUDA: the warm-up runs on a third set W,
    // so A's and B's first timed calls are each the candidate's first call on that set; each is
    // paired with the median of the later calls on the same set, which is what the reported latency
    // is made of. Host: fresh sets at secret places, each called once, against reloaded repeats.
    const std::vector<int> fresh_at = gate_on("fresh-vs-repeat") && !cuda()
                                          ? fresh_iterations(n_iter, derive_seed(*options_.seed, current_uuid_, t, kFreshAt))
                                          : std::vector<int>{};
    std::vector<uint64_t> seeds{derive_seed(*options_.seed, current_uuid_, t, kInputsA),
                                derive_seed(*options_.seed, current_uuid_, t, kInputsB)};
    for (int at : fresh_at)
      seeds.push_back(derive_seed(*options_.seed, current_uuid_, t * 1000 + static_cast<uint64_t>(at), kInputsFresh));
    if (cuda()) seeds.push_back(derive_seed(*options_.seed, current_uuid_, t, kInputsWarm));
    auto sets = materialize_all(seeds);
    if (!sets.ok()) return Failure{Verdict::kRuntimeError, "runtime_error", "input generation failed: " + sets.status().message(), {}};
    MaterializedInputs* a = &(*sets)[0];
    MaterializedInputs* b = &(*sets)[1];
    const MaterializedInputs* warm = cuda() ? &sets->back() : a;  // W has no reference outputs: nothing checks it
    copy_fingerprint(*a, *b);
    const int half = n_iter / 2;
    auto ref_a = reference_outputs(*a);
    auto ref_b = reference_outputs(*b);
    if (!ref_a.ok() || !ref_b.ok()) return Failure{Verdict::kRuntimeError, "runtime_error", (!ref_a.ok() ? ref_a : ref_b).status().message(), {}};
    std::map<int, MaterializedInputs> fsets;
    std::map<int, Outputs> ref_f;
    for (size_t k = 0; k < fresh_at.size(); ++k) {
      MaterializedInputs& fm = (*sets)[2 + k];
      auto rf = reference_outputs(fm);
      if (!rf.ok()) return Failure{Verdict::kRuntimeError, "runtime_error", rf.status().message(), {}};
      fsets.emplace(fresh_at[k], std::move(fm));
      ref_f.emplace(fresh_at[k], std::move(*rf));
    }
    for (int w = 0; w < warmup(); ++w) {
      json call{{"flush", true}, {"upload", true}, {"download", false}, {"timed", false}};
      cand_called_.insert(warm->id);
      if (auto f = checked_call(cand_, *warm, 1000 + w, nullptr, call, nullptr, nullptr)) return f;
      if (have_baseline_) {
        if (auto f = checked_call(base_, *warm, 1000 + w, nullptr, call, nullptr, nullptr))
          return baseline_failure(*f);
      }
    }
    std::vector<double> cs, bs, cpu_ms, kernel_ms;
    // Per candidate timed call, in call order: its set was new to it (kFresh), seen and loaded again
    // by a forced reload just before the call (kReloaded, host), or neither (kRepeat); and the set.
    enum class SetUse { kFresh, kReloaded, kRepeat };
    std::vector<SetUse> cs_use;
    std::vector<uint64_t> cs_set;
    // CUDA: what CUPTI saw in each timed call, summarised by the runner at the end of the trial
    // (deferred: one CUPTI flush per trial instead of one per call) or with each reply.
    const bool defer = cuda() && cand_.has_capability("deferred_records") &&
                       (!have_baseline_ || base_.has_capability("deferred_records"));
    std::vector<json> cand_extra, base_extra;
    auto gpu_checks = [&](const json& extra, int i) -> std::optional<Failure> {
      if (extra.value("cupti_activities", 0) == 0)
        return Failure{Verdict::kNoGpuActivity, "no_gpu_activity", fmt::format("timed iteration {} launched no GPU work", i),
                       {}, GateId::kGpuActivity};
      // Copies alone are not a kernel: a candidate that moves the data to the host, computes
      // there and copies the result back (S3) shows memcpy activity and no kernel.
      if (extra.value("kernels", json::array()).empty())
        return Failure{Verdict::kNoGpuActivity, "no_gpu_activity",
                       fmt::format("timed iteration {} launched no kernel ({} copy/memset activities only)", i,
                                   extra.value("cupti_activities", 0)), {}, GateId::kGpuActivity};
      gates_.ran(GateId::kGpuActivity);
      for (const auto& k : extra.value("kernels", json::array())) kernels_seen.insert(k.get<std::string>());
      if (extra.contains("cpu_ns")) {
        cpu_ms.push_back(static_cast<double>(extra.value("cpu_ns", int64_t{0})) / 1e6);
        kernel_ms.push_back(static_cast<double>(extra.value("kernel_ns", int64_t{0})) / 1e6);
      }
      if (cupti.size() < 4) cupti.push_back(extra);
      cs.push_back(static_cast<double>(extra.value("cupti_span_ns", int64_t{0})) / 1e6);  // the latency: span over all streams
      return std::nullopt;
    };
    std::vector<bool> checked = checked_iterations(n_iter, derive_seed(*options_.seed, current_uuid_, t, kRecheck),
                                                   gate_on("random-rechecks") && !screening_ ? kRandomRechecks : 0);
    // Host: each fresh call against the calls on A or B right after they were written into the arena
    // again (a 2 ms host softmax ran up to 3x slower right after its inputs were written), by reloads
    // forced at secret places. (CUDA needs no reload: a load regenerates the inputs on the device
    // before the L2 flush, and its pairs are on one set each.)
    const std::set<int> reload_at =
        cuda() ? std::set<int>{} : forced_reloads(n_iter, fresh_at, derive_seed(*options_.seed, current_uuid_, t, kReloadAt));
    // The call before each change of inputs has its inputs checked (guard bands, digests), so a
    // mutation is still seen: its outputs are no more likely to be wrong than any other call's, and
    // reading them back and comparing them was most of what a fresh set cost the µs packs.
    std::vector<bool> inputs_checked(static_cast<size_t>(n_iter), false);
    for (int i = 0; i + 1 < n_iter; ++i)
      if (fsets.contains(i + 1) || reload_at.contains(i + 1)) inputs_checked[static_cast<size_t>(i)] = true;
    for (int i = 0; i < n_iter; ++i) {
      const int fp = fsets.contains(i) ? i : -1;
      const bool use_f = fp >= 0;
      const bool use_b = !use_f && i >= half && half > 0;
      if (reload_at.contains(i)) {
        loaded_[&cand_].id = 0;
        loaded_[&base_].id = 0;
      }
      const MaterializedInputs& in = use_f ? fsets.at(fp) : use_b ? *b : *a;
      const std::vector<tensor::Tensor>& want = use_f ? *ref_f.at(fp) : use_b ? **ref_b : **ref_a;
      // A fresh set's first call is re-checked in full, and so is B's: B shares A's sparse
      // fingerprint, so a cache keyed on it replays A's outputs there, whatever came between (a
      // fresh set in B's half refreshes such a cache before B's last call).
      const bool recheck = (checked[static_cast<size_t>(i)] || fp == i || (half > 0 && i == half)) && gate_on("recheck");
      const bool inputs_only = !recheck && inputs_checked[static_cast<size_t>(i)];
      json call{{"flush", true}, {"upload", true}, {"download", recheck || inputs_only}, {"timed", true}};
      if (inputs_only) call["download_outputs"] = false;
      if (defer) call["defer_records"] = true;
      double ms = 0;
      json extra;
      std::vector<tensor::Tensor> outs;
      auto run_candidate = [&]() -> std::optional<Failure> {
        const bool first = cand_called_.insert(in.id).second;
        cs_use.push_back(first ? SetUse::kFresh : reload_at.contains(i) ? SetUse::kReloaded : SetUse::kRepeat);
        cs_set.push_back(in.id);
        if (auto f = checked_call(cand_, in, 2000 + t * 100000 + i, recheck ? &outs : nullptr, call, &ms, &extra)) return f;
        if (recheck) {
          if (auto f = compare(outs, want, in, nullptr))
            return Failure{Verdict::kStaleOutput, "recheck_mismatch",
                           fmt::format("timed iteration {} of trial {} (inputs refilled in place{}) produced a wrong "
                                       "output: {}", i, t, use_f ? ", a never-seen set" : "", f->message), {},
                           GateId::kTimedRecheck};
          gates_.ran(GateId::kTimedRecheck);
        }
        if (defer) {
          cand_extra.push_back(std::move(extra));
          return std::nullopt;
        }
        if (cuda()) return gpu_checks(extra, i);
        cs.push_back(ms);
        return std::nullopt;
      };
      auto run_baseline = [&]() -> std::optional<Failure> {
        if (!have_baseline_) return std::nullopt;
        double bms = 0;
        json bextra;
        json bcall = call;
        bcall["download"] = false;
        // The baseline stays on A or B where the candidate gets a fresh set: its time is only the
        // speedup's denominator, and a fresh set would cost it two device regenerations.
        if (auto f = checked_call(base_, use_b || (use_f && i >= half && half > 0) ? *b : *a, 3000 + t * 100000 + i,
                                  nullptr, bcall, &bms, &bextra))
          return baseline_failure(*f);
        if (defer) {
          base_extra.push_back(std::move(bextra));
          return std::nullopt;
        }
        if (cuda()) bms = static_cast<double>(bextra.value("cupti_span_ns", int64_t{0})) / 1e6;
        bs.push_back(bms);
        return std::nullopt;
      };
      // Alternate the order so neither side always runs right after the other's flush.
      auto f1 = (i % 2 == 0) ? run_candidate() : run_baseline();
      if (f1) return f1;
      auto f2 = (i % 2 == 0) ? run_baseline() : run_candidate();
      if (f2) return f2;
    }
    if (defer) {
      std::map<uint64_t, json> got_cand, got_base;
      if (auto f = collect_records(cand_, &got_cand)) return f;
      if (have_baseline_)
        if (auto f = collect_records(base_, &got_base)) return baseline_failure(*f);
      // A call the runner has no summary for keeps its reply alone: no CUPTI records, no_gpu_activity.
      auto merge = [](json& e, const std::map<uint64_t, json>& got) {
        if (auto it = got.find(e.value("seq", uint64_t{0})); it != got.end() && it->second.is_object()) e.update(it->second);
      };
      for (size_t i = 0; i < cand_extra.size(); ++i) {
        merge(cand_extra[i], got_cand);
        if (auto f = gpu_checks(cand_extra[i], static_cast<int>(i))) return f;
      }
      for (json& e : base_extra) {
        merge(e, got_base);
        bs.push_back(static_cast<double>(e.value("cupti_span_ns", int64_t{0})) / 1e6);
      }
    }
    if (!cuda()) {
      gates_.skip(GateId::kHostCpu, "host backend: the work is on the host by design");
    } else if (cpu_ms.empty()) {
      gates_.skip(GateId::kHostCpu, "the runner reported no CPU time for the timed calls");
    } else {
      const double cpu = summarize(cpu_ms).median, gpu = summarize(kernel_ms).median;
      wr.kda["host_cpu_ms_median"] = cpu;
      wr.kda["kernel_ms_median"] = gpu;
      if (!gate_on("host-cpu")) {
        gate_off(GateId::kHostCpu);
      } else if (cpu > kHostCpuFloorMs && cpu > kHostCpuRatio * gpu) {
        return Failure{Verdict::kNoGpuActivity, "host_cpu_time",
                       fmt::format("timed calls of trial {} used {:.3f} ms of host CPU time (median) against {:.4f} ms "
                                   "of kernel time on the GPU: the work is done on the host", t, cpu, gpu), {},
                       GateId::kHostCpu};
      } else {
        gates_.ran(GateId::kHostCpu);
      }
    }
    if (cuda()) {
      // A set's first call (fresh) against the median of its later calls.
      for (const MaterializedInputs* set : {a, b}) {
        std::optional<double> first;
        std::vector<double> later;
        for (size_t k = 0; k < cs.size() && k < cs_set.size(); ++k) {
          if (cs_set[k] != set->id) continue;
          if (cs_use[k] == SetUse::kFresh) first = cs[k];
          else if (first) later.push_back(cs[k]);
        }
        if (first && !later.empty()) pairs.emplace_back(*first, summarize(later).median);
      }
    } else {
      for (size_t k = 0; k < cs.size() && k < cs_use.size(); ++k) {
        if (cs_use[k] == SetUse::kFresh) fresh_ms.push_back(cs[k]);
        if (cs_use[k] == SetUse::kReloaded) repeat_ms.push_back(cs[k]);
      }
    }
    cand_medians.push_back(summarize(cs).median);
    cand_all.insert(cand_all.end(), cs.begin(), cs.end());
    if (!bs.empty()) {
      base_medians.push_back(summarize(bs).median);
      base_all.insert(base_all.end(), bs.begin(), bs.end());
    }
  }
  if (auto f = memoization_gate(cuda() ? fresh_versus_repeat_paired(pairs) : fresh_versus_repeat(fresh_ms, repeat_ms),
                                cuda(), wr))
    return f;
  if (!cuda()) {
    gates_.skip(GateId::kGpuActivity, "host backend");
    gates_.skip(GateId::kLaunchAttestation, "host backend");
  }
  wr.candidate = summarize(cand_all);
  wr.baseline = summarize(base_all);
  wr.latency_ms = arithmetic_mean(cand_medians);
  wr.baseline_ms = arithmetic_mean(base_medians);
  wr.trial_ms = cand_medians;
  wr.baseline_trial_ms = base_medians;
  wr.speedup = wr.latency_ms > 0 && wr.baseline_ms > 0 ? wr.baseline_ms / wr.latency_ms : 0;
  if (cuda()) {
    wr.kda["kernels"] = std::vector<std::string>(kernels_seen.begin(), kernels_seen.end());
    wr.kda["cupti_samples"] = cupti;
    if (auto f = attest_kernels(kernels_seen)) return f;
  }
  // The roofline floor: nothing honest runs faster than moving its bytes at peak bandwidth.
  if (auto floor = roofline_floor_ms(pack_, resolved_.axes, report_.backend)) {
    wr.roofline_floor_ms = *floor;
    wr.kda["roofline_fraction"] = wr.latency_ms > 0 ? *floor / wr.latency_ms : 0;
    if (!gate_on("roofline")) {
      gate_off(GateId::kRoofline);
    } else if (wr.latency_ms < 0.9 * *floor) {
      return Failure{Verdict::kBelowRoofline, "below_roofline",
                     fmt::format("{:.4f} ms is below the roofline floor {:.4f} ms for this workload", wr.latency_ms, *floor),
                     {}, GateId::kRoofline};
    } else {
      gates_.ran(GateId::kRoofline);
      gates_.note(GateId::kRoofline, fmt::format("{:.4f} ms against a floor of {:.4f} ms ({:.0f}% of the floor's speed)",
                                                 wr.latency_ms, *floor, 100.0 * *floor / wr.latency_ms));
    }
  } else {
    gates_.skip(GateId::kRoofline, fmt::format("no roofline floor for this workload on the {} backend", report_.backend));
  }
  return std::nullopt;
}

std::optional<Failure> Session::memoization_gate(const FreshRepeat& fr, bool paired, WorkloadResult& wr) {
  wr.kda["fresh_vs_repeat"] = {{"fresh_n", fr.n_fresh},          {"repeat_n", fr.n_repeat},
                               {"fresh_median_ms", fr.fresh_median_ms}, {"repeat_median_ms", fr.repeat_median_ms},
                               {"ratio", fr.ratio},              {"repeat_faster_fraction", fr.repeat_faster}};
  // Screening times each candidate too briefly for a verdict: on the host its 3 fresh and 4 reloaded
  // calls convicted 2 of 58 honest GEMM configurations (tasks/host/gemm, 2-core machine), where the
  // official evaluation's 9 and 12 passed them. The tuned solution's official evaluation decides.
  if (screening_) {
    gates_.skip(GateId::kMemoization, "screening session: too few calls per candidate for a verdict; the official "
                                      "evaluation of the tuned solution gives it");
    return std::nullopt;
  }
  if (!fr.applies) {
    gates_.skip(GateId::kMemoization,
                paired ? fmt::format("{} input set(s) timed on their first call and on later ones: too few to compare (at "
                                     "least {}: two per trial)", fr.n_fresh, kMemoMinPairs)
                       : fmt::format("{} timed call(s) on never-seen inputs and {} on repeated ones: too few to compare (at "
                                     "least {} each)", fr.n_fresh, fr.n_repeat, kMemoMinSamples));
    return std::nullopt;
  }
  if (!gate_on("fresh-vs-repeat")) {
    gate_off(GateId::kMemoization);
    return std::nullopt;
  }
  const std::string evidence =
      paired ? fmt::format("{} input sets, each timed on its first call (never seen) and on its later calls (the same "
                           "inputs): first calls {:.5f} ms, later calls {:.5f} ms (medians), median ratio {:.3f}, the later "
                           "calls faster in {:.0f}% of sets",
                           fr.n_fresh, fr.fresh_median_ms, fr.repeat_median_ms, fr.ratio, 100.0 * fr.repeat_faster)
             : fmt::format("timed calls on input sets the candidate had seen (loaded again just before) took {:.5f} ms "
                           "(median of {}), on never-seen sets {:.5f} ms (median of {}): ratio {:.3f}, the repeated call "
                           "faster in {:.0f}% of pairs",
                           fr.repeat_median_ms, fr.n_repeat, fr.fresh_median_ms, fr.n_fresh, fr.ratio,
                           100.0 * fr.repeat_faster);
  if (fr.memoized)
    return Failure{Verdict::kMemoization, "repeat_faster_than_fresh",
                   evidence + " - outputs are remembered, not computed", {}, GateId::kMemoization};
  gates_.ran(GateId::kMemoization);
  gates_.note(GateId::kMemoization, evidence);
  return std::nullopt;
}

std::optional<Failure> Session::collect_records(RunnerClient& runner, std::map<uint64_t, json>* by_seq) {
  auto o = runner.collect(std::max(30.0, call_timeout()));
  account_call(o);
  if (auto f = classify(o)) return f;
  for (const auto& c : o.reply.value("calls", json::array())) (*by_seq)[c.value("seq", uint64_t{0})] = c;
  return std::nullopt;
}

// CUPTI launch attestation: every kernel that ran during a timed call must be one that ptxas
// compiled from the candidate's own sources (the build records their mangled names). A kernel
// from an embedded cubin, a statically linked library or any other module is foreign unless the
// task's policy allows libraries.
std::optional<Failure> Session::attest_kernels(const std::set<std::string>& seen) {
  if (!gate_on("launch-attestation")) {
    gate_off(GateId::kLaunchAttestation);
    return std::nullopt;
  }
  if (!pack_.settings.libraries.empty()) {
    gates_.skip(GateId::kLaunchAttestation, "task policy allows kernel libraries");
    return std::nullopt;
  }
  std::set<std::string> own;
  for (const auto& r : cand_lib_.info.value("resources", json::array())) own.insert(r.value("mangled", std::string{}));
  own.erase("");
  if (own.empty()) {
    gates_.skip(GateId::kLaunchAttestation, "the build recorded no kernel names");
    return std::nullopt;
  }
  std::vector<std::string> foreign = foreign_kernels(seen, own);
  if (!foreign.empty()) {
    std::string list;
    for (const auto& k : foreign) list += (list.empty() ? "" : ", ") + k;
    return Failure{Verdict::kForeignKernel, "foreign_kernel",
                   fmt::format("kernel(s) launched during timed calls that the candidate's sources do not define: {}", list),
                   {}, GateId::kLaunchAttestation};
  }
  gates_.ran(GateId::kLaunchAttestation);
  gates_.note(GateId::kLaunchAttestation,
              fmt::format("{} kernel(s) launched, all compiled from the candidate's sources", seen.size()));
  return std::nullopt;
}

WorkloadResult Session::evaluate_workload(const task::Workload& w) {
  WorkloadResult wr;
  wr.uuid = w.uuid;
  current_uuid_ = w.uuid;
  reference_samples_.clear();
  gates_ = {};
  cand_called_.clear();
  auto fail = [&](const Failure& f) {
    wr.verdict = f.verdict;
    wr.reason = f.reason;
    wr.message = f.message;
    wr.log = f.log;
    if (f.gate) gates_.fail(*f.gate, f.reason, f.message);
    wr.gates = gates_.records(fmt::format("not reached: the workload stopped at {} ({})", f.reason, verdict_name(f.verdict)));
    return wr;
  };
  auto rw = resolve_workload(pack_, w);
  if (!rw.ok()) return fail({Verdict::kRuntimeError, "runtime_error", rw.status().message(), {}});
  resolved_ = *rw;
  wr.axes = rw->axes;
  if (candidate_blocked_) {
    if (candidate_blocked_->verdict == Verdict::kCompileError) gates_.skip(GateId::kImportAudit, "the candidate does not build");
    return fail(*candidate_blocked_);
  }
  if (gate_on("import-audit")) gates_.ran(GateId::kImportAudit);
  else gate_off(GateId::kImportAudit);
  for (const auto& g : report_.static_gates)
    if (g.name == gate_name(GateId::kImportAudit) && g.passed()) gates_.note(GateId::kImportAudit, g.detail);

  // Layout: every tensor in its own guarded slot.
  std::vector<Slot> ins, outs;
  for (size_t i = 0; i < pack_.definition.inputs.size(); ++i) {
    const auto& spec = pack_.definition.inputs[i];
    Slot s{spec.name, spec.dtype, rw->input_shapes[i], !spec.shape.has_value()};
    s.nbytes = static_cast<uint64_t>(tensor::dtype_storage_bytes(spec.dtype, tensor::checked_numel(s.shape).value_or(0)));
    ins.push_back(s);
  }
  for (size_t i = 0; i < pack_.definition.outputs.size(); ++i) {
    const auto& spec = pack_.definition.outputs[i];
    Slot s{spec.name, spec.dtype, rw->output_shapes[i], false};
    s.nbytes = static_cast<uint64_t>(tensor::dtype_storage_bytes(spec.dtype, tensor::checked_numel(s.shape).value_or(0)));
    outs.push_back(s);
  }
  layout_ = plan_layout(ins, outs);

  if (auto f = ensure_runners()) return fail(*f);
  loaded_.clear();
  set_digests_.clear();
  host_values_ = !cuda() || pack_.settings.checker == task::Checker::kTopkIndices;  // the topk checker reads inputs
  for (RunnerClient* r : {&ref_, &base_, &cand_})
    if (r->alive() && !device_inputs(*r)) host_values_ = true;
  if (auto f = send_layouts()) return fail(*f);

  // Correctness: fresh secret inputs per trial; on the first, the same call twice (determinism).
  std::vector<tensor::Tensor> first_outputs;
  std::vector<uint64_t> check_seeds;
  for (int t = 0; t < std::max(1, trials()); ++t) check_seeds.push_back(derive_seed(*options_.seed, w.uuid, t, kInputsCheck));
  auto check_sets = materialize_all(check_seeds);
  if (!check_sets.ok()) return fail({Verdict::kRuntimeError, "runtime_error", check_sets.status().message(), {}});
  int verified_earlier = 0;
  for (int t = 0; t < std::max(1, trials()); ++t) {
    MaterializedInputs* inputs = &(*check_sets)[static_cast<size_t>(t)];
    const bool full = !screening_ || screen_checks_ == ScreenChecks::kAll;
    if (verified_before(check_seeds[t], kCheckCorrectness) && (t > 0 || !full || verified_before(check_seeds[t], kCheckDeterminism))) {
      ++verified_earlier;
      if (t == 0 && full) gates_.skip(GateId::kDeterminism, kVerifiedBefore);
      continue;
    }
    auto ref = reference_outputs(*inputs);
    if (!ref.ok()) return fail({Verdict::kRuntimeError, "runtime_error", ref.status().message(), {}});
    std::vector<tensor::Tensor> got;
    json call{{"flush", true}, {"upload", true}, {"download", true}, {"timed", false}};
    if (auto f = checked_call(cand_, *inputs, static_cast<uint64_t>(t), &got, call, nullptr, nullptr)) return fail(*f);
    if (auto f = compare(got, **ref, *inputs, &wr.check)) {
      f->gate = GateId::kCorrectness;
      return fail(*f);
    }
    gates_.ran(GateId::kCorrectness);
    mark_verified(check_seeds[t], kCheckCorrectness);
    if (t == 0 && !gate_on("determinism")) {
      gate_off(GateId::kDeterminism);
    } else if (t == 0 && !full) {
      gates_.skip(GateId::kDeterminism, kScreenRungZero);
    } else if (t == 0) {
      std::vector<tensor::Tensor> again;
      if (auto f = checked_call(cand_, *inputs, 500, &again, call, nullptr, nullptr)) return fail(*f);
      if (pack_.settings.determinism == task::Determinism::kBitwise && !outputs_bitwise_equal(got, again))
        return fail({Verdict::kNondeterministic, "nondeterministic",
                     "the same inputs gave different outputs on two calls (policy: bitwise determinism)", {},
                     GateId::kDeterminism});
      if (auto f = compare(again, **ref, *inputs, nullptr))
        return fail({Verdict::kNondeterministic, "nondeterministic", "a repeated call on the same inputs failed: " + f->message,
                     {}, GateId::kDeterminism});
      gates_.ran(GateId::kDeterminism);
      mark_verified(check_seeds[t], kCheckDeterminism);
      gates_.note(GateId::kDeterminism, pack_.settings.determinism == task::Determinism::kBitwise
                                            ? "the same inputs twice gave bitwise identical outputs"
                                            : "the same inputs twice gave outputs within tolerance (policy: tolerance)");
    }
  }
  if (verified_earlier == std::max(1, trials()))
    gates_.skip(GateId::kCorrectness, kVerifiedBefore);
  else
    gates_.note(GateId::kCorrectness, fmt::format("{} trial(s), each on inputs drawn from its own secret seed{}{}",
                                                  std::max(1, trials()), fresh_wording(),
                                                  verified_earlier > 0 ? fmt::format(" ({} of them {})", verified_earlier, kVerifiedBefore) : ""));
  if (auto f = probe_trials()) return fail(*f);
  if (auto f = timing_phase(wr)) return fail(*f);
  wr.reference_ms = summarize(reference_samples_).median;
  wr.gates = gates_.records("did not run");
  return wr;
}

std::string Session::fresh_wording() const {
  std::string fixed;
  for (const auto& in : pack_.definition.inputs) {
    auto it = resolved_.workload->inputs.find(in.name);
    if (it == resolved_.workload->inputs.end() || it->second.kind == task::InputSpec::Kind::kRandom) continue;
    fixed += fmt::format("{}{} ({})", fixed.empty() ? "" : ", ", in.name,
                         it->second.kind == task::InputSpec::Kind::kScalar ? "scalar" : "safetensors blob");
  }
  const std::string& g = pack_.settings.inputs_generator;
  const std::string gen = g.empty() ? "" : " or by the pack's generator '" + g + "'";
  if (fixed.empty()) return fmt::format("; every input drawn fresh (seeded random{})", gen);
  return fmt::format("; fixed by the workload: {}; the others drawn fresh (seeded random{})", fixed, gen);
}

std::optional<Failure> Session::probe_trials() {
  const auto& probes = pack_.settings.probes;
  if (!gate_on("probes")) {
    gate_off(GateId::kProbes);
    return std::nullopt;
  }
  if (probes.empty()) {
    gates_.skip(GateId::kProbes, "the task names no probes (task.toml [probes])");
    return std::nullopt;
  }
  if (screening_ && screen_checks_ == ScreenChecks::kCorrectness) {
    gates_.skip(GateId::kProbes, kScreenRungZero);
    return std::nullopt;
  }
  std::string detail;
  std::vector<task::Probe> kinds;  // distinct, in task.toml order
  for (const auto& [input, list] : probes)
    for (task::Probe p : list)
      if (std::find(kinds.begin(), kinds.end(), p) == kinds.end()) kinds.push_back(p);
  for (size_t k = 0; k < kinds.size(); ++k) {
    const uint64_t seed = derive_seed(*options_.seed, current_uuid_, k, kProbe);
    if (verified_before(seed, kCheckProbe)) {
      if (gates_.runs(GateId::kProbes) == 0) gates_.skip(GateId::kProbes, kVerifiedBefore);
      continue;
    }
    auto no_probed_input = [&] {  // this workload gives the probed inputs no plain random values
      if (gates_.runs(GateId::kProbes) == 0)
        gates_.skip(GateId::kProbes, "no probed input has plain random values in this workload");
    };
    std::string what;
    const auto known = probe_what_.find({current_uuid_, seed});  // screening: this probe set was made before
    if (known != probe_what_.end() && known->second.empty()) {
      no_probed_input();
      continue;
    }
    std::optional<MaterializedInputs> kept = kept_set(seed, kProbeSet);
    if (kept && known != probe_what_.end()) what = known->second;
    auto in = kept ? Result<MaterializedInputs>(std::move(*kept)) : materialize(seed, /*host_values=*/true);
    if (!in.ok()) return Failure{Verdict::kRuntimeError, "runtime_error", in.status().message(), {}};
    for (const auto& [input, list] : probes) {
      if (kept) break;  // a kept set is already transformed
      if (std::find(list.begin(), list.end(), kinds[k]) == list.end()) continue;
      for (size_t i = 0; i < pack_.definition.inputs.size(); ++i) {
        if (pack_.definition.inputs[i].name != input || !in->plain_random[i]) continue;
        PhaseTimer timer(phases_.materialize_s);
        ProbeApplied a = apply_probe(kinds[k], derive_seed(seed, input, i, kProbe), input, in->tensors[i]);
        in->plain_random[i] = false;  // uploaded as transformed, never generated on the device
        what += (what.empty() ? "" : ", ") + a.description;
      }
    }
    if (!kept && screening_) {
      if (!what.empty()) keep_set(*in, kProbeSet);
      probe_what_[{current_uuid_, seed}] = what;
    }
    if (what.empty()) {
      no_probed_input();
      continue;
    }
    auto ref = reference_outputs(*in);
    if (!ref.ok()) return Failure{Verdict::kRuntimeError, "runtime_error", ref.status().message(), {}};
    std::vector<tensor::Tensor> got;
    json call{{"flush", true}, {"upload", true}, {"download", true}, {"timed", false}};
    if (auto f = checked_call(cand_, *in, 700 + k, &got, call, nullptr, nullptr)) return f;
    if (auto f = compare(got, **ref, *in, nullptr))
      return Failure{Verdict::kIncorrectNumerical, "probe_mismatch",
                     fmt::format("off-distribution probe '{}' ({}): {}", task::probe_name(kinds[k]), what, f->message), {},
                     GateId::kProbes};
    detail += fmt::format("{}{} ({})", detail.empty() ? "" : "; ", task::probe_name(kinds[k]), what);
    gates_.ran(GateId::kProbes);
    mark_verified(seed, kCheckProbe);
    gates_.note(GateId::kProbes, "correct on off-distribution inputs: " + detail);
  }
  return std::nullopt;
}

std::vector<const task::Workload*> select_workloads(const task::TaskPack& pack, const std::string& which,
                                                    Status* error) {
  std::vector<const task::Workload*> out;
  if (which == "all") {
    for (const auto& w : pack.workloads) out.push_back(&w);
  } else if (which == "holdout") {
    for (const auto& w : pack.holdout) out.push_back(&w);
  } else if (which == "dev") {
    for (const auto& u : pack.dev_uuids)
      if (const auto* w = pack.workload(u)) out.push_back(w);
  } else {
    for (const std::string& u : util::split_list(which)) {
      const auto* w = pack.workload(u);
      if (w == nullptr) {
        // A unique prefix (the table's first 8 characters, say) names a workload too.
        std::vector<const task::Workload*> matches;
        for (const auto& x : pack.workloads)
          if (x.uuid.starts_with(u)) matches.push_back(&x);
        if (matches.size() > 1) {
          std::string names;
          for (size_t i = 0; i < matches.size() && i < 4; ++i) names += (i ? ", " : "") + matches[i]->uuid;
          *error = Status::bad_input(fmt::format("--workloads: '{}' is the start of {} workloads of {} ({}{}); give more of it", u,
                                                 matches.size(), pack.root.string(), names, matches.size() > 4 ? ", ..." : ""));
          return {};
        }
        if (matches.empty()) {
          *error = Status::bad_input(fmt::format("--workloads: no workload '{}' in {}", u, pack.root.string()));
          return {};
        }
        w = matches.front();
      }
      out.push_back(w);
    }
  }
  if (out.empty()) *error = Status::bad_input(fmt::format("--workloads {}: selects no workload of {}", which, pack.root.string()));
  return out;
}

Result<EvalReport> Session::rerun(const task::Solution& candidate) {
  if (harness_error_) return *harness_error_;  // a reference that failed once is not trusted again
  candidate_ = &candidate;
  report_ = EvalReport{};
  phases_ = EvalPhases{};
  cand_lib_ = BuiltLibrary{};
  candidate_blocked_.reset();
  ++screen_stats_.candidates;
  return run();
}

Result<EvalReport> Session::run() {
  const auto t0 = Clock::now();
  report_.definition = pack_.definition.name;
  report_.solution = candidate_->name;
  report_.backend = pack_.backend == task::Backend::kCuda ? "cuda" : "host";
  report_.seed = *options_.seed;
  Status sel;
  auto selected = select_workloads(pack_, options_.workloads, &sel);
  if (!sel.ok()) return sel;
  {
    PhaseTimer timer(phases_.build_s);
    KDA_RETURN_IF_ERROR(build_all());
  }
  std::vector<double> speedups;
  bool all_passed = true;
  for (size_t i = 0; i < selected.size(); ++i) {
    WorkloadResult wr = evaluate_workload(*selected[i]);
    // A reference or baseline that fails is the harness's problem, not the candidate's.
    if (harness_error_) return *harness_error_;
    progress(fmt::format("[{}/{}] {} {} {}", i + 1, selected.size(), wr.uuid, verdict_name(wr.verdict),
                         wr.verdict == Verdict::kPassed ? fmt::format("{:.4f} ms (baseline {:.4f} ms, {:.2f}x)",
                                                                      wr.latency_ms, wr.baseline_ms, wr.speedup)
                                                        : wr.message));
    all_passed = all_passed && wr.verdict == Verdict::kPassed;
    if (wr.verdict == Verdict::kPassed && wr.speedup > 0) speedups.push_back(wr.speedup);
    // After any failure the candidate runner is replaced: a CUDA error is sticky for its context,
    // and a violating candidate may have left state behind.
    const bool failed = wr.verdict != Verdict::kPassed;
    if (failed && cand_.alive()) cand_.stop();
    report_.workloads.push_back(std::move(wr));
    if (failed && screening_) break;  // a screened candidate that failed once is out: the rest is not run
  }
  report_.all_passed = all_passed;
  report_.score_mean = all_passed ? arithmetic_mean(speedups) : 0;
  report_.score_geomean = all_passed ? geometric_mean(speedups) : 0;
  if (all_passed && have_baseline_) {
    std::vector<std::vector<double>> cand, base;
    for (const auto& w : report_.workloads) {
      cand.push_back(w.trial_ms);
      base.push_back(w.baseline_trial_ms);
    }
    report_.geomean_ci = geomean_speedup_ci(cand, base, report_.score_geomean);
  }
  report_.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  report_.phases = phases_;
  return report_;
}

// What evaluate() and Screener refuse before anything runs: a candidate for another definition or
// in the wrong language.
Status check_candidate(const task::TaskPack& pack, const task::Solution& candidate) {
  if (candidate.definition != pack.definition.name)
    return Status::bad_input(fmt::format("solution '{}' is for definition '{}', the task is '{}'", candidate.name,
                                         candidate.definition, pack.definition.name));
  const std::string want = pack.backend == task::Backend::kCuda ? "cuda" : "cpp";
  if (candidate.spec.language != want)
    return Status::bad_input(fmt::format("solution '{}' is written in '{}', but task '{}' runs on the {} backend, which "
                                         "takes '{}' solutions", candidate.name, candidate.spec.language,
                                         pack.definition.name, want == "cuda" ? "cuda" : "host", want));
  return {};
}

Status check_options(const task::TaskPack& pack, EvalOptions& opts) {
  KDA_RETURN_IF_ERROR(check_gpu_machine(pack));
  if (!opts.seed) opts.seed = fresh_secret_seed();
  if (opts.reference != "pack" && opts.reference != "torch")
    return Status::bad_input("--reference must be 'pack' or 'torch', not '" + opts.reference + "'");
  if (opts.sealed) {
    KDA_ASSIGN_OR_RETURN(task::Manifest now, task::pack_manifest(pack.root));
    task::ManifestDiff diff = task::manifest_diff(*opts.sealed, now);
    if (!diff.empty())
      return Status::failed(fmt::format("{}: the task pack no longer matches its sealed manifest ({}); refusing to "
                                        "evaluate", pack.root.string(), task::describe(diff)));
  }
  return {};
}

}  // namespace

Status check_gpu_machine(const task::TaskPack& pack, const std::vector<std::filesystem::path>& driver_files) {
  if (pack.backend != task::Backend::kCuda) return {};
  static const std::vector<std::filesystem::path> kDriverFiles = {"/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/nvidia0",
                                                                  "/dev/dxg"};
  const auto& files = driver_files.empty() ? kDriverFiles : driver_files;
  std::error_code ec;
  for (const auto& f : files)
    if (std::filesystem::exists(f, ec)) return {};
  std::string looked;
  for (const auto& f : files) looked += (looked.empty() ? "" : ", ") + f.string();
  return Status::bad_input(fmt::format(
      "{}: a CUDA task pack, and this machine has no NVIDIA GPU driver (none of {} exists); evaluate it on a machine "
      "with an NVIDIA GPU (the host packs in tasks/host run anywhere)",
      pack.root.string(), looked));
}

Result<EvalReport> evaluate(const task::TaskPack& pack, const task::Solution& candidate, const EvalOptions& options) {
  EvalOptions opts = options;
  KDA_RETURN_IF_ERROR(check_options(pack, opts));
  KDA_RETURN_IF_ERROR(check_candidate(pack, candidate));
  if (opts.baseline) {
    Status st = check_candidate(pack, *opts.baseline);
    if (!st.ok()) return Status::bad_input("--baseline: " + st.message());
  }
  Session s(pack, candidate, opts);
  return s.run();
}

struct Screener::Impl {
  const task::TaskPack& pack;
  EvalOptions options;  // the session reads these: timing is set per candidate
  task::Solution none;  // the session's candidate until the first
  Session session;
  Impl(const task::TaskPack& p, EvalOptions o) : pack(p), options(std::move(o)), session(pack, none, options) {
    session.enable_screening();
  }
};

Result<std::unique_ptr<Screener>> Screener::open(const task::TaskPack& pack, EvalOptions options) {
  KDA_RETURN_IF_ERROR(check_options(pack, options));
  options.with_baseline = false;
  options.sealed.reset();  // checked once, here
  auto s = std::unique_ptr<Screener>(new Screener());
  s->impl_ = std::make_unique<Impl>(pack, std::move(options));
  return s;
}

Screener::Screener() = default;
Screener::~Screener() = default;

Result<EvalReport> Screener::evaluate(const task::Solution& candidate, const std::string& workloads, int trials,
                                     int warmup, int iterations, ScreenChecks checks) {
  KDA_RETURN_IF_ERROR(check_candidate(impl_->pack, candidate));
  impl_->session.set_screen_checks(checks);
  impl_->options.workloads = workloads;
  impl_->options.trials = trials;
  impl_->options.warmup = warmup;
  impl_->options.iterations = iterations;
  return impl_->session.rerun(candidate);
}

ScreenStats Screener::stats() const { return impl_->session.screen_stats(); }

}  // namespace kda::eval
