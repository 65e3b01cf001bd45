// The page of a kda run directory: what the run is, how the speedup went over rounds, why each
// round ended as it did, the candidate DAG, the reviewer's verdicts, the final solution per workload,
// budgets and the audit log's state.
#include "report/run_report.h"

#include <fmt/format.h>

#include "audit/audit_log.h"
#include "loop/criteria.h"
#include "loop/round_outcome.h"
#include "report/svg.h"

namespace kda::report {

namespace {

using nlohmann::json;

constexpr const char* kAccepted = "#1b7f3b";
constexpr const char* kRejected = "#b42318";
constexpr const char* kStart = "#2563eb";

std::string speedup_text(double v) { return fmt::format("{:.3f}x", v); }

std::string card(std::string_view key, std::string value_html) {
  return fmt::format("<div class=\"card\"><div class=\"k\">{}</div><div class=\"v\">{}</div></div>", escape(key),
                     value_html);
}

// Index of candidate `id` in ledger.json's array, for its JSON pointer.
int ledger_index(const json& ledger, const std::string& id) {
  const json& cs = ledger.value("candidates", json::array());
  for (size_t i = 0; i < cs.size(); ++i)
    if (cs[i].value("id", "") == id) return static_cast<int>(i);
  return -1;
}

std::string summary_cards(const json& state, int rounds_measured, Files& files) {
  const std::string phase = state.value("phase", "?");
  std::string s = "<div class=\"cards\">";
  std::string status = fmt::format("<span class=\"{}\">{}</span>",
                                   phase == "done"      ? "ok"
                                   : phase == "stopped" ? "bad"
                                                        : "muted",
                                   escape(phase));
  s += card("status", status);
  const std::string inc = state.value("/incumbent/id"_json_pointer, std::string("c000"));
  s += card("incumbent", "<code>" + escape(inc) + "</code>");
  if (auto v = number_at(state, "/incumbent/speedup"))
    s += card("incumbent speedup vs the baseline",
              number(*v, speedup_text(*v), {"state.json", 0, "/incumbent/speedup"}));
  auto lo = number_at(state, "/incumbent/ci95/0"), hi = number_at(state, "/incumbent/ci95/1");
  if (lo && hi && *hi > 0)
    s += card("its 95 % interval", number(*lo, speedup_text(*lo), {"state.json", 0, "/incumbent/ci95/0"}) + " - " +
                                       number(*hi, speedup_text(*hi), {"state.json", 0, "/incumbent/ci95/1"}));
  if (auto m = number_at(state, "/options/max_rounds"))
    s += card("rounds measured / max",
              fmt::format("{} / {}", rounds_measured,
                          number(*m, fmt::format("{:g}", *m), {"state.json", 0, "/options/max_rounds"})));
  if (files.exists("final/check.json")) {
    auto check = files.json_file("final/check.json");
    if (check.ok()) {
      bool met = true;
      for (const auto& c : (*check)->value("criteria", json::array())) met = met && c.value("met", false);
      s += card("completion check", met ? "<span class=\"ok\">met</span>" : "<span class=\"bad\">not met</span>");
      if (auto g = number_at(**check, "/eval/geomean"))
        s += card("completion check geomean (all workloads)",
                  number(*g, speedup_text(*g), {"final/check.json", 0, "/eval/geomean"}));
    }
  }
  return s + "</div>\n";
}

std::string header(const json& state) {
  const json& o = state.value("options", json::object());
  std::string reason = state.value("stop_reason", "");
  return fmt::format(
      "<p class=\"sub\">task <code>{}</code> · writer <code>{}</code> · reviewer <code>{}</code> · target "
      "<code>{}</code>{}</p>\n",
      escape(o.value("task", "")), escape(o.value("writer", "")), escape(o.value("reviewer", "")),
      escape(o.value("target", "")), reason.empty() ? "" : " · stopped: " + escape(reason));
}

std::string speedup_chart(const json& state, const json& ledger, const json& rows, Files& files) {
  LineChart c;
  c.x_label = "round";
  c.y_label = "geomean speedup vs the baseline";
  if (auto t = loop::parse_target(state.value("/options/target"_json_pointer, std::string("1.0"))); t.ok()) {
    c.reference = t->min_geomean_speedup;
    c.reference_label = fmt::format("target {:g}x", t->min_geomean_speedup);
  }
  // Round 0: the starting solution as measured at setup (the ledger's c000).
  double incumbent = 0;
  if (const int i = ledger_index(ledger, "c000"); i >= 0) {
    const std::string p = fmt::format("/candidates/{}/eval/geomean", i);
    if (auto g = number_at(ledger, p)) {
      incumbent = *g;
      c.points.push_back({0, *g, fmt::format("c000 (start): {:.3f}x", *g), kStart, {{"ledger.json", 0, p}}});
      c.step.emplace_back(0, *g);
    }
  }
  int last = 0;
  for (const auto& r : rows) {
    const int round = r.value("round", 0);
    const std::string file = "rounds/" + loop::round_name(round) + "/verify.json";
    auto v = files.json_file(file);
    if (!v.ok()) continue;
    auto g = number_at(**v, "/geomean");
    if (!g) continue;
    const bool accepted = r.value("accepted", false);
    c.points.push_back({static_cast<double>(round),
                        *g,
                        fmt::format("round {} {}: {:.3f}x, {} ({})", round, r.value("candidate", ""), *g,
                                    accepted ? "accepted" : "rejected", r.value("reason", "")),
                        accepted ? kAccepted : kRejected,
                        {{file, 0, "/geomean"}}});
    if (accepted) incumbent = *g;
    c.step.emplace_back(round, incumbent);
    last = round;
  }
  if (!c.step.empty()) c.step.emplace_back(last + 0.5, incumbent);
  c.step_label = "incumbent";
  return line_chart(c) +
         "<p class=\"detail\">Dots: each round's candidate as kda's verifier measured it on fresh seeds (green "
         "accepted, red "
         "rejected, blue the start); line: the incumbent; dashed: the target.</p>\n";
}

std::string rounds_table(const json& rows, Files& files) {
  std::vector<std::vector<std::string>> out;
  for (const auto& r : rows) {
    const int round = r.value("round", 0);
    const std::string file = "rounds/" + loop::round_name(round) + "/verify.json";
    std::string geo = "<td class=\"num muted\">-</td>";
    if (auto v = files.json_file(file); v.ok())
      if (auto g = number_at(**v, "/geomean"))
        geo = "<td class=\"num\">" + number(*g, speedup_text(*g), {file, 0, "/geomean"}) + "</td>";
    const bool accepted = r.value("accepted", false);
    out.push_back(
        {std::to_string(round), "<code>" + escape(r.value("candidate", "")) + "</code>",
         fmt::format("<span class=\"{}\">{}</span>", accepted ? "ok" : "bad", accepted ? "accepted" : "rejected"),
         "<code>" + escape(r.value("reason", "")) + "</code>", geo, escape(r.value("review", "")),
         "<span class=\"detail\">" + escape(r.value("detail", "").substr(0, 400)) + "</span>"});
  }
  if (out.empty()) return "<p class=\"muted\">no round has been measured yet</p>\n";
  return table({"round", "candidate", "outcome", "reason", "geomean", "reviewer", "why"}, out, "rounds");
}

std::string candidate_dag(const json& ledger, const json& rows) {
  std::map<std::string, std::string> reason;
  for (const auto& r : rows) reason[r.value("candidate", "")] = r.value("reason", "");
  std::vector<DagNode> nodes;
  for (const auto& c : ledger.value("candidates", json::array())) {
    const std::string id = c.value("id", "");
    const double g = c.value("/eval/geomean"_json_pointer, 0.0);
    const bool start = id == "c000";
    nodes.push_back({id, c.value("parent", ""), c.value("round", 0), fmt::format("{} {:.2f}x", id, g),
                     fmt::format("{}: {}; {}", id,
                                 start                        ? "starting solution"
                                 : c.value("accepted", false) ? "accepted"
                                                              : "rejected",
                                 reason.count(id) ? reason[id] + "; " + c.value("notes", "") : c.value("notes", "")),
                     start                        ? kStart
                     : c.value("accepted", false) ? kAccepted
                                                  : kRejected});
  }
  if (nodes.empty()) return "<p class=\"muted\">the ledger has no candidates</p>\n";
  return dag(nodes) +
         "<p class=\"detail\">Each candidate is drawn in its round's column, joined to the incumbent it started "
         "from; green candidates became the incumbent.</p>\n";
}

std::string reviewer_table(const json& rows, Files& files) {
  std::vector<std::vector<std::string>> out;
  for (const auto& r : rows) {
    const int round = r.value("round", 0);
    auto d = files.json_file("rounds/" + loop::round_name(round) + "/verdict.json");
    if (!d.ok()) continue;
    const json& v = **d;
    const std::string decision = v.value("decision", ""), progress = v.value("progress", "");
    const char* color = progress == "ADVANCED" ? "ok" : progress == "REGRESSED" ? "bad" : "muted";
    out.push_back({std::to_string(round), "<b>" + escape(decision) + "</b>",
                   fmt::format("<span class=\"{}\">{}</span>", color, escape(progress)),
                   v.value("well_formed", true) ? "yes" : "<span class=\"bad\">no</span>",
                   "<span class=\"detail\">" + escape(v.value("complaint", "")) + "</span>"});
  }
  if (out.empty()) return "<p class=\"muted\">no reviewer verdict yet</p>\n";
  return table({"round", "decision", "progress", "well formed", "complaint"}, out);
}

std::string budgets(const json& state) {
  struct Row {
    const char* name;
    std::string used_p;
    double scale;
    std::string limit_p;
    const char* unit;
  };
  const Row rows[] = {
      {"rounds", "/round", 1, "/options/max_rounds", ""},
      {"input tokens", "/usage/input_tokens", 1, "", ""},
      {"output tokens", "/usage/output_tokens", 1, "", ""},
      {"money", "/usage/cost_usd", 1, "/options/budget_usd", " USD"},
      {"evaluator time", "/eval_s", 1.0 / 60, "/options/gpu_minutes", " min"},
      {"wall time", "/elapsed_s", 1.0 / 3600, "/options/hours", " h"},
  };
  std::vector<std::vector<std::string>> out;
  const double tokens =
      state.value("/usage/input_tokens"_json_pointer, 0.0) + state.value("/usage/output_tokens"_json_pointer, 0.0);
  const double token_budget = state.value("/options/budget_tokens"_json_pointer, 0.0);
  for (const Row& r : rows) {
    auto used = number_at(state, r.used_p);
    if (!used) continue;
    double u = *used * r.scale;
    if (std::string_view(r.name) == "rounds") u = std::max(0.0, u - 1);  // state.round is the next round
    std::string used_html = r.scale == 1 && std::string_view(r.name) != "rounds"
                                ? number(u, fmt::format("{:g}{}", u, r.unit), {"state.json", 0, r.used_p})
                                : fmt::format("{:.3g}{}", u, r.unit);
    std::optional<double> limit;
    if (!r.limit_p.empty()) limit = number_at(state, r.limit_p);
    std::string limit_html = "<span class=\"muted\">none</span>", bar;
    if (limit && *limit > 0) {
      limit_html = number(*limit, fmt::format("{:g}{}", *limit, r.unit), {"state.json", 0, r.limit_p});
      const double f = std::min(1.0, u / *limit);
      bar = fmt::format(
          R"(<svg width="160" height="12"><rect width="160" height="12" fill="#e6eaf0"/><rect width="{:.1f}" height="12" fill="{}"/></svg> {:.0f} %)",
          160 * f, f >= 1 ? kRejected : kStart, 100 * u / *limit);
    }
    out.push_back(
        {escape(r.name), "<td class=\"num\">" + used_html + "</td>", "<td class=\"num\">" + limit_html + "</td>", bar});
  }
  std::string s = table({"budget", "used", "limit", "share"}, out);
  if (token_budget > 0)
    s += fmt::format(
        "<p class=\"detail\">Tokens: {:g} of {} ({:.0f} %).</p>\n", tokens,
        number(token_budget, fmt::format("{:g}", token_budget), {"state.json", 0, "/options/budget_tokens"}),
        100 * tokens / token_budget);
  return s;
}

std::string audit_status(const std::filesystem::path& root, const json& state) {
  const std::string head = state.value("audit_head", "");
  auto v = audit::verify(root / "audit.jsonl", head);
  std::string records;
  if (auto n = number_at(state, "/audit_records"))
    records =
        " state.json records " + number(*n, fmt::format("{:g}", *n), {"state.json", 0, "/audit_records"}) + " of them;";
  if (!v.ok())
    return fmt::format("<p><span class=\"bad\">does not verify</span>: {}</p>\n", escape(v.status().message()));
  if (!v->ok()) {
    std::string problems;
    for (const auto& p : v->problems) problems += fmt::format("<li>line {}: {}</li>", p.line, escape(p.message));
    return fmt::format("<p><span class=\"bad\">does not verify</span>: {} problem(s)</p><ul>{}</ul>\n",
                       v->problems.size(), problems);
  }
  return fmt::format("<p><span class=\"ok\">verified</span>: {} hash-chained records;{} head <code>{}</code>{}</p>\n",
                     v->records, records, escape(v->head.substr(0, 16)),
                     head.empty() || v->head_line > 0 ? ", as state.json names it" : "");
}

}  // namespace

Result<Report> render_run(const std::filesystem::path& dir) {
  Files files(dir);
  KDA_ASSIGN_OR_RETURN(const json* state, files.json_file("state.json"));
  KDA_ASSIGN_OR_RETURN(const json* ledger_json, files.json_file("ledger.json"));
  KDA_ASSIGN_OR_RETURN(loop::Ledger ledger, loop::load_ledger(dir / "ledger.json"));
  const json rows = loop::round_table(dir, state->value("round", 0), ledger);

  Report r{ReportKind::kRun, dir, "", "", 0};
  r.title = "kda run " + std::filesystem::path(dir).lexically_normal().filename().string();
  Page page(r.title);
  page.section("summary", "Summary", header(*state) + summary_cards(*state, static_cast<int>(rows.size()), files));
  page.section("speedup", "Speedup over rounds", speedup_chart(*state, *ledger_json, rows, files));
  page.section("rounds", "Rounds", rounds_table(rows, files));
  page.section("candidates", "Candidates", candidate_dag(*ledger_json, rows));
  page.section("reviewer", "Reviewer verdicts", reviewer_table(rows, files));

  // Per workload: the completion check's traces when the run got there, else the incumbent's round.
  std::string traces_file = "final/traces.jsonl", what = "the completion check of the final solution (all workloads)";
  if (!files.exists(traces_file)) {
    const int round = ledger.find(ledger.incumbent) != nullptr ? ledger.find(ledger.incumbent)->round : 0;
    traces_file = "rounds/" + loop::round_name(round) + "/traces.jsonl";
    what = "the incumbent's own round (dev workloads)";
  }
  std::string per_workload = "<p class=\"muted\">no traces yet</p>\n";
  if (files.exists(traces_file)) {
    KDA_ASSIGN_OR_RETURN(const std::vector<json>* lines, files.lines(traces_file));
    std::vector<TraceRef> refs;
    for (size_t i = 0; i < lines->size(); ++i)
      refs.push_back({&(*lines)[i], {traces_file, static_cast<int>(i + 1), ""}});
    per_workload = fmt::format("<p class=\"sub\">From <code>{}</code>: {}.</p>\n", escape(traces_file), escape(what)) +
                   workloads_section(refs, state->value("/incumbent/id"_json_pointer, std::string("incumbent")));
  }
  page.section("workloads", "Per workload", per_workload);
  page.section("budgets", "Budgets", budgets(*state));
  page.section("audit", "Audit log", audit_status(dir, *state));
  r.html = page.html();
  return r;
}

}  // namespace kda::report
