#include "task/trace.h"

#include <array>
#include <cmath>

#include "util/fs.h"

namespace kda::task {

namespace {

constexpr std::array<std::pair<EvalStatus, std::string_view>, 7> kStatusNames{{
    {EvalStatus::kPassed, "PASSED"},
    {EvalStatus::kIncorrectShape, "INCORRECT_SHAPE"},
    {EvalStatus::kIncorrectNumerical, "INCORRECT_NUMERICAL"},
    {EvalStatus::kIncorrectDtype, "INCORRECT_DTYPE"},
    {EvalStatus::kRuntimeError, "RUNTIME_ERROR"},
    {EvalStatus::kCompileError, "COMPILE_ERROR"},
    {EvalStatus::kTimeout, "TIMEOUT"},
}};

// NaN-aware equality is not needed by the rules; these just read the optional sub-objects.
std::optional<Correctness> parse_correctness(const ojson& c, const std::string& p, JsonReader& r) {
  if (!r.expect_object(c, p)) return std::nullopt;
  Correctness out;
  size_t before = r.errors();
  out.max_relative_error = r.number(c, p, "max_relative_error", true).value_or(0);
  out.max_absolute_error = r.number(c, p, "max_absolute_error", true).value_or(0);
  if (const ojson* extra = r.member(c, p, "extra", false)) out.extra = nlohmann::json(*extra);
  if (r.errors() > before) return std::nullopt;
  return out;
}

std::optional<Performance> parse_performance(const ojson& c, const std::string& p, JsonReader& r) {
  if (!r.expect_object(c, p)) return std::nullopt;
  Performance out;
  size_t before = r.errors();
  out.latency_ms = r.number(c, p, "latency_ms", true).value_or(0);
  out.reference_latency_ms = r.number(c, p, "reference_latency_ms", true).value_or(0);
  out.speedup_factor = r.number(c, p, "speedup_factor", true).value_or(0);
  if (r.errors() > before) return std::nullopt;
  return out;
}

}  // namespace

std::string_view status_name(EvalStatus s) {
  for (const auto& [k, n] : kStatusNames)
    if (k == s) return n;
  return "RUNTIME_ERROR";
}

std::optional<EvalStatus> status_from_name(std::string_view name) {
  for (const auto& [k, n] : kStatusNames)
    if (n == name) return k;
  return std::nullopt;
}

Status check_status_rules(const Evaluation& e) {
  switch (e.status) {
    case EvalStatus::kPassed:
      if (!e.correctness || !e.performance) return Status::bad_input("PASSED requires correctness and performance");
      break;
    case EvalStatus::kIncorrectNumerical:
      if (!e.correctness) return Status::bad_input("INCORRECT_NUMERICAL requires correctness");
      if (e.performance) return Status::bad_input("INCORRECT_NUMERICAL must not have performance");
      break;
    default:
      if (e.correctness || e.performance)
        return Status::bad_input(std::string(status_name(e.status)) + " must have neither correctness nor performance");
  }
  return Status::ok_status();
}

nlohmann::json Evaluation::to_json() const {
  nlohmann::json j;
  j["status"] = std::string(status_name(status));
  j["environment"] = {{"hardware", environment.hardware}, {"libs", environment.libs}};
  j["timestamp"] = timestamp;
  j["log"] = log;
  if (correctness) {
    j["correctness"] = {{"max_relative_error", number_to_json(correctness->max_relative_error)},
                        {"max_absolute_error", number_to_json(correctness->max_absolute_error)}};
    if (!correctness->extra.is_null()) j["correctness"]["extra"] = correctness->extra;
  } else {
    j["correctness"] = nullptr;
  }
  if (performance) {
    j["performance"] = {{"latency_ms", number_to_json(performance->latency_ms)},
                        {"reference_latency_ms", number_to_json(performance->reference_latency_ms)},
                        {"speedup_factor", number_to_json(performance->speedup_factor)}};
  } else {
    j["performance"] = nullptr;
  }
  if (!kda.is_null()) j["kda"] = kda;
  return j;
}

nlohmann::json Trace::to_json() const {
  return {{"definition", definition},
          {"workload", workload.to_json()},
          {"solution", solution ? nlohmann::json(*solution) : nlohmann::json(nullptr)},
          {"evaluation", evaluation ? evaluation->to_json() : nlohmann::json(nullptr)}};
}

std::optional<Evaluation> evaluation_from_json(const ojson& j, const std::string& file, int line,
                                               const std::string& pointer, Diagnostics& diags) {
  JsonReader r(file, line, diags);
  if (!r.expect_object(j, pointer)) return std::nullopt;
  Evaluation e;
  if (auto s = r.string(j, pointer, "status", true)) {
    if (auto st = status_from_name(*s))
      e.status = *st;
    else
      r.error(child_pointer(pointer, "status"), "unknown status \"" + *s + "\"");
  }
  std::string ep = child_pointer(pointer, "environment");
  if (const ojson* env = r.member(j, pointer, "environment", true); env != nullptr && r.expect_object(*env, ep)) {
    e.environment.hardware = r.string(*env, ep, "hardware", true).value_or("");
    std::string lp = child_pointer(ep, "libs");
    if (const ojson* libs = r.member(*env, ep, "libs", false); libs != nullptr && r.expect_object(*libs, lp)) {
      for (const auto& [name, v] : libs->items())
        if (auto version = r.string(*libs, lp, name.c_str(), true)) e.environment.libs[name] = *version;
    }
  }
  e.timestamp = r.string(j, pointer, "timestamp", true).value_or("");
  e.log = r.string(j, pointer, "log", false).value_or("");
  bool parts_ok = true;
  if (const ojson* c = r.member(j, pointer, "correctness", false)) {
    e.correctness = parse_correctness(*c, child_pointer(pointer, "correctness"), r);
    parts_ok = parts_ok && e.correctness.has_value();
  }
  if (const ojson* p = r.member(j, pointer, "performance", false)) {
    e.performance = parse_performance(*p, child_pointer(pointer, "performance"), r);
    parts_ok = parts_ok && e.performance.has_value();
  }
  if (const ojson* k = r.member(j, pointer, "kda", false)) e.kda = nlohmann::json(*k);
  if (parts_ok) {
    if (Status s = check_status_rules(e); !s.ok()) {
      // Name the field that is missing or forbidden.
      bool missing_corr =
          !e.correctness && (e.status == EvalStatus::kPassed || e.status == EvalStatus::kIncorrectNumerical);
      bool extra_corr = e.correctness && e.status != EvalStatus::kPassed && e.status != EvalStatus::kIncorrectNumerical;
      std::string field = (missing_corr || extra_corr) ? "correctness" : "performance";
      r.error(child_pointer(pointer, field), s.message());
    }
  }
  if (r.errors() > 0) return std::nullopt;
  return e;
}

std::optional<Trace> trace_from_json(const ojson& j, const std::string& file, int line, Diagnostics& diags) {
  JsonReader r(file, line, diags);
  if (!r.expect_object(j, "")) return std::nullopt;
  Trace t;
  t.definition = r.string(j, "", "definition", true, /*non_empty=*/true).value_or("");
  bool ok = true;
  if (const ojson* w = r.member(j, "", "workload", true)) {
    auto wl = workload_from_json(*w, file, line, "/workload", diags);
    if (wl)
      t.workload = std::move(*wl);
    else
      ok = false;
  }
  if (const ojson* s = r.member(j, "", "solution", false)) {
    if (s->is_string() && !s->get<std::string>().empty())
      t.solution = s->get<std::string>();
    else
      r.error("/solution", "must be a non-empty string or null");
  }
  if (const ojson* e = r.member(j, "", "evaluation", false)) {
    auto ev = evaluation_from_json(*e, file, line, "/evaluation", diags);
    if (ev)
      t.evaluation = std::move(*ev);
    else
      ok = false;
  }
  if (ok && t.evaluation && !t.solution) r.error("/solution", "a trace with an evaluation must name its solution");
  if (ok && t.solution && !t.evaluation) r.error("/evaluation", "a trace naming a solution must have an evaluation");
  if (!ok || r.errors() > 0) return std::nullopt;
  return t;
}

std::vector<NumberedTrace> trace_lines_from_jsonl(std::string_view text, const std::string& file, Diagnostics& diags,
                                                  bool workloads_only) {
  std::vector<NumberedTrace> out;
  for (const auto& l : split_jsonl(text)) {
    auto j = parse_json_text(l.text, file, l.line, diags);
    if (!j) continue;
    auto t = trace_from_json(*j, file, l.line, diags);
    if (!t) continue;
    if (workloads_only && !t->is_workload_only()) {
      diags.add(file, l.line, t->solution ? "/solution" : "/evaluation",
                "a workload line must have \"solution\": null and \"evaluation\": null");
      continue;
    }
    out.push_back({l.line, std::move(*t)});
  }
  return out;
}

std::vector<NumberedTrace> load_trace_lines(const std::filesystem::path& path, Diagnostics& diags,
                                            bool workloads_only) {
  auto text = fs::read_file(path);
  if (!text.ok()) {
    diags.add(path.string(), 0, "", text.status().message());
    return {};
  }
  return trace_lines_from_jsonl(*text, path.string(), diags, workloads_only);
}

std::vector<Trace> load_traces(const std::filesystem::path& path, Diagnostics& diags) {
  std::vector<Trace> out;
  for (auto& l : load_trace_lines(path, diags)) out.push_back(std::move(l.trace));
  return out;
}

std::string traces_to_jsonl(const std::vector<Trace>& traces) {
  std::string out;
  for (const auto& t : traces) out += t.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  return out;
}

}  // namespace kda::task
