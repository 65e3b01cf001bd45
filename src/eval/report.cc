// Trace and report JSON for evaluation results (FlashInfer-Bench Trace + kda's fields).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include <fmt/format.h>

#include "eval/evaluator.h"

namespace kda::eval {

nlohmann::json EvalPhases::to_json(double wall_s) const {
  // call_wall_s contains runner_pre_s, runner_post_s and the calls themselves.
  const double accounted =
      build_s + materialize_s + load_s + prepare_call_s + call_wall_s + verify_call_s + check_s + runners_s + layout_s;
  return {{"build_s", build_s},
          {"materialize_s", materialize_s},
          {"load_s", load_s},
          {"prepare_call_s", prepare_call_s},
          {"call_wall_s", call_wall_s},
          {"verify_call_s", verify_call_s},
          {"check_s", check_s},
          {"runner_pre_s", runner_pre_s},
          {"runner_post_s", runner_post_s},
          {"runners_s", runners_s},
          {"layout_s", layout_s},
          {"calls", calls},
          {"other_s", std::max(0.0, wall_s - accounted)}};
}

namespace {

nlohmann::json stats_json(const SampleStats& s) {
  return {{"n", s.n},        {"median_ms", s.median}, {"mean_ms", s.mean}, {"min_ms", s.min},
          {"max_ms", s.max}, {"p10_ms", s.p10},       {"p90_ms", s.p90},   {"cv", s.cv}};
}

std::string iso_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

nlohmann::json gates_json(const std::vector<Gate>& gates) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& g : gates) {
    nlohmann::json r{
        {"gate", g.name}, {"status", gate_status_name(g.status)}, {"passed", g.passed()}, {"detail", g.detail}};
    if (!g.reason.empty()) r["reason"] = g.reason;
    a.push_back(std::move(r));
  }
  return a;
}

// What was present, as the runners and the builder reported it: the hardware, the driver and CUDA
// versions, the compilers of the candidate's build.
nlohmann::json environment_json(const EvalReport& report) {
  nlohmann::json libs{{"kda", "0.1.0"}};
  for (const auto& [name, value] : report.environment.items())
    if (name != "hardware" && value.is_string()) libs[name] = value;
  const nlohmann::json compilers = report.build.contains("candidate")
                                       ? report.build["candidate"].value("compilers", nlohmann::json::array())
                                       : nlohmann::json::array();
  if (compilers.is_array()) {
    if (compilers.size() > 0 && compilers[0].is_string()) libs["compiler"] = compilers[0];
    if (compilers.size() > 1 && compilers[1].is_string()) libs["host_compiler"] = compilers[1];
  }
  // Header libraries the machine gave the candidate's build (CUTLASS from KDA_CUTLASS_DIR, ...).
  const nlohmann::json machine = report.build.contains("candidate")
                                     ? report.build["candidate"].value("machine_headers", nlohmann::json::array())
                                     : nlohmann::json::array();
  for (const auto& h : machine)
    if (h.is_object())
      libs[h.value("name", std::string("headers"))] =
          fmt::format("{} ({}: {})", h.value("version", std::string("version unknown")),
                      h.value("source", std::string()), h.value("dir", std::string()));
  const std::string hardware = report.environment.value("hardware", std::string("unknown (no runner reported it)"));
  return {{"hardware", hardware}, {"libs", libs}};
}

}  // namespace

nlohmann::json trace_json(const EvalReport& report, const WorkloadResult& w, const task::TaskPack& pack) {
  nlohmann::json eval;
  const std::string status(verdict_status(w.verdict));
  eval["status"] = status;
  eval["environment"] = environment_json(report);
  eval["timestamp"] = iso_now();
  std::string log = w.message;
  if (!w.log.empty()) log += "\n" + w.log;
  if (log.size() > 5'000'000) log.resize(5'000'000);
  eval["log"] = log;
  // FlashInfer-Bench field rules: PASSED has correctness and performance; INCORRECT_NUMERICAL has
  // correctness only; every other status has neither.
  if ((status == "PASSED" || status == "INCORRECT_NUMERICAL") && w.check) {
    auto c = w.check->to_json();
    eval["correctness"] = {{"max_relative_error", c["max_relative_error"]},
                           {"max_absolute_error", c["max_absolute_error"]},
                           {"extra",
                            {{"matched_ratio", w.check->matched_ratio},
                             {"tolerance_used", c["tolerance_used"]},
                             {"outputs", c["outputs"]}}}};
  } else if (status == "INCORRECT_NUMERICAL") {
    eval["correctness"] = {{"max_relative_error", nullptr}, {"max_absolute_error", nullptr}, {"extra", nullptr}};
  } else {
    eval["correctness"] = nullptr;
  }
  if (status == "PASSED") {
    eval["performance"] = {{"latency_ms", w.latency_ms},
                           {"reference_latency_ms", w.reference_ms},
                           {"speedup_factor", w.latency_ms > 0 ? w.reference_ms / w.latency_ms : 0}};
  } else {
    eval["performance"] = nullptr;
  }
  nlohmann::json kda = w.kda;
  kda["verdict"] = std::string(verdict_name(w.verdict));
  kda["reason"] = w.reason;
  kda["message"] = w.message;
  kda["seed"] = report.seed;
  kda["candidate"] = stats_json(w.candidate);
  if (!w.trial_ms.empty()) kda["candidate"]["trials_ms"] = w.trial_ms;
  if (w.baseline.n > 0) {
    kda["baseline"] = {
        {"name", report.baseline_name}, {"latency_ms", w.baseline_ms}, {"stats", stats_json(w.baseline)}};
    if (!w.baseline_trial_ms.empty()) kda["baseline"]["stats"]["trials_ms"] = w.baseline_trial_ms;
    kda["speedup_vs_baseline"] = w.speedup;
  }
  if (w.roofline_floor_ms) kda["roofline_floor_ms"] = *w.roofline_floor_ms;
  kda["gates"] = gates_json(w.gates);
  eval["kda"] = kda;
  nlohmann::json workload{{"uuid", w.uuid}, {"axes", w.axes}, {"inputs", nlohmann::json::object()}};
  if (const auto* wl = pack.workload(w.uuid)) {
    for (const auto& [name, spec] : wl->inputs) {
      switch (spec.kind) {
        case task::InputSpec::Kind::kRandom: workload["inputs"][name] = {{"type", "random"}}; break;
        case task::InputSpec::Kind::kScalar:
          workload["inputs"][name] = {{"type", "scalar"}, {"value", spec.value}};
          break;
        case task::InputSpec::Kind::kSafetensors:
          workload["inputs"][name] = {{"type", "safetensors"}, {"path", spec.path}, {"tensor_key", spec.tensor_key}};
          break;
      }
    }
  }
  return {
      {"definition", report.definition}, {"workload", workload}, {"solution", report.solution}, {"evaluation", eval}};
}

nlohmann::json report_json(const EvalReport& report, const task::TaskPack& pack) {
  nlohmann::json score = {{"mean_speedup", report.score_mean}, {"geomean_speedup", report.score_geomean}};
  if (report.geomean_ci) score["geomean_ci95"] = {report.geomean_ci->low, report.geomean_ci->high};
  nlohmann::json traces = nlohmann::json::array();
  for (const auto& w : report.workloads) traces.push_back(trace_json(report, w, pack));
  return {{"definition", report.definition},
          {"solution", report.solution},
          {"backend", report.backend},
          {"seed", report.seed},
          {"all_passed", report.all_passed},
          {"score", score},
          {"baseline", report.baseline_name},
          {"wall_s", report.wall_s},
          {"in_call_s", report.in_call_s},
          {"overhead", report.in_call_s > 0 ? report.wall_s / report.in_call_s : 0},
          {"phases", report.phases.to_json(report.wall_s)},
          {"build", report.build},
          {"static_gates", gates_json(report.static_gates)},
          {"traces", traces}};
}

namespace {

SampleStats stats_from(const nlohmann::json& j) {
  SampleStats s;
  if (!j.is_object()) return s;
  s.n = j.value("n", 0);
  s.median = j.value("median_ms", 0.0);
  s.mean = j.value("mean_ms", 0.0);
  s.min = j.value("min_ms", 0.0);
  s.max = j.value("max_ms", 0.0);
  s.p10 = j.value("p10_ms", 0.0);
  s.p90 = j.value("p90_ms", 0.0);
  s.cv = j.value("cv", 0.0);
  return s;
}

std::vector<double> trials_from(const nlohmann::json& j) {
  std::vector<double> out;
  if (j.is_object() && j.contains("trials_ms") && j["trials_ms"].is_array())
    for (const auto& v : j["trials_ms"])
      if (v.is_number()) out.push_back(v.get<double>());
  return out;
}

}  // namespace

Result<WorkloadResult> workload_from_trace(const nlohmann::json& trace) {
  const auto field = [&](const char* path) { return Status::bad_input(std::string("trace: no ") + path); };
  if (!trace.is_object() || !trace.contains("workload") || !trace["workload"].is_object() ||
      !trace["workload"].contains("uuid"))
    return field("workload.uuid");
  if (!trace.contains("evaluation") || !trace["evaluation"].is_object()) return field("evaluation");
  const nlohmann::json& ev = trace["evaluation"];
  const nlohmann::json kda = ev.value("kda", nlohmann::json::object());
  if (!kda.is_object() || !kda.contains("verdict") || !kda["verdict"].is_string())
    return field("evaluation.kda.verdict");
  WorkloadResult w;
  w.uuid = trace["workload"]["uuid"].get<std::string>();
  w.axes = trace["workload"].value("axes", nlohmann::json::object());
  const std::string verdict = kda["verdict"];
  const std::optional<Verdict> known = verdict_from_name(verdict);
  if (!known) return Status::bad_input("trace: unknown verdict '" + verdict + "'");
  w.verdict = *known;
  w.reason = kda.value("reason", std::string());
  w.message = kda.value("message", std::string());
  w.candidate = stats_from(kda.value("candidate", nlohmann::json()));
  w.trial_ms = trials_from(kda.value("candidate", nlohmann::json()));
  if (ev.contains("performance") && ev["performance"].is_object()) {
    w.latency_ms = ev["performance"].value("latency_ms", 0.0);
    w.reference_ms = ev["performance"].value("reference_latency_ms", 0.0);
  }
  if (kda.contains("baseline") && kda["baseline"].is_object()) {
    w.baseline_ms = kda["baseline"].value("latency_ms", 0.0);
    w.baseline = stats_from(kda["baseline"].value("stats", nlohmann::json()));
    w.baseline_trial_ms = trials_from(kda["baseline"].value("stats", nlohmann::json()));
  }
  w.speedup = kda.value("speedup_vs_baseline", 0.0);
  if (kda.contains("roofline_floor_ms") && kda["roofline_floor_ms"].is_number())
    w.roofline_floor_ms = kda["roofline_floor_ms"].get<double>();
  for (const auto& g : kda.value("gates", nlohmann::json::array())) {
    if (!g.is_object()) continue;
    const std::string st = g.value("status", std::string());
    w.gates.push_back({.name = g.value("gate", std::string()),
                       .status = st == "pass"   ? GateStatus::kPass
                                 : st == "fail" ? GateStatus::kFail
                                                : GateStatus::kSkipped,
                       .detail = g.value("detail", std::string()),
                       .reason = g.value("reason", std::string())});
  }
  w.kda = kda;
  return w;
}

void score_report(EvalReport& report) {
  std::vector<double> speedups;
  bool all_passed = true;
  for (const auto& w : report.workloads) {
    all_passed = all_passed && w.verdict == Verdict::kPassed;
    if (w.verdict == Verdict::kPassed && w.speedup > 0) speedups.push_back(w.speedup);
  }
  report.all_passed = all_passed;
  report.score_mean = all_passed ? arithmetic_mean(speedups) : 0;
  report.score_geomean = all_passed ? geometric_mean(speedups) : 0;
  report.geomean_ci.reset();
  const bool baselined = std::all_of(report.workloads.begin(), report.workloads.end(),
                                     [](const WorkloadResult& w) { return !w.baseline_trial_ms.empty(); });
  if (all_passed && baselined && !report.workloads.empty()) {
    std::vector<std::vector<double>> cand, base;
    for (const auto& w : report.workloads) {
      cand.push_back(w.trial_ms);
      base.push_back(w.baseline_trial_ms);
    }
    report.geomean_ci = geomean_speedup_ci(cand, base, report.score_geomean);
  }
}

}  // namespace kda::eval
