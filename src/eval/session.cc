// Session: builds, runners, layouts, checked calls, reference outputs and input loads (session.h).
#include "eval/session.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
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

namespace kda::eval::detail {

Result<Builds> Session::build_all(const task::Solution& candidate) {
  PhaseTimer timer(phases_.build_s);
  BuildSettings bs{.cuda_arch = options_.cuda_arch, .cuda = cuda(), .allowed_libraries = pack_.settings.libraries};
  // A FlashInfer-Bench definition taken as a task has no reference solution: the torch oracle runs
  // the definition's Python reference (check_options made sure).
  if (!pack_.python_reference_only && (!screening() || !ref_lib_.ok)) {
    progress("building reference");
    KDA_ASSIGN_OR_RETURN(ref_lib_, build_solution(pack_.reference, bs));
  }
  if (!pack_.python_reference_only && !ref_lib_.ok)
    return Status::bad_input(
        fmt::format("{}: the reference solution does not build:\n{}", pack_.root.string(), ref_lib_.log));
  Builds b{.candidate = &candidate};
  const task::Solution* base = !options_.with_baseline ? nullptr
                               : options_.baseline     ? &*options_.baseline
                                                       : pack_.baseline();
  if (base != nullptr) {
    b.baseline_name = options_.baseline ? options_.baseline->name : pack_.baseline_name;
    progress("building baseline " + b.baseline_name);
    KDA_ASSIGN_OR_RETURN(b.baseline, build_solution(*base, bs));
    if (!b.baseline->ok)
      return Status::bad_input(
          fmt::format("{}: baseline '{}' does not build:\n{}", pack_.root.string(), b.baseline_name, b.baseline->log));
  }
  progress("building candidate " + candidate.name);
  KDA_ASSIGN_OR_RETURN(b.library, build_solution(candidate, bs));
  b.info = {{"candidate", b.library.info},
            {"reference",
             pack_.python_reference_only ? json("the definition's Python reference (torch oracle)") : ref_lib_.info}};
  if (b.baseline) b.info["baseline"] = b.baseline->info;
  if (!b.library.ok) {
    b.blocked = Failure{Verdict::kCompileError, "compile_error",
                        "the candidate does not build: " + build_failure_summary(b.library), b.library.log};
    return b;
  }
  b.static_gates = static_gates(b.library, pack_.settings);
  for (const auto& g : b.static_gates) {
    if (g.failed() && gate_on("import-audit")) {
      b.blocked = Failure{Verdict::kForbiddenImport, g.reason, g.name + ": " + g.detail, {}, GateId::kImportAudit};
      break;
    }
  }
  return b;
}

std::optional<Failure> Session::ensure_runners(const Builds& builds) {
  auto harness = [this](const std::string& message) {
    harness_error_ = Status::internal(message);
    return Failure{Verdict::kRuntimeError, "harness_error", message, {}};
  };
  PhaseTimer timer(phases_.runners_s);
  if (!ref_.alive() && options_.reference == "torch") {
    auto r = start_torch_reference(options_.runner_binary, backend_name(), pack_.definition_file,
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
  if (builds.baseline && !base_.alive()) starts.push_back({&base_, RunnerRole::kBaseline, &*builds.baseline, {}, {}});
  const double load_timeout = std::max(60.0, call_timeout());
  // Screening: a live candidate runner takes the next candidate's library in place; one that
  // cannot is replaced.
  if (screening() && cand_.alive() && cand_loaded_ != builds.library.library) {
    auto o = cand_.reload(builds.library.library, builds.library.symbol, load_timeout);
    if (o.kind == CallOutcome::Kind::kOk) {
      cand_loaded_ = builds.library.library;
      count(&ScreenStats::reloads);
    } else {
      cand_.stop();
    }
  }
  if (!cand_.alive()) starts.push_back({&cand_, RunnerRole::kCandidate, &builds.library, {}, {}});
  for (Start& st : starts) {
    RunnerOptions ro{.runner_binary = options_.runner_binary,
                     .backend = backend_name(),
                     .role = st.role,
                     .sandbox = options_.sandbox && st.role != RunnerRole::kReference};
    // The build cache: where every later candidate's library comes from.
    if (screening() && st.role == RunnerRole::kCandidate) ro.reload_root = st.lib->library.parent_path().parent_path();
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
    st.client->send_load(st.lib->library, st.lib->symbol, load_timeout, st.lib->returns_outputs, st.lib->jit_dir,
                         st.lib->python_module);
  }
  for (Start& st : starts) {
    if (!st.client) continue;
    auto o = st.client->receive();
    if (o.kind == CallOutcome::Kind::kOk) {
      if (environment_.empty() && o.reply.contains("environment") && o.reply["environment"].is_object())
        environment_ = o.reply["environment"];
      *st.slot = std::move(*st.client);
      if (st.role == RunnerRole::kCandidate) {
        cand_loaded_ = st.lib->library;
        count(&ScreenStats::candidate_runner_starts);
      }
      continue;
    }
    st.error = fmt::format("{} runner could not load {}: {}{}", role_name(st.role), st.lib->library.string(), o.message,
                           o.log.empty() ? "" : "\n" + o.log);
  }
  for (const Start& st : starts)
    if (!st.error.empty() && st.role != RunnerRole::kCandidate) return harness(st.error);
  for (const Start& st : starts)
    if (!st.error.empty())
      return sandbox_refusal(st.error, {}).value_or(Failure{Verdict::kRuntimeError, "runtime_error", st.error, {}});
  return std::nullopt;
}

std::optional<Failure> Session::send_layouts(const ArenaLayout& layout, std::initializer_list<RunnerClient*> which) {
  PhaseTimer timer(phases_.layout_s);
  std::vector<RunnerClient*> live;
  for (RunnerClient* r : {&ref_, &base_, &cand_}) {
    if (!r->alive() || (which.size() > 0 && std::find(which.begin(), which.end(), r) == which.end())) continue;
    r->send_layout(layout, 120);
    live.push_back(r);
  }
  std::optional<Failure> first;
  for (RunnerClient* r : live) {
    auto f = classify(r->receive());  // every reply is read, so no runner is left mid-request
    if (!f || first) continue;
    if (r != &cand_)
      harness_error_ =
          Status::internal(fmt::format("{} runner: {}", r == &ref_ ? "reference" : "baseline", f->message));
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
        return Failure{Verdict::kSandboxViolation, "sandbox_killed",
                       "runner killed by SIGSYS: a forbidden system call (fork, exec, "
                       "ptrace, process_vm_*) was attempted",
                       o.log};
      return Failure{Verdict::kRuntimeError, "runtime_error", o.message, o.log};
    case CallOutcome::Kind::kFailed:
      return sandbox_refusal(o.message, o.log)
          .value_or(Failure{Verdict::kRuntimeError, "runtime_error", o.message, o.log});
  }
  return std::nullopt;
}

std::optional<Failure> sandbox_refusal(const std::string& message, const std::string& log) {
  const auto at = message.find(kSandboxRefused);
  if (at == std::string::npos) return std::nullopt;
  const std::string rest = message.substr(at + std::strlen(kSandboxRefused));
  const std::string category = rest.substr(0, rest.find(':'));
  return Failure{Verdict::kSandboxViolation, "sandbox_refused:" + category, message, log};
}

Result<Session::Outputs> Session::reference_outputs(WorkloadRun& run, const MaterializedInputs& inputs) {
  if (screen_)
    if (Outputs kept = screen_->reference(run.uuid, inputs.seed)) return kept;
  bool full_upload = false;
  if (auto f = load_inputs(run, ref_, inputs, &full_upload)) {
    if (!harness_error_)
      harness_error_ = Status::internal(
          fmt::format("the reference runner could not take the inputs of workload {}: {}", run.uuid, f->message));
    return *harness_error_;
  }
  CallRequest call{.upload_from = full_upload ? 0 : outputs_begin(run), .timed = true};
  if (device_inputs(ref_)) {  // poisoned on the device: nothing to upload
    for (size_t k = 0; k < run.layout.outputs.size(); ++k) call.poison.emplace_back(static_cast<uint32_t>(k), ++seq_);
    call.upload = false;
  } else {
    for (const auto& s : run.layout.outputs) ref_.arena().poison(s, ++seq_);
  }
  call.seq = ++seq_;
  auto o = ref_.call(call, std::max(call_timeout(), 600.0));
  account_call(o);
  if (o.kind != CallOutcome::Kind::kOk) {
    harness_error_ = Status::internal(fmt::format("the reference failed on workload {}: {}{}", run.uuid, o.message,
                                                  o.log.empty() ? "" : "\n" + o.log));
    return *harness_error_;
  }
  const int64_t elapsed_ns = o.call_reply().elapsed_ns;
  run.reference_samples.push_back(static_cast<double>(elapsed_ns) / 1e6);
  in_call_s_ += static_cast<double>(elapsed_ns) / 1e9;
  PhaseTimer timer(phases_.verify_call_s);
  auto out = std::make_shared<const std::vector<tensor::Tensor>>(read_outputs(run, ref_));
  if (screen_) screen_->computed_reference(run.uuid, inputs.seed, out);
  return out;
}

std::optional<Failure> Session::checked_call(WorkloadRun& run, RunnerClient& runner, const MaterializedInputs& inputs,
                                             uint64_t salt, std::vector<tensor::Tensor>* outputs, CallRequest call,
                                             double* elapsed_ms, json* reply_extra) {
  // One secret guard pattern per workload: on CUDA, calls that upload only the outputs leave the
  // device copy of the input guards as they were, so the pattern must not change between calls.
  const uint64_t guard_seed = this->guard_seed(run);
  // Only the candidate's checks are its gates' record (the baseline's failures are the harness's).
  GateLedger& led = &runner == &cand_ ? run.gates : run.baseline_gates;
  SharedArena& arena = runner.arena();
  const bool download = call.download;
  bool fresh_inputs = false;
  if (auto f = load_inputs(run, runner, inputs, &fresh_inputs)) return f;
  call.upload_from = fresh_inputs ? 0 : outputs_begin(run);
  // Output i's poison for this call: written before it, looked for after it (unwritten elements).
  auto poison_seed = [&](size_t i) { return derive_seed(*options_.seed, run.uuid, salt * 131 + i, kPoison); };
  // On the host the candidate works in the shared arena itself, so guards are refilled only with
  // fresh inputs: damage done by an unchecked call stays visible until the next checked one.
  int threads_before = 0;
  {
    PhaseTimer timer(phases_.prepare_call_s);
    if (device_inputs(runner)) {
      // Outputs are poisoned on the device from the same seeded blocks, and nothing is uploaded: the
      // guard bands have lived there since kPrepare.
      for (size_t i = 0; i < run.layout.outputs.size(); ++i)
        call.poison.emplace_back(static_cast<uint32_t>(i), poison_seed(i));
      call.upload = false;
    } else {
      if (fresh_inputs || cuda()) arena.fill_guards(run.layout, guard_seed);
      for (size_t i = 0; i < run.layout.outputs.size(); ++i) arena.poison(run.layout.outputs[i], poison_seed(i));
    }
    threads_before = runner.thread_count();
  }
  call.seq = ++seq_;
  auto o = runner.call(call, call_timeout());
  account_call(o);
  // Driver functions fetched by name that are not tensor-map encoders: refused by the runner, and a
  // violation whatever the call then did (src/runner/entry_point_guard.h).
  const CallReply reply = o.call_reply();  // none when the call died: classify below says why
  const json refused = reply.extra.value("driver_entry_points_refused", json::array());
  if (refused.is_array() && !refused.empty())
    return Failure{
        Verdict::kForbiddenImport,
        "forbidden_import:driver_entry_point",
        "the call fetched driver function(s) by name that only tensor-map encoding may fetch: " + refused.dump(),
        {},
        GateId::kImportAudit};
  if (auto f = classify(o)) return f;
  const int64_t elapsed_ns = reply.elapsed_ns;
  in_call_s_ += static_cast<double>(elapsed_ns) / 1e9;
  if (elapsed_ms) *elapsed_ms = static_cast<double>(elapsed_ns) / 1e6;
  if (reply_extra) *reply_extra = reply.extra;
  // The runner's clock is a claim: it cannot exceed the evaluator's own clock around the request.
  if (!gate_on("timing-clock")) {
    led.skip(GateId::kTimingClock, kOff);
  } else if (static_cast<double>(elapsed_ns) / 1e9 > o.wall_s + 1e-3) {
    return Failure{
        Verdict::kTimingInconsistent,
        "timing_inconsistent",
        fmt::format("runner reported {:.3f} ms but the request took {:.3f} ms", elapsed_ns / 1e6, o.wall_s * 1e3),
        {},
        GateId::kTimingClock};
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
    return Failure{Verdict::kThreadLeak,
                   "thread_count_changed",
                   fmt::format("runner had {} threads before the call and {} after: work may continue after return "
                               "(task policy: threads = false)",
                               threads_before, threads_after),
                   {},
                   GateId::kThreads};
  } else {
    led.ran(GateId::kThreads);
  }
  if (!download) return std::nullopt;
  // download_outputs false: guard bands and inputs only (the runner copies no outputs back).
  const bool with_outputs = call.download_outputs;
  PhaseTimer timer(phases_.verify_call_s);
  if (!gate_on("guard-bands")) {
    led.skip(GateId::kGuardBands, kOff);
  } else if (auto bad = arena.damaged_guards(run.layout, guard_seed); !bad.empty()) {
    std::string names;
    for (const auto& b : bad) names += (names.empty() ? "" : ", ") + b;
    return Failure{
        Verdict::kOutOfBounds, "out_of_bounds", "guard band written around: " + names, {}, GateId::kGuardBands};
  } else {
    led.ran(GateId::kGuardBands);
  }
  if (auto f = input_check(run, runner, inputs, reply.extra.value("input_digests", json::array()), led)) return f;
  if (!with_outputs) return std::nullopt;
  std::vector<tensor::Tensor> got = read_outputs(run, runner);
  if (!gate_on("unwritten")) led.skip(GateId::kUnwritten, kOff);
  for (size_t k = 0; k < got.size() && gate_on("unwritten"); ++k) {
    // Elements whose bits still equal the poison written before the call.
    int64_t left = count_poisoned(run.layout.outputs[k].dtype, poison_seed(k), got[k].data(),
                                  static_cast<uint64_t>(got[k].nbytes()));
    if (left > 0)
      return Failure{Verdict::kIncorrectNumerical,
                     "unwritten_output",
                     fmt::format("{} of {} elements of output '{}' were never written (the poison is still there)",
                                 left, got[k].numel(), run.layout.outputs[k].name),
                     {},
                     GateId::kUnwritten};
  }
  if (gate_on("unwritten")) led.ran(GateId::kUnwritten);
  if (outputs) *outputs = std::move(got);
  return std::nullopt;
}

std::optional<Failure> Session::input_check(WorkloadRun& run, RunnerClient& runner, const MaterializedInputs& inputs,
                                            const json& got_digests, GateLedger& led) {
  // Inputs are compared with the evaluator's own copy; calls in between that did not re-upload
  // them leave any mutation in place, so a checked call sees what every earlier call did.
  // Device-side inputs are digested by the runner after the call under the evaluation's secret key;
  // scalars (passed as host values) and host-side inputs are compared in the arena.
  const bool by_digest = device_inputs(runner);
  const auto& want = run.loaded[&runner].digests;
  std::string mutated;
  for (size_t i = 0; i < run.layout.inputs.size(); ++i) {
    bool same;
    if (by_digest && !run.layout.inputs[i].scalar)
      same = i < want.size() && i < got_digests.size() && got_digests[i].is_array() && got_digests[i].size() == 2 &&
             got_digests[i][0].get<uint64_t>() == want[i].lo && got_digests[i][1].get<uint64_t>() == want[i].hi;
    else
      same = runner.arena().equals(run.layout.inputs[i], inputs.tensors[i]);
    if (!same) mutated += (mutated.empty() ? "" : ", ") + run.layout.inputs[i].name;
  }
  if (!gate_on("input-check")) {
    led.skip(GateId::kInputCheck, kOff);
  } else if (!mutated.empty()) {
    return Failure{
        Verdict::kInputMutated, "input_mutated", "the call modified input(s): " + mutated, {}, GateId::kInputCheck};
  } else {
    led.ran(GateId::kInputCheck);
  }
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

Result<std::vector<MaterializedInputs>> Session::materialize_all(const WorkloadRun& run,
                                                                 const std::vector<uint64_t>& seeds) {
  std::vector<MaterializedInputs> out;
  if (seeds.empty()) return out;
  PhaseTimer timer(phases_.materialize_s);
  std::vector<std::optional<Result<MaterializedInputs>>> made(seeds.size());
  std::vector<bool> kept(seeds.size(), false);
  for (size_t i = 0; i < seeds.size(); ++i)
    if (auto k = kept_set(run, seeds[i], ScreenCache::SetKind::kRaw)) {
      made[i] = std::move(*k);
      kept[i] = true;
    }
  std::vector<std::pair<uint64_t, uint64_t>> todo;
  for (uint64_t i = 0; i < seeds.size(); ++i)
    if (!kept[i]) todo.emplace_back(i, i + 1);
  auto make = [&](uint64_t i) {
    made[i] = materialize_inputs(pack_, run.resolved, seeds[i], blobs_, run.host_values, generator_seed());
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
    keep_set(run, out.back(), ScreenCache::SetKind::kRaw);
  }
  return out;
}

std::optional<Failure> Session::load_inputs(WorkloadRun& run, RunnerClient& r, const MaterializedInputs& in,
                                            bool* full_upload) {
  WorkloadRun::Loaded& loaded = run.loaded[&r];
  *full_upload = false;
  if (loaded.id == in.id) return std::nullopt;
  loaded = {};
  SharedArena& arena = r.arena();
  if (!device_inputs(r)) {
    if (!in.host_values) return Failure{Verdict::kRuntimeError, "harness_error", "inputs have no host values", {}};
    PhaseTimer timer(phases_.load_s);
    for (size_t i = 0; i < run.layout.inputs.size(); ++i) arena.write(run.layout.inputs[i], in.tensors[i]);
    loaded.id = in.id;
    *full_upload = true;
    return std::nullopt;
  }
  PhaseTimer timer(phases_.load_s);
  PrepareRequest prep;
  for (size_t i = 0; i < run.layout.inputs.size(); ++i) {
    PrepareInput spec{.random = in.plain_random[i]};
    if (!spec.random) arena.write(run.layout.inputs[i], in.tensors[i]);
    if (spec.random) {
      spec.seed = in.random[i].seed;
      spec.stream = in.random[i].stream;
      spec.fingerprint_seed = in.random[i].fingerprint_seed;
    }
    prep.inputs.push_back(spec);
  }
  arena.fill_guards(run.layout, guard_seed(run));
  const uint64_t key = derive_seed(*options_.seed, run.uuid, 0, kDigestKey);
  prep.digest_key = key;
  auto o = r.prepare(prep, std::max(60.0, call_timeout()));
  if (auto f = classify(o)) return f;
  auto reply = PrepareReply::from_json(o.reply);
  if (!reply.ok() || reply->digests.size() != run.layout.inputs.size())
    return Failure{Verdict::kRuntimeError, "harness_error", "the runner returned no digest per input", {}};
  for (const auto& d : reply->digests) loaded.digests.push_back({d[0], d[1]});
  // Every runner must hold the same inputs: the first to generate a set fixes its digests, and where
  // the evaluator has host values (the topk checker reads them) they must agree with the device's
  // (checked on the first set of each workload: hashing on the host is not free).
  auto [it, first] = run.set_digests.try_emplace(in.id, loaded.digests);
  const bool check_host = first && in.host_values && run.set_digests.size() == 1;
  std::string differs;
  for (size_t i = 0; i < run.layout.inputs.size(); ++i) {
    bool same = it->second[i] == loaded.digests[i];
    if (same && check_host)
      same =
          digest_bytes(in.tensors[i].data(), static_cast<uint64_t>(in.tensors[i].nbytes()), key) == loaded.digests[i];
    if (!same) differs += (differs.empty() ? "" : ", ") + run.layout.inputs[i].name;
  }
  if (!differs.empty()) {
    harness_error_ = Status::internal(fmt::format(
        "workload {}: the device-generated input(s) {} differ {} (a runner or GPU fault; re-run with --host-inputs)",
        run.uuid, differs, first ? "from the host generation" : "between runners"));
    return Failure{Verdict::kRuntimeError, "harness_error", "device-side inputs disagree", {}};
  }
  loaded.id = in.id;
  return std::nullopt;
}

}  // namespace kda::eval::detail
