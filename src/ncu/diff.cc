#include "ncu/diff.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ncu/analyze.h"
#include "ncu/metric_names.h"

namespace kda::ncu {

namespace {

struct Compared {
  const char* metric;
  const char* unit;
};

constexpr Compared kCompared[] = {
    {"gpu__time_duration.sum", "ns"},
    {"sm__throughput.avg.pct_of_peak_sustained_elapsed", "%"},
    {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%"},
    {"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%"},
    {"l1tex__throughput.avg.pct_of_peak_sustained_active", "%"},
    {"lts__throughput.avg.pct_of_peak_sustained_elapsed", "%"},
    {"dram__bytes_read.sum", "byte"},
    {"dram__bytes_write.sum", "byte"},
    {"sm__warps_active.avg.pct_of_peak_sustained_active", "%"},
    {"sm__maximum_warps_per_active_cycle_pct", "%"},
    {"launch__registers_per_thread", "register/thread"},
    {"launch__waves_per_multiprocessor", ""},
    {"sm__inst_executed.avg.per_cycle_active", "inst/cycle"},
    {"smsp__average_warp_latency_per_inst_issued.ratio", "cycle"},
    {"smsp__inst_executed.sum", "inst"},
    {"l1tex__t_sector_hit_rate.pct", "%"},
    {"lts__t_sector_hit_rate.pct", "%"},
    {"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", ""},
    {"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", ""},
    {"smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", "byte/sector"},
    {"derived__local_spilling_requests", ""},
    {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "%"},
};

void add(std::vector<MetricDelta>& out, std::string metric, std::string unit, std::optional<double> a,
         std::optional<double> b) {
  if (!a || !b || !std::isfinite(*a) || !std::isfinite(*b)) return;
  MetricDelta d{std::move(metric), std::move(unit), *a, *b, *b - *a, 0};
  d.delta_pct = *a != 0 ? 100 * d.delta / std::fabs(*a) : 0;
  out.push_back(std::move(d));
}

KernelDiff diff_kernel(const Report& ra, const KernelResult& a, const Report& rb, const KernelResult& b) {
  KernelDiff d;
  d.name = a.name == b.name ? a.name : a.name + " -> " + b.name;
  d.id_before = a.id;
  d.id_after = b.id;
  for (const auto& c : kCompared)
    add(d.deltas, resolved_name(b, c.metric), c.unit, metric_value(a, c.metric), metric_value(b, c.metric));
  KernelAnalysis aa = analyze_kernel(ra, a), ab = analyze_kernel(rb, b);
  add(d.deltas, "sectors_per_request.global_ld", "sector/request", aa.memory.sectors_per_request_ld,
      ab.memory.sectors_per_request_ld);
  add(d.deltas, "roofline.flop_per_s", "FLOP/s", aa.roofline.flop_per_s, ab.roofline.flop_per_s);
  std::map<std::string, double> sa, sb;
  for (const auto& s : aa.stalls) sa[s.reason] = s.cycles_per_issue;
  for (const auto& s : ab.stalls) sb[s.reason] = s.cycles_per_issue;
  for (auto reason : stall_reasons()) {
    std::string r(reason);
    if (!sa.count(r) && !sb.count(r)) continue;
    add(d.deltas, fmt::format("smsp__average_warps_issue_stalled_{}_per_issue_active.ratio", r), "cycle",
        sa.count(r) ? sa[r] : 0.0, sb.count(r) ? sb[r] : 0.0);
  }
  for (const auto& p : aa.priorities) d.priorities_before.push_back(p.id);
  for (const auto& p : ab.priorities) d.priorities_after.push_back(p.id);
  d.verdict = "duration not in both reports";
  for (const auto& m : d.deltas)
    if (m.metric == "gpu__time_duration.sum") {
      if (std::fabs(m.delta_pct) < 1)
        d.verdict = fmt::format("unchanged (duration within 1%: {:+.2f}%)", m.delta_pct);
      else if (m.delta < 0)
        d.verdict = fmt::format("faster: duration {:.2f}% lower ({:.3g}x speedup)", -m.delta_pct, m.before / m.after);
      else
        d.verdict = fmt::format("slower: duration {:.2f}% higher", m.delta_pct);
    }
  return d;
}

// The words of a kernel's function name ("rmsnorm_vec4Kernel" -> rmsnorm, vec4): lower case, split
// at non-alphanumerics and lower-to-upper steps, without words every kernel may carry.
std::set<std::string> name_words(const KernelResult& k) {
  static const std::set<std::string> generic = {
      "kernel", "void", "const", "float", "double", "half", "int", "unsigned", "char", "bool", "long", "device",
      "global", "impl", "cuda", "launch", "anonymous", "namespace", "std", "true", "false",
      // what a rewrite says about itself, not which kernel it is
      "naive", "fast", "faster", "opt", "optimized", "fused", "tiled", "vec", "simple", "baseline", "ref", "reference",
      "run", "main", "compute", "new", "old"};
  const std::string name = k.function_name.empty() ? k.name.substr(0, k.name.find('(')) : k.function_name;
  std::set<std::string> words;
  std::string w;
  auto flush = [&] {
    if (w.size() >= 3 && !generic.count(w)) words.insert(w);
    w.clear();
  };
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (!std::isalnum(c)) {
      flush();
      continue;
    }
    if (std::isupper(c) && i > 0 && std::islower(static_cast<unsigned char>(name[i - 1]))) flush();
    w += static_cast<char>(std::tolower(c));
  }
  flush();
  return words;
}

bool look_like_one_kernel(const KernelResult& a, const KernelResult& b) {
  const auto wa = name_words(a), wb = name_words(b);
  for (const auto& w : wa)
    if (wb.count(w)) return true;
  auto same = [&](const char* metric) {
    auto x = metric_value(a, metric), y = metric_value(b, metric);
    return x && y && *x == *y;
  };
  return same("launch__grid_size") && same("launch__block_size");
}

}  // namespace

ReportDiff diff_reports(const Report& before, const Report& after) {
  ReportDiff out;
  // The n-th launch of a name in one report pairs with the n-th launch of that name in the other.
  std::map<std::string, std::vector<const KernelResult*>> by_name_after;
  for (const auto& k : after.kernels) by_name_after[k.name].push_back(&k);
  std::map<std::string, size_t> used;
  std::vector<const KernelResult*> unmatched_before;
  for (const auto& k : before.kernels) {
    auto& list = by_name_after[k.name];
    size_t& n = used[k.name];
    if (n < list.size()) {
      out.kernels.push_back(diff_kernel(before, k, after, *list[n]));
      ++n;
    } else {
      unmatched_before.push_back(&k);
    }
  }
  std::vector<const KernelResult*> unmatched_after;
  for (auto& [name, list] : by_name_after)
    for (size_t i = used[name]; i < list.size(); ++i) unmatched_after.push_back(list[i]);
  // Second pass: the same function with a changed signature ("float *" -> "const float *").
  auto base_name = [](const KernelResult* k) {
    return k->function_name.empty() ? k->name.substr(0, k->name.find('(')) : k->function_name;
  };
  for (auto it = unmatched_before.begin(); it != unmatched_before.end();) {
    auto partner = std::find_if(unmatched_after.begin(), unmatched_after.end(),
                                [&](const KernelResult* b) { return base_name(b) == base_name(*it); });
    if (partner == unmatched_after.end()) {
      ++it;
      continue;
    }
    out.kernels.push_back(diff_kernel(before, **it, after, **partner));
    unmatched_after.erase(partner);
    it = unmatched_before.erase(it);
  }
  // One renamed kernel on each side (a rewrite of the same kernel): still compare them, but only when
  // the two look like one kernel — a word of the name in common or the same launch configuration —
  // so that two unrelated kernels are never reported as a speedup (issue 21).
  if (out.kernels.empty() && unmatched_before.size() == 1 && unmatched_after.size() == 1 &&
      look_like_one_kernel(*unmatched_before[0], *unmatched_after[0])) {
    KernelDiff d = diff_kernel(before, *unmatched_before[0], after, *unmatched_after[0]);
    d.renamed_from = unmatched_before[0]->name;
    d.verdict = "compared as a rename of " + unmatched_before[0]->name + ": " + d.verdict;
    out.kernels.push_back(std::move(d));
    return out;
  }
  for (const auto* k : unmatched_before) out.only_before.push_back(k->name);
  for (const auto* k : unmatched_after) out.only_after.push_back(k->name);
  return out;
}

nlohmann::json to_json(const ReportDiff& diff) {
  using nlohmann::json;
  json kernels = json::array();
  for (const auto& k : diff.kernels) {
    json deltas = json::array();
    for (const auto& d : k.deltas)
      deltas.push_back({{"metric", d.metric},
                        {"unit", d.unit},
                        {"before", d.before},
                        {"after", d.after},
                        {"delta", d.delta},
                        {"delta_pct", d.delta_pct}});
    kernels.push_back({{"name", k.name},
                       {"id_before", k.id_before},
                       {"id_after", k.id_after},
                       {"verdict", k.verdict},
                       {"deltas", deltas},
                       {"priorities_before", k.priorities_before},
                       {"priorities_after", k.priorities_after}});
    if (!k.renamed_from.empty()) kernels.back()["renamed_from"] = k.renamed_from;
  }
  return {{"kernels", kernels}, {"only_before", diff.only_before}, {"only_after", diff.only_after}};
}

std::string to_markdown(const ReportDiff& diff, double min_move_pct) {
  std::ostringstream s;
  s << "# Nsight Compute diff\n\n";
  if (diff.kernels.empty()) s << "No kernel appears in both reports.\n\n";
  for (const auto& k : diff.kernels) {
    s << fmt::format("## `{}` (result {} -> {})\n\n**{}**\n\n", k.name, k.id_before, k.id_after, k.verdict);
    s << "| metric | before | after | change | change % |\n|---|---|---|---|---|\n";
    size_t hidden = 0;
    for (const auto& d : k.deltas) {
      if (d.metric != "gpu__time_duration.sum" && std::fabs(d.delta_pct) < min_move_pct &&
          !(d.before == 0 && d.after != 0)) {
        ++hidden;
        continue;
      }
      s << fmt::format("| `{}` | {:.4g} | {:.4g} | {:+.4g} {} | {} |\n", d.metric, d.before, d.after, d.delta, d.unit,
                       d.before != 0 ? fmt::format("{:+.1f}%", d.delta_pct) : std::string("new"));
    }
    if (hidden) s << fmt::format("\n{} other compared quantities moved by less than {:.1f}%.\n", hidden, min_move_pct);
    auto join = [](const std::vector<std::string>& v) {
      return v.empty() ? std::string("none") : fmt::format("{}", fmt::join(v, ", "));
    };
    s << "\nPriorities before: " << join(k.priorities_before) << ". After: " << join(k.priorities_after) << ".\n\n";
  }
  for (const auto& n : diff.only_before) s << "Only in the first report: `" << n << "`\n";
  for (const auto& n : diff.only_after) s << "Only in the second report: `" << n << "`\n";
  return s.str();
}

}  // namespace kda::ncu
