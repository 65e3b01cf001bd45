// Session: one workload (layout, correctness trials, probes, then timing) and the run over the
// selected workloads (session.h).
#include "eval/session.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "eval/arena.h"
#include "contest/stress.h"
#include "eval/attestation.h"
#include "eval/input_digest.h"
#include "eval/inputs.h"
#include "eval/probes.h"
#include "eval/roofline.h"
#include "eval/round_trips.h"
#include "eval/runner_client.h"
#include "eval/solution_build.h"
#include "eval/static_gate.h"
#include "eval/topk_checker.h"
#include "eval/torch_oracle.h"
#include "util/parallel.h"
#include "util/strings.h"

namespace kda::eval::detail {

namespace {

// Runs one step and writes its wall time (seconds) to kda[key], where key is not null.
template <class Step>
std::optional<Failure> timed_into(json& kda, const char* key, Step&& step) {
  double s = 0;
  std::optional<Failure> f;
  {
    PhaseTimer timer(s);
    f = step();
  }
  if (key != nullptr) kda[key] = s;
  return f;
}

// The workload's arena layout: every tensor in its own guarded slot.
ArenaLayout workload_layout(const task::Definition& def, const ResolvedWorkload& rw) {
  auto slots = [](const auto& specs, const auto& shapes, bool inputs) {
    std::vector<Slot> out;
    for (size_t i = 0; i < specs.size(); ++i) {
      Slot s{specs[i].name, specs[i].dtype, shapes[i], inputs && !specs[i].shape.has_value()};
      s.nbytes = static_cast<uint64_t>(
          tensor::dtype_storage_bytes(specs[i].dtype, tensor::checked_numel(s.shape).value_or(0)));
      out.push_back(s);
    }
    return out;
  };
  return plan_layout(slots(def.inputs, rw.input_shapes, true), slots(def.outputs, rw.output_shapes, false));
}

}  // namespace

// The baseline's error budget on the candidate's correctness inputs, beside the candidate's: the most of
// the tolerance its worst element spent over the trials, overall and per output
// (kda.baseline_tolerance_used, kda.baseline_outputs), so that a candidate spending more of it than the
// incumbent shows. Not while screening; a baseline call that fails adds nothing (timing reports it).
void Session::baseline_error_budget(const MaterializedInputs& inputs, const std::vector<tensor::Tensor>& ref,
                                    WorkloadResult& wr) {
  if (!have_baseline_ || screening_) return;
  std::vector<tensor::Tensor> got;
  const CallRequest call;  // flushed, uploaded, downloaded, untimed
  if (checked_call(base_, inputs, 600, &got, call, nullptr, nullptr)) return;
  std::optional<CheckResult> check;
  compare(got, ref, inputs, &check);
  if (!check || !std::isfinite(check->tolerance_used)) return;
  auto worse = [](json& into, const char* key, double v) {
    if (!into.contains(key) || into[key].get<double>() < v) into[key] = v;
  };
  worse(wr.kda, "baseline_tolerance_used", check->tolerance_used);
  json& outs = wr.kda["baseline_outputs"];
  if (!outs.is_array()) outs = json::array();
  for (size_t i = 0; i < check->outputs.size(); ++i) {
    const OutputCheck& o = check->outputs[i];
    if (outs.size() <= i) outs.push_back({{"name", o.name}});
    worse(outs[i], "max_absolute_error", o.max_abs);
    worse(outs[i], "max_relative_error", o.max_rel);
    worse(outs[i], "tolerance_used", o.tolerance_used);
  }
}

// The import audit ran once on the candidate's library (static_gate.h); each workload's gates record it.
void Session::import_audit_record() {
  if (!gate_on("import-audit"))
    gate_off(GateId::kImportAudit);
  else if (cand_lib_.python_source())
    gates_.skip(GateId::kImportAudit, "a Python solution: no compiled library whose dynamic imports could be read");
  else
    gates_.ran(GateId::kImportAudit);
  for (const auto& g : report_.static_gates)
    if (g.name == gate_name(GateId::kImportAudit) && g.passed()) gates_.note(GateId::kImportAudit, g.detail);
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
    wr.gates =
        gates_.records(fmt::format("not reached: the workload stopped at {} ({})", f.reason, verdict_name(f.verdict)));
    return wr;
  };
  auto rw = resolve_workload(pack_, w);
  if (!rw.ok()) return fail({Verdict::kRuntimeError, "runtime_error", rw.status().message(), {}});
  resolved_ = *rw;
  wr.axes = rw->axes;
  if (candidate_blocked_) {
    if (candidate_blocked_->verdict == Verdict::kCompileError)
      gates_.skip(GateId::kImportAudit, "the candidate does not build");
    return fail(*candidate_blocked_);
  }
  import_audit_record();

  layout_ = workload_layout(pack_.definition, *rw);

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
  for (int t = 0; t < std::max(1, trials()); ++t)
    check_seeds.push_back(derive_seed(*options_.seed, w.uuid, t, kInputsCheck));
  auto check_sets = materialize_all(check_seeds);
  if (!check_sets.ok()) return fail({Verdict::kRuntimeError, "runtime_error", check_sets.status().message(), {}});
  int verified_earlier = 0;
  double tolerance_used = -1;  // the error budget: the most any correctness trial spent
  for (int t = 0; t < std::max(1, trials()); ++t) {
    MaterializedInputs* inputs = &(*check_sets)[static_cast<size_t>(t)];
    const bool full = !screening_ || screen_checks_ == ScreenChecks::kAll;
    if (verified_before(check_seeds[t], kCheckCorrectness) &&
        (t > 0 || !full || verified_before(check_seeds[t], kCheckDeterminism))) {
      ++verified_earlier;
      if (t == 0 && full) gates_.skip(GateId::kDeterminism, kVerifiedBefore);
      continue;
    }
    auto ref = reference_outputs(*inputs);
    if (!ref.ok()) return fail({Verdict::kRuntimeError, "runtime_error", ref.status().message(), {}});
    std::vector<tensor::Tensor> got;
    const CallRequest call;  // flushed, uploaded, downloaded, untimed
    if (auto f = checked_call(cand_, *inputs, static_cast<uint64_t>(t), &got, call, nullptr, nullptr)) return fail(*f);
    if (auto f = compare(got, **ref, *inputs, &wr.check)) {
      f->gate = GateId::kCorrectness;
      return fail(*f);
    }
    gates_.ran(GateId::kCorrectness);
    if (wr.check) tolerance_used = std::max(tolerance_used, wr.check->tolerance_used);
    baseline_error_budget(*inputs, **ref, wr);
    mark_verified(check_seeds[t], kCheckCorrectness);
    if (t == 0 && !gate_on("determinism")) {
      gate_off(GateId::kDeterminism);
    } else if (t == 0 && !full) {
      gates_.skip(GateId::kDeterminism, kScreenRungZero);
    } else if (t == 0) {
      std::vector<tensor::Tensor> again;
      if (auto f = checked_call(cand_, *inputs, 500, &again, call, nullptr, nullptr)) return fail(*f);
      if (pack_.settings.determinism == task::Determinism::kBitwise && !outputs_bitwise_equal(got, again))
        return fail({Verdict::kNondeterministic,
                     "nondeterministic",
                     "the same inputs gave different outputs on two calls (policy: bitwise determinism)",
                     {},
                     GateId::kDeterminism});
      if (auto f = compare(again, **ref, *inputs, nullptr))
        return fail({Verdict::kNondeterministic,
                     "nondeterministic",
                     "a repeated call on the same inputs failed: " + f->message,
                     {},
                     GateId::kDeterminism});
      gates_.ran(GateId::kDeterminism);
      mark_verified(check_seeds[t], kCheckDeterminism);
      gates_.note(GateId::kDeterminism,
                  pack_.settings.determinism == task::Determinism::kBitwise
                      ? "the same inputs twice gave bitwise identical outputs"
                      : "the same inputs twice gave outputs within tolerance (policy: tolerance)");
    }
  }
  // Infinity (a tolerance of zero spent) has no JSON number: it stays out, the outputs say why.
  if (tolerance_used >= 0 && std::isfinite(tolerance_used)) wr.kda["tolerance_used"] = tolerance_used;
  if (verified_earlier == std::max(1, trials()))
    gates_.skip(GateId::kCorrectness, kVerifiedBefore);
  else
    gates_.note(
        GateId::kCorrectness,
        fmt::format("{} trial(s), each on inputs drawn from its own secret seed{}{}", std::max(1, trials()),
                    fresh_wording(),
                    verified_earlier > 0 ? fmt::format(" ({} of them {})", verified_earlier, kVerifiedBefore) : ""));
  if (auto f = probe_trials()) return fail(*f);
  // What the stress inputs cost this workload, a failing one's too (kda.stress_s).
  const char* stress_key = pack_.settings.stress.empty() ? nullptr : "stress_s";
  if (auto f = timed_into(wr.kda, stress_key, [&] { return stress_trials(); })) return fail(*f);
  if (auto f = timing_phase(wr)) return fail(*f);
  if (auto f = graph_contract(wr)) return fail(*f);
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
    const CallRequest call;  // flushed, uploaded, downloaded, untimed
    if (auto f = checked_call(cand_, *in, 700 + k, &got, call, nullptr, nullptr)) return f;
    if (auto f = compare(got, **ref, *in, nullptr))
      return Failure{Verdict::kIncorrectNumerical,
                     "probe_mismatch",
                     fmt::format("off-distribution probe '{}' ({}): {}", task::probe_name(kinds[k]), what, f->message),
                     {},
                     GateId::kProbes};
    detail += fmt::format("{}{} ({})", detail.empty() ? "" : "; ", task::probe_name(kinds[k]), what);
    gates_.ran(GateId::kProbes);
    mark_verified(seed, kCheckProbe);
    gates_.note(GateId::kProbes, "correct on off-distribution inputs: " + detail);
  }
  return std::nullopt;
}

std::optional<Failure> Session::stress_trials() {
  const std::vector<std::string>& stresses = pack_.settings.stress;
  if (!gate_on("stress")) {
    gate_off(GateId::kStress);
    return std::nullopt;
  }
  if (stresses.empty()) {
    gates_.skip(GateId::kStress, "the task names no stress inputs (task.toml [inputs] stress)");
    return std::nullopt;
  }
  if (screening_ && screen_checks_ == ScreenChecks::kCorrectness) {
    gates_.skip(GateId::kStress, kScreenRungZero);
    return std::nullopt;
  }
  std::string detail;
  for (size_t k = 0; k < stresses.size(); ++k) {
    const uint64_t seed = derive_seed(*options_.seed, current_uuid_, k, kStressSet);
    if (verified_before(seed, kCheckStress)) {
      if (gates_.runs(GateId::kStress) == 0) gates_.skip(GateId::kStress, kVerifiedBefore);
      continue;
    }
    auto in = materialize(seed, host_values_, stresses[k]);  // only the generator's tensors are transformed
    if (!in.ok()) return Failure{Verdict::kRuntimeError, "runtime_error", in.status().message(), {}};
    auto ref = reference_outputs(*in);
    if (!ref.ok()) return Failure{Verdict::kRuntimeError, "runtime_error", ref.status().message(), {}};
    std::vector<tensor::Tensor> got;
    const CallRequest call;  // flushed, uploaded, downloaded, untimed
    if (auto f = checked_call(cand_, *in, 800 + k, &got, call, nullptr, nullptr)) return f;
    const contest::Stress* st = contest::find_stress(pack_.settings.inputs_generator, stresses[k]);
    const std::string what = st != nullptr ? std::string(st->what) : std::string();
    if (auto f = compare(got, **ref, *in, nullptr))
      return Failure{Verdict::kIncorrectNumerical,
                     "stress_mismatch",
                     fmt::format("stress input '{}' ({}): {}", stresses[k], what, f->message),
                     {},
                     GateId::kStress};
    detail += fmt::format("{}{}", detail.empty() ? "" : ", ", stresses[k]);
    gates_.ran(GateId::kStress);
    mark_verified(seed, kCheckStress);
    gates_.note(GateId::kStress, "correct on the stress inputs: " + detail);
  }
  return std::nullopt;
}

// Replays after the capture's own launch: other draws of the same shapes (other sequence splits, routings
// and block tables where the pack's generator draws them fresh).
constexpr int kGraphReplays = 2;

std::optional<Failure> Session::graph_launches(int* nodes) {
  for (int k = 0; k <= kGraphReplays; ++k) {
    const uint64_t seed = derive_seed(*options_.seed, current_uuid_, static_cast<uint64_t>(k), kGraphSet);
    auto in = materialize(seed, host_values_);
    if (!in.ok()) return Failure{Verdict::kRuntimeError, "runtime_error", in.status().message(), {}};
    auto ref = reference_outputs(*in);
    if (!ref.ok()) return Failure{Verdict::kRuntimeError, "runtime_error", ref.status().message(), {}};
    CallRequest call;  // flushed, uploaded, downloaded, untimed
    call.graph = k == 0 ? CallRequest::Graph::kCapture : CallRequest::Graph::kReplay;
    std::vector<tensor::Tensor> got;
    json extra;
    const std::string which = k == 0 ? std::string("the capture (a call recorded into a CUDA graph, then launched)")
                                     : fmt::format("replay {} of the captured graph on fresh inputs", k);
    if (auto f = checked_call(cand_, *in, 900 + static_cast<uint64_t>(k), &got, call, nullptr, &extra)) {
      f->message = which + ": " + f->message;
      if (f->reason == "runtime_error") f->reason = k == 0 ? "graph_capture" : "graph_replay";
      return f;
    }
    if (k == 0) *nodes = extra.value("graph_nodes", 0);
    if (auto f = compare(got, **ref, *in, nullptr))
      return Failure{Verdict::kIncorrectNumerical, "graph_replay_mismatch", which + ": " + f->message, {}};
  }
  return std::nullopt;
}

std::optional<Failure> Session::graph_contract(WorkloadResult& wr) {
  const bool required = pack_.settings.graph_contract || options_.require_graph_contract;
  if (!gate_on("graph-contract")) {
    gate_off(GateId::kGraphContract);
    return std::nullopt;
  }
  if (!cuda()) {
    gates_.skip(GateId::kGraphContract, "host backend: CUDA graphs are a CUDA deployment's");
    return std::nullopt;
  }
  if (screening_) {
    gates_.skip(GateId::kGraphContract, "screening: the contract is checked in official evaluations");
    return std::nullopt;
  }
  int nodes = 0;
  // What the contract costs this workload: the capture, the replays, their references (kda.graph_contract_s).
  std::optional<Failure> broke = timed_into(wr.kda, "graph_contract_s", [&] { return graph_launches(&nodes); });
  // A call that waits on the host or copies through pageable memory only when no capture is under way
  // (cudaStreamIsCapturing) captures cleanly: CUPTI's records of its plain timed calls show it.
  const json host_round_trips = wr.kda.value("host_round_trips", json::object());
  const std::string round_trips = describe_round_trips(host_round_trips);
  if (!broke && !round_trips.empty())
    broke = Failure{Verdict::kRuntimeError,
                    "host_round_trip",
                    "the capture held, but outside it " + round_trips +
                        "; an engine's plain calls would stall on them as these did",
                    {}};
  else if (broke && !round_trips.empty())
    broke->message += "; " + round_trips;
  wr.kda["graph_safe"] = !broke.has_value();
  if (!broke) {
    const int calls = host_round_trips.value("of_calls", 0);
    gates_.ran(GateId::kGraphContract);
    gates_.note(GateId::kGraphContract,
                fmt::format("captured into a CUDA graph of {} node(s) and launched on {} fresh input sets in the same "
                            "buffers, every output checked; no host wait or pageable copy in {} timed call(s){}",
                            nodes, kGraphReplays + 1, calls, required ? "" : " (informational: not required)"));
    return std::nullopt;
  }
  if (required) {
    broke->gate = GateId::kGraphContract;
    broke->message = "CUDA graph contract: " + broke->message;
    return broke;
  }
  wr.kda["graph_contract"] = broke->message;
  gates_.skip(
      GateId::kGraphContract,
      "not required (task.toml [contract] graph = false, no --graph-contract); it does not hold: " + broke->message);
  if (cand_.alive()) cand_.stop();  // a broken capture or a stale replay may leave the context unusable
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
          *error = Status::bad_input(
              fmt::format("--workloads: '{}' is the start of {} workloads of {} ({}{}); give more of it", u,
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
  if (out.empty())
    *error = Status::bad_input(fmt::format("--workloads {}: selects no workload of {}", which, pack.root.string()));
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
  for (size_t i = 0; i < selected.size(); ++i) {
    WorkloadResult wr = evaluate_workload(*selected[i]);
    // A reference or baseline that fails is the harness's problem, not the candidate's.
    if (harness_error_) return *harness_error_;
    const std::string kernels = kernel_breakdown(wr.kda.value("kernel_ms_by_name", nlohmann::json::object()));
    progress(fmt::format("[{}/{}] {} {} {}", i + 1, selected.size(), wr.uuid, verdict_name(wr.verdict),
                         wr.verdict == Verdict::kPassed
                             ? fmt::format("{:.4f} ms (baseline {:.4f} ms, {:.2f}x{})", wr.latency_ms, wr.baseline_ms,
                                           wr.speedup, kernels.empty() ? "" : "; " + kernels)
                             : wr.message));
    // After any failure the candidate runner is replaced: a CUDA error is sticky for its context,
    // and a violating candidate may have left state behind.
    const bool failed = wr.verdict != Verdict::kPassed;
    if (failed && cand_.alive()) cand_.stop();
    report_.workloads.push_back(std::move(wr));
    if (failed && screening_) break;  // a screened candidate that failed once is out: the rest is not run
  }
  score_report(report_);
  report_.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  report_.phases = phases_;
  return report_;
}

}  // namespace kda::eval::detail
