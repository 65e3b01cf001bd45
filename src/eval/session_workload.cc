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

}  // namespace

// The baseline's error budget on the candidate's correctness inputs, beside the candidate's: the most of
// the tolerance its worst element spent over the trials, overall and per output
// (kda.baseline_tolerance_used, kda.baseline_outputs), so that a candidate spending more of it than the
// incumbent shows. Not while screening; a baseline call that fails adds nothing (timing reports it).
void Session::baseline_error_budget(WorkloadRun& run, const MaterializedInputs& inputs,
                                    const std::vector<tensor::Tensor>& ref, WorkloadResult& wr) {
  if (!run.builds.baseline || screening()) return;
  std::vector<tensor::Tensor> got;
  const CallRequest call;  // flushed, uploaded, downloaded, untimed
  if (checked_call(run, base_, inputs, 600, &got, call, nullptr, nullptr)) return;
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
void Session::import_audit_record(WorkloadRun& run) {
  if (!gate_on("import-audit"))
    gate_off(run, GateId::kImportAudit);
  else if (run.builds.library.python_source())
    run.gates.skip(GateId::kImportAudit, "a Python solution: no compiled library whose dynamic imports could be read");
  else
    run.gates.ran(GateId::kImportAudit);
  for (const auto& g : run.builds.static_gates)
    if (g.name == gate_name(GateId::kImportAudit) && g.passed()) run.gates.note(GateId::kImportAudit, g.detail);
}

// One workload, as its phases: the layout and the runners, the correctness trials, the probes, the
// stresses, the timing, the graph contract. The first failure is the workload's verdict.
WorkloadResult Session::evaluate_workload(const Builds& builds, const task::Workload& w) {
  WorkloadRun run{.builds = builds, .uuid = w.uuid};
  WorkloadResult wr;
  wr.uuid = w.uuid;
  auto fail = [&](const Failure& f) {
    wr.verdict = f.verdict;
    wr.reason = f.reason;
    wr.message = f.message;
    wr.log = f.log;
    if (f.gate) run.gates.fail(*f.gate, f.reason, f.message);
    wr.gates = run.gates.records(
        fmt::format("not reached: the workload stopped at {} ({})", f.reason, verdict_name(f.verdict)));
    return wr;
  };
  auto rw = resolve_workload(pack_, w);
  if (!rw.ok()) return fail({Verdict::kRuntimeError, "runtime_error", rw.status().message(), {}});
  run.resolved = *rw;
  wr.axes = rw->axes;
  if (builds.blocked) {
    if (builds.blocked->verdict == Verdict::kCompileError)
      run.gates.skip(GateId::kImportAudit, "the candidate does not build");
    return fail(*builds.blocked);
  }
  import_audit_record(run);

  run.layout = workload_layout(pack_.definition, *rw);
  if (auto f = ensure_runners(builds)) return fail(*f);
  run.host_values = !cuda() || pack_.settings.checker == task::Checker::kTopkIndices;  // the topk checker reads inputs
  for (RunnerClient* r : {&ref_, &base_, &cand_})
    if (r->alive() && !device_inputs(*r)) run.host_values = true;
  if (auto f = send_layouts(run.layout)) return fail(*f);

  if (auto f = correctness_trials(run, wr)) return fail(*f);
  if (auto f = probe_trials(run)) return fail(*f);
  // What the stress inputs cost this workload, a failing one's too (kda.stress_s).
  const char* stress_key = pack_.settings.stress.empty() ? nullptr : "stress_s";
  if (auto f = timed_into(wr.kda, stress_key, [&] { return stress_trials(run); })) return fail(*f);
  if (auto f = timing_phase(run, wr)) return fail(*f);
  if (auto f = graph_contract(run, wr)) return fail(*f);
  wr.reference_ms = summarize(run.reference_samples).median;
  wr.gates = run.gates.records("did not run");
  return wr;
}

std::optional<Failure> Session::correctness_trials(WorkloadRun& run, WorkloadResult& wr) {
  std::vector<uint64_t> check_seeds;
  for (int t = 0; t < std::max(1, trials()); ++t)
    check_seeds.push_back(derive_seed(*options_.seed, run.uuid, t, kInputsCheck));
  auto check_sets = materialize_all(run, check_seeds);
  if (!check_sets.ok()) return Failure{Verdict::kRuntimeError, "runtime_error", check_sets.status().message(), {}};
  int verified_earlier = 0;
  double tolerance_used = -1;  // the error budget: the most any correctness trial spent
  for (int t = 0; t < std::max(1, trials()); ++t) {
    MaterializedInputs* inputs = &(*check_sets)[static_cast<size_t>(t)];
    const bool full = !screen_first_look();
    if (verified_before(run, check_seeds[t], ScreenCache::Check::kCorrectness) &&
        (t > 0 || !full || verified_before(run, check_seeds[t], ScreenCache::Check::kDeterminism))) {
      ++verified_earlier;
      if (t == 0 && full) run.gates.skip(GateId::kDeterminism, kVerifiedBefore);
      continue;
    }
    auto ref = reference_outputs(run, *inputs);
    if (!ref.ok()) return Failure{Verdict::kRuntimeError, "runtime_error", ref.status().message(), {}};
    std::vector<tensor::Tensor> got;
    const CallRequest call;  // flushed, uploaded, downloaded, untimed
    if (auto f = checked_call(run, cand_, *inputs, static_cast<uint64_t>(t), &got, call, nullptr, nullptr)) return f;
    if (auto f = compare(got, **ref, *inputs, &wr.check)) {
      f->gate = GateId::kCorrectness;
      return f;
    }
    run.gates.ran(GateId::kCorrectness);
    if (wr.check) tolerance_used = std::max(tolerance_used, wr.check->tolerance_used);
    baseline_error_budget(run, *inputs, **ref, wr);
    mark_verified(run, check_seeds[t], ScreenCache::Check::kCorrectness);
    if (t == 0 && !gate_on("determinism")) {
      gate_off(run, GateId::kDeterminism);
    } else if (t == 0 && !full) {
      run.gates.skip(GateId::kDeterminism, kScreenRungZero);
    } else if (t == 0) {
      std::vector<tensor::Tensor> again;
      if (auto f = checked_call(run, cand_, *inputs, 500, &again, call, nullptr, nullptr)) return f;
      if (pack_.settings.determinism == task::Determinism::kBitwise && !outputs_bitwise_equal(got, again))
        return Failure{Verdict::kNondeterministic,
                       "nondeterministic",
                       "the same inputs gave different outputs on two calls (policy: bitwise determinism)",
                       {},
                       GateId::kDeterminism};
      if (auto f = compare(again, **ref, *inputs, nullptr))
        return Failure{Verdict::kNondeterministic,
                       "nondeterministic",
                       "a repeated call on the same inputs failed: " + f->message,
                       {},
                       GateId::kDeterminism};
      run.gates.ran(GateId::kDeterminism);
      mark_verified(run, check_seeds[t], ScreenCache::Check::kDeterminism);
      run.gates.note(GateId::kDeterminism,
                     pack_.settings.determinism == task::Determinism::kBitwise
                         ? "the same inputs twice gave bitwise identical outputs"
                         : "the same inputs twice gave outputs within tolerance (policy: tolerance)");
    }
  }
  // Infinity (a tolerance of zero spent) has no JSON number: it stays out, the outputs say why.
  if (tolerance_used >= 0 && std::isfinite(tolerance_used)) wr.kda["tolerance_used"] = tolerance_used;
  if (verified_earlier == std::max(1, trials()))
    run.gates.skip(GateId::kCorrectness, kVerifiedBefore);
  else
    run.gates.note(
        GateId::kCorrectness,
        fmt::format("{} trial(s), each on inputs drawn from its own secret seed{}{}", std::max(1, trials()),
                    fresh_wording(run),
                    verified_earlier > 0 ? fmt::format(" ({} of them {})", verified_earlier, kVerifiedBefore) : ""));
  return std::nullopt;
}

std::string Session::fresh_wording(const WorkloadRun& run) const {
  std::string fixed;
  for (const auto& in : pack_.definition.inputs) {
    auto it = run.resolved.workload->inputs.find(in.name);
    if (it == run.resolved.workload->inputs.end() || it->second.kind == task::InputSpec::Kind::kRandom) continue;
    fixed += fmt::format("{}{} ({})", fixed.empty() ? "" : ", ", in.name,
                         it->second.kind == task::InputSpec::Kind::kScalar ? "scalar" : "safetensors blob");
  }
  const std::string& g = pack_.settings.inputs_generator;
  const std::string gen = g.empty() ? "" : " or by the pack's generator '" + g + "'";
  if (fixed.empty()) return fmt::format("; every input drawn fresh (seeded random{})", gen);
  return fmt::format("; fixed by the workload: {}; the others drawn fresh (seeded random{})", fixed, gen);
}

std::optional<Failure> Session::probe_trials(WorkloadRun& run) {
  const auto& probes = pack_.settings.probes;
  if (!gate_on("probes")) {
    gate_off(run, GateId::kProbes);
    return std::nullopt;
  }
  if (probes.empty()) {
    run.gates.skip(GateId::kProbes, "the task names no probes (task.toml [probes])");
    return std::nullopt;
  }
  if (screen_first_look()) {
    run.gates.skip(GateId::kProbes, kScreenRungZero);
    return std::nullopt;
  }
  std::string detail;
  std::vector<task::Probe> kinds;  // distinct, in task.toml order
  for (const auto& [input, list] : probes)
    for (task::Probe p : list)
      if (std::find(kinds.begin(), kinds.end(), p) == kinds.end()) kinds.push_back(p);
  for (size_t k = 0; k < kinds.size(); ++k) {
    const uint64_t seed = derive_seed(*options_.seed, run.uuid, k, kProbe);
    if (verified_before(run, seed, ScreenCache::Check::kProbe)) {
      if (run.gates.runs(GateId::kProbes) == 0) run.gates.skip(GateId::kProbes, kVerifiedBefore);
      continue;
    }
    auto no_probed_input = [&] {  // this workload gives the probed inputs no plain random values
      if (run.gates.runs(GateId::kProbes) == 0)
        run.gates.skip(GateId::kProbes, "no probed input has plain random values in this workload");
    };
    std::string what;
    // Screening: this probe set was made before, and what its transforms were.
    const std::optional<std::string> known = screen_ ? screen_->probe_what(run.uuid, seed) : std::nullopt;
    if (known && known->empty()) {
      no_probed_input();
      continue;
    }
    std::optional<MaterializedInputs> kept = kept_set(run, seed, ScreenCache::SetKind::kProbe);
    if (kept && known) what = *known;
    auto in = kept ? Result<MaterializedInputs>(std::move(*kept)) : materialize(run, seed, /*host_values=*/true);
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
    if (!kept && screen_) {
      if (!what.empty()) keep_set(run, *in, ScreenCache::SetKind::kProbe);
      screen_->set_probe_what(run.uuid, seed, what);
    }
    if (what.empty()) {
      no_probed_input();
      continue;
    }
    auto ref = reference_outputs(run, *in);
    if (!ref.ok()) return Failure{Verdict::kRuntimeError, "runtime_error", ref.status().message(), {}};
    std::vector<tensor::Tensor> got;
    const CallRequest call;  // flushed, uploaded, downloaded, untimed
    if (auto f = checked_call(run, cand_, *in, 700 + k, &got, call, nullptr, nullptr)) return f;
    if (auto f = compare(got, **ref, *in, nullptr))
      return Failure{Verdict::kIncorrectNumerical,
                     "probe_mismatch",
                     fmt::format("off-distribution probe '{}' ({}): {}", task::probe_name(kinds[k]), what, f->message),
                     {},
                     GateId::kProbes};
    detail += fmt::format("{}{} ({})", detail.empty() ? "" : "; ", task::probe_name(kinds[k]), what);
    run.gates.ran(GateId::kProbes);
    mark_verified(run, seed, ScreenCache::Check::kProbe);
    run.gates.note(GateId::kProbes, "correct on off-distribution inputs: " + detail);
  }
  return std::nullopt;
}

std::optional<Failure> Session::stress_trials(WorkloadRun& run) {
  const std::vector<std::string>& stresses = pack_.settings.stress;
  if (!gate_on("stress")) {
    gate_off(run, GateId::kStress);
    return std::nullopt;
  }
  if (stresses.empty()) {
    run.gates.skip(GateId::kStress, "the task names no stress inputs (task.toml [inputs] stress)");
    return std::nullopt;
  }
  if (screen_first_look()) {
    run.gates.skip(GateId::kStress, kScreenRungZero);
    return std::nullopt;
  }
  std::string detail;
  for (size_t k = 0; k < stresses.size(); ++k) {
    const uint64_t seed = derive_seed(*options_.seed, run.uuid, k, kStressSet);
    if (verified_before(run, seed, ScreenCache::Check::kStress)) {
      if (run.gates.runs(GateId::kStress) == 0) run.gates.skip(GateId::kStress, kVerifiedBefore);
      continue;
    }
    auto in = materialize(run, seed, run.host_values, stresses[k]);  // only the generator's tensors are transformed
    if (!in.ok()) return Failure{Verdict::kRuntimeError, "runtime_error", in.status().message(), {}};
    auto ref = reference_outputs(run, *in);
    if (!ref.ok()) return Failure{Verdict::kRuntimeError, "runtime_error", ref.status().message(), {}};
    std::vector<tensor::Tensor> got;
    const CallRequest call;  // flushed, uploaded, downloaded, untimed
    if (auto f = checked_call(run, cand_, *in, 800 + k, &got, call, nullptr, nullptr)) return f;
    const contest::Stress* st = contest::find_stress(pack_.settings.inputs_generator, stresses[k]);
    const std::string what = st != nullptr ? std::string(st->what) : std::string();
    if (auto f = compare(got, **ref, *in, nullptr))
      return Failure{Verdict::kIncorrectNumerical,
                     "stress_mismatch",
                     fmt::format("stress input '{}' ({}): {}", stresses[k], what, f->message),
                     {},
                     GateId::kStress};
    detail += fmt::format("{}{}", detail.empty() ? "" : ", ", stresses[k]);
    run.gates.ran(GateId::kStress);
    mark_verified(run, seed, ScreenCache::Check::kStress);
    run.gates.note(GateId::kStress, "correct on the stress inputs: " + detail);
  }
  return std::nullopt;
}

// Replays after the capture's own launch: other draws of the same shapes (other sequence splits, routings
// and block tables where the pack's generator draws them fresh).
constexpr int kGraphReplays = 2;

std::optional<Failure> Session::graph_launches(WorkloadRun& run, int* nodes) {
  for (int k = 0; k <= kGraphReplays; ++k) {
    const uint64_t seed = derive_seed(*options_.seed, run.uuid, static_cast<uint64_t>(k), kGraphSet);
    auto in = materialize(run, seed, run.host_values);
    if (!in.ok()) return Failure{Verdict::kRuntimeError, "runtime_error", in.status().message(), {}};
    auto ref = reference_outputs(run, *in);
    if (!ref.ok()) return Failure{Verdict::kRuntimeError, "runtime_error", ref.status().message(), {}};
    CallRequest call;  // flushed, uploaded, downloaded, untimed
    call.graph = k == 0 ? CallRequest::Graph::kCapture : CallRequest::Graph::kReplay;
    std::vector<tensor::Tensor> got;
    json extra;
    const std::string which = k == 0 ? std::string("the capture (a call recorded into a CUDA graph, then launched)")
                                     : fmt::format("replay {} of the captured graph on fresh inputs", k);
    if (auto f = checked_call(run, cand_, *in, 900 + static_cast<uint64_t>(k), &got, call, nullptr, &extra)) {
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

std::optional<Failure> Session::graph_contract(WorkloadRun& run, WorkloadResult& wr) {
  const bool required = pack_.settings.graph_contract || options_.require_graph_contract;
  if (!gate_on("graph-contract")) {
    gate_off(run, GateId::kGraphContract);
    return std::nullopt;
  }
  if (!cuda()) {
    run.gates.skip(GateId::kGraphContract, "host backend: CUDA graphs are a CUDA deployment's");
    return std::nullopt;
  }
  if (screening()) {
    run.gates.skip(GateId::kGraphContract, "screening: the contract is checked in official evaluations");
    return std::nullopt;
  }
  int nodes = 0;
  // What the contract costs this workload: the capture, the replays, their references (kda.graph_contract_s).
  std::optional<Failure> broke = timed_into(wr.kda, "graph_contract_s", [&] { return graph_launches(run, &nodes); });
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
    run.gates.ran(GateId::kGraphContract);
    run.gates.note(
        GateId::kGraphContract,
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
  run.gates.skip(
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
      const auto* w = pack.workload(u);  // a holdout uuid given whole is taken too
      if (w == nullptr) {
        // A unique prefix (the table's first 8 characters, say) names a workload too.
        auto visible = pack.visible_workload(u);
        if (!visible.ok()) {
          *error = Status::bad_input("--workloads: " + visible.status().message());
          return {};
        }
        w = *visible;
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
  count(&ScreenStats::candidates);
  return run(candidate);
}

// The evaluation of one candidate: its builds, then each selected workload, then the score.
Result<EvalReport> Session::run(const task::Solution& candidate) {
  const auto t0 = Clock::now();
  phases_ = EvalPhases{};
  in_call_s_ = 0;
  Status sel;
  auto selected = select_workloads(pack_, options_.workloads, &sel);
  if (!sel.ok()) return sel;
  KDA_ASSIGN_OR_RETURN(const Builds builds, build_all(candidate));
  EvalReport report;
  report.definition = pack_.definition.name;
  report.solution = candidate.name;
  report.backend = backend_name();
  report.seed = *options_.seed;
  report.baseline_name = builds.baseline_name;
  report.build = builds.info;
  report.static_gates = builds.static_gates;
  for (size_t i = 0; i < selected.size(); ++i) {
    WorkloadResult wr = evaluate_workload(builds, *selected[i]);
    // A reference or baseline that fails is the harness's problem, not the candidate's.
    if (harness_error_) return *harness_error_;
    const std::string kernels = kernel_breakdown(wr.kda.value("kernel_ms_by_name", nlohmann::json::object()));
    const std::string idle = idle_note(wr.kda.value("idle_ms_median", 0.0), wr.latency_ms);
    progress(fmt::format(
        "[{}/{}] {} {} {}", i + 1, selected.size(), wr.uuid, verdict_name(wr.verdict),
        wr.verdict == Verdict::kPassed
            ? fmt::format("{:.4f} ms (baseline {:.4f} ms, {:.2f}x{}{})", wr.latency_ms, wr.baseline_ms, wr.speedup,
                          kernels.empty() ? "" : "; " + kernels, idle.empty() ? "" : "; " + idle)
            : wr.message));
    // After any failure the candidate runner is replaced: a CUDA error is sticky for its context,
    // and a violating candidate may have left state behind.
    const bool failed = wr.verdict != Verdict::kPassed;
    if (failed && cand_.alive()) cand_.stop();
    report.workloads.push_back(std::move(wr));
    if (failed && screening()) break;  // a screened candidate that failed once is out: the rest is not run
  }
  report.environment = environment_;
  report.in_call_s = in_call_s_;
  score_report(report);
  report.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  report.phases = phases_;
  return report;
}

}  // namespace kda::eval::detail
