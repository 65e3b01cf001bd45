#include "report/monitor.h"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "loop/criteria.h"
#include "loop/round_outcome.h"
#include "loop/run_state.h"
#include "util/fs.h"

namespace kda::report {

namespace {

using nlohmann::json;

std::string bar(double used, double limit, int cells = 20) {
  if (limit <= 0) return "";
  const int n = static_cast<int>(std::clamp(used / limit, 0.0, 1.0) * cells + 0.5);
  return "[" + std::string(n, '#') + std::string(cells - n, '-') + "]";
}

std::string fit(std::string s, int width) {
  if (width > 3 && static_cast<int>(s.size()) > width) s = s.substr(0, width - 3) + "...";
  return s;
}

// The last `n` records of the audit log (read from its tail: a long run's log is large).
std::vector<json> audit_tail(const std::filesystem::path& file, int n) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) return {};
  const std::streamoff size = in.tellg(), take = std::min<std::streamoff>(size, 256 * 1024);
  std::string text(static_cast<size_t>(take), '\0');
  in.seekg(size - take);
  in.read(text.data(), take);
  std::vector<json> out;
  size_t end = text.size();
  while (end > 0 && static_cast<int>(out.size()) < n) {
    size_t start = text.rfind('\n', end - 1);
    start = start == std::string::npos ? 0 : start + 1;
    if (start == 0 && take < size) break;  // a cut first line
    if (end > start) {
      auto j = json::parse(text.substr(start, end - start), nullptr, false);
      if (j.is_object()) out.push_back(std::move(j));
    }
    if (start == 0) break;
    end = start - 1;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

// "writer  tool_call evaluate", "kda  state round started" ...
std::string activity_line(const json& r) {
  const std::string time = r.value("time", "");
  const json& d = r.value("data", json::object());
  std::string what = r.value("type", "");
  if (d.contains("event")) what += " " + d.value("event", "");
  if (d.contains("kind")) what += " " + d.value("kind", "");
  if (const json& detail = d.value("detail", json::object()); detail.is_object()) {
    if (detail.contains("name")) what += " " + detail.value("name", "");
    if (detail.contains("path")) what += " " + detail.value("path", "");
  }
  if (d.contains("why")) what += " (" + d.value("why", "") + ")";
  if (d.contains("summary") && d["summary"].is_object() && d["summary"].contains("geomean"))
    what += fmt::format(": geomean {:.3f}x", d["summary"].value("geomean", 0.0));
  if (d.contains("round") && d["round"].is_number()) what += fmt::format(" round {}", d["round"].get<int>());
  return fmt::format("{} {:<8} {}", time.size() >= 19 ? time.substr(11, 8) : time, r.value("actor", ""), what);
}

}  // namespace

Result<MonitorSnapshot> monitor_snapshot(const std::filesystem::path& run_dir, int width, int activity_lines) {
  if (!std::filesystem::exists(run_dir / "state.json"))
    return Status::not_found((run_dir / "state.json").string() + ": no run there (yet)");
  KDA_ASSIGN_OR_RETURN(loop::RunState st, loop::load_state(run_dir / "state.json"));
  loop::Ledger ledger;
  if (std::filesystem::exists(run_dir / "ledger.json")) {
    KDA_ASSIGN_OR_RETURN(ledger, loop::load_ledger(run_dir / "ledger.json"));
  }
  const json rounds = loop::round_table(run_dir, st.round, ledger);
  const auto& o = st.options;
  MonitorSnapshot s;
  s.phase = loop::phase_name(st.phase);
  s.step = loop::step_name(st.step);
  s.finished = loop::is_terminal(st.phase);

  std::vector<std::string> lines;
  lines.push_back(fmt::format("kda monitor  {}", run_dir.string()));
  std::string where = s.phase;
  if (st.phase == loop::Phase::kRound)
    where = st.round > o.max_rounds ? fmt::format("round -, all {} rounds used", o.max_rounds)
                                    : fmt::format("round {} of {}, step {}", st.round, o.max_rounds, s.step);
  else if (!s.step.empty())
    where += ", step " + s.step;
  lines.push_back(fmt::format("phase {}{}", where, st.stop_reason.empty() ? "" : "  (" + st.stop_reason + ")"));
  double target = 1;
  if (auto t = loop::parse_target(o.target); t.ok()) target = t->min_geomean_speedup;
  std::string ci =
      st.incumbent_ci_high > 0 ? fmt::format(" (95 % {:.3f}-{:.3f})", st.incumbent_ci_low, st.incumbent_ci_high) : "";
  lines.push_back(fmt::format("incumbent {}  {:.3f}x vs the baseline{}  target {:g}x{}", st.incumbent_id,
                              st.incumbent_speedup, ci, target, st.phase == loop::Phase::kDone ? "  MET" : ""));
  const int64_t tokens = st.usage.input_tokens + st.usage.output_tokens;
  const int rounds_used = std::max(0, std::min(st.round, o.max_rounds + 1) - 1);
  auto limit = [](double v, const char* unit) { return v > 0 ? fmt::format("{:g}{}", v, unit) : std::string("none"); };
  lines.push_back("budgets");
  lines.push_back(fmt::format("  rounds  {:>8} / {:<8} {}", rounds_used, o.max_rounds, bar(rounds_used, o.max_rounds)));
  lines.push_back(fmt::format("  tokens  {:>8} / {:<8} {}", tokens,
                              o.budget_tokens > 0 ? std::to_string(o.budget_tokens) : "none",
                              bar(static_cast<double>(tokens), static_cast<double>(o.budget_tokens))));
  lines.push_back(fmt::format("  usd     {:>8.2f} / {:<8} {}", st.usage.cost_usd, limit(o.budget_usd, ""),
                              bar(st.usage.cost_usd, o.budget_usd)));
  lines.push_back(fmt::format("  eval    {:>6.2f} m / {:<8} {}", st.eval_s / 60, limit(o.gpu_minutes, " m"),
                              bar(st.eval_s / 60, o.gpu_minutes)));
  lines.push_back(fmt::format("  wall    {:>6.2f} h / {:<8} {}", st.elapsed_s / 3600, limit(o.hours, " h"),
                              bar(st.elapsed_s / 3600, o.hours)));
  lines.push_back("rounds");
  lines.push_back(fmt::format("  {:>5}  {:<9} {:<9} {:<13} {:>9}  {}", "round", "candidate", "outcome", "reason",
                              "geomean", "reviewer"));
  const size_t first = rounds.size() > 6 ? rounds.size() - 6 : 0;
  for (size_t i = first; i < rounds.size(); ++i) {
    const json& r = rounds[i];
    const bool accepted = r.value("accepted", false);
    lines.push_back(fmt::format("  {:>5}  {:<9} {:<9} {:<13} {:>8.3f}x  {}", r.value("round", 0),
                                r.value("candidate", ""), accepted ? "accepted" : "rejected", r.value("reason", ""),
                                r.value("geomean", 0.0), r.value("review", "")));
    if (!accepted) lines.push_back("         " + r.value("detail", ""));
  }
  if (rounds.empty()) lines.push_back("  (none measured yet)");
  lines.push_back("activity (audit log)");
  const std::vector<json> tail = audit_tail(run_dir / "audit.jsonl", activity_lines);
  json activity = json::array();
  for (const auto& r : tail) {
    lines.push_back("  " + activity_line(r));
    activity.push_back(activity_line(r));
  }
  for (auto& l : lines) s.frame += fit(l, width) + "\n";
  s.json = {{"run_dir", run_dir.string()},
            {"phase", s.phase},
            {"step", s.step},
            {"round", st.round},
            {"max_rounds", o.max_rounds},
            {"incumbent", st.incumbent_id},
            {"speedup", st.incumbent_speedup},
            {"target", target},
            {"stop_reason", st.stop_reason},
            {"tokens", tokens},
            {"cost_usd", st.usage.cost_usd},
            {"eval_s", st.eval_s},
            {"elapsed_s", st.elapsed_s},
            {"round_table", rounds},
            {"activity", activity}};
  return s;
}

}  // namespace kda::report
