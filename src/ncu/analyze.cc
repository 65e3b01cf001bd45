#include "ncu/analyze.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "ncu/metric_names.h"
#include "ncu/priorities.h"

namespace kda::ncu {

namespace {

using detail::ev;
using detail::get;
using detail::pc_of;

// Peaks used only when the report lacks the metrics to derive them (H200 SXM, boost clocks).
constexpr double kDefaultPeakDramBytesPerS = 4.8e12;
constexpr double kDefaultPeakFp32FlopPerS = 66.9e12;

constexpr const char* kHeadlineMetrics[] = {
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "dram__bytes.sum.per_second",
    "sm__cycles_elapsed.avg.per_second",
    "dram__cycles_elapsed.avg.per_second",
    "sm__inst_executed.avg.per_cycle_active",
    "smsp__issue_active.avg.per_cycle_active",
    "smsp__average_warp_latency_per_inst_issued.ratio",
    "sm__maximum_warps_per_active_cycle_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "launch__waves_per_multiprocessor",
    "l1tex__t_sector_hit_rate.pct",
    "lts__t_sector_hit_rate.pct",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "derived__local_spilling_requests",
};

std::optional<double> ratio(const KernelResult& k, std::string_view num, std::string_view den) {
  auto n = metric_value(k, num);
  auto d = metric_value(k, den);
  if (!n || !d || *d <= 0) return std::nullopt;
  return *n / *d;
}

// Tensor-pipe activity (% of peak) below which a kernel is judged on the FP32 roof.
constexpr double kTensorPipeBusyPct = 5;

Roofline compute_roofline(const KernelResult& k) {
  Roofline r;
  double clock = get(k, "smsp__cycles_elapsed.avg.per_second", get(k, "sm__cycles_elapsed.avg.per_second"));
  auto per_cycle = [&](std::string_view op) {
    return get(k, fmt::format("smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed", op));
  };
  double flop_per_cycle = 2 * per_cycle("ffma") + per_cycle("fadd") + per_cycle("fmul") + 2 * per_cycle("dfma") +
                          per_cycle("dadd") + per_cycle("dmul") + 2 * per_cycle("hfma") + per_cycle("hadd") +
                          per_cycle("hmul");
  r.flop_per_s = flop_per_cycle * clock;
  r.dram_bytes_per_s = get(k, "dram__bytes.sum.per_second");
  auto ffma_peak = metric_value(k, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained");
  auto dram_peak = metric_value(k, "dram__bytes.sum.peak_sustained");
  auto dram_clock = metric_value(k, "dram__cycles_elapsed.avg.per_second");
  if (ffma_peak && dram_peak && dram_clock && clock > 0) {
    r.peak_flop_per_s = 2 * *ffma_peak * clock;
    r.peak_dram_bytes_per_s = *dram_peak * *dram_clock;
    r.peak_source = "report";
  } else {
    r.peak_flop_per_s = kDefaultPeakFp32FlopPerS;
    r.peak_dram_bytes_per_s = kDefaultPeakDramBytesPerS;
    r.peak_source = "H200 defaults";
  }
  r.arithmetic_intensity = r.dram_bytes_per_s > 0 ? r.flop_per_s / r.dram_bytes_per_s : 0;
  r.ridge_point = r.peak_dram_bytes_per_s > 0 ? r.peak_flop_per_s / r.peak_dram_bytes_per_s : 0;
  r.bound = r.arithmetic_intensity < r.ridge_point ? "memory" : "compute";
  // Tensor-core work is not in the FP32 roof: with it, compare the busiest compute unit with memory.
  for (const char* src :
       {"bf16_dst_fp32", "fp16", "tf32_dst_fp32", "fp8_sparsity_off", "fp8_sparsity_on", "int8", "fp64"})
    r.tensor_ops_per_s += get(k, fmt::format("sm__ops_path_tensor_src_{}.sum.per_second", src));
  double tensor_pct = get(k, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active");
  // Only real tensor-core work leaves the FP32 roof: a busy tensor pipe, or tensor ops at least the
  // FP32 FLOPs. A percent or two of tensor-pipe activity in an FP32 kernel is noise (issue 21: a
  // kernel at 7.8 FLOP/byte under a ridge of 14 was called compute-bound for 1 % of it).
  const bool tensor_work =
      tensor_pct >= kTensorPipeBusyPct || (r.tensor_ops_per_s > 0 && r.tensor_ops_per_s >= r.flop_per_s);
  if (tensor_work) {
    double compute = std::max(tensor_pct, get(k, "sm__throughput.avg.pct_of_peak_sustained_elapsed"));
    double memory = get(k, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed");
    r.bound = compute >= memory ? "compute" : "memory";
  }
  double attainable = std::min(r.peak_flop_per_s, r.arithmetic_intensity * r.peak_dram_bytes_per_s);
  if (r.bound == "memory")
    r.fraction_of_roof = r.peak_dram_bytes_per_s > 0 ? r.dram_bytes_per_s / r.peak_dram_bytes_per_s : 0;
  else
    r.fraction_of_roof = attainable > 0 ? r.flop_per_s / attainable : 0;
  return r;
}

Occupancy compute_occupancy(const KernelResult& k) {
  Occupancy o;
  o.theoretical_pct = get(k, "sm__maximum_warps_per_active_cycle_pct");
  o.achieved_pct = get(k, "sm__warps_active.avg.pct_of_peak_sustained_active");
  o.waves_per_sm = get(k, "launch__waves_per_multiprocessor");
  for (const char* limit : {"registers", "shared_mem", "warps", "blocks", "barriers"}) {
    if (auto v = k.number(std::string("launch__occupancy_limit_") + limit)) o.block_limits[limit] = *v;
  }
  double lowest = 1e300;
  for (const auto& [name, v] : o.block_limits) lowest = std::min(lowest, v);
  for (const auto& [name, v] : o.block_limits)
    if (v == lowest) o.limiters.push_back(name);
  return o;
}

std::vector<StallShare> compute_stalls(const KernelResult& k) {
  std::vector<StallShare> out;
  double total = 0;
  for (auto reason : stall_reasons()) {
    auto v = k.number(fmt::format("smsp__average_warps_issue_stalled_{}_per_issue_active.ratio", reason));
    if (!v || *v <= 0) continue;
    out.push_back({std::string(reason), *v, 0});
    total += *v;
  }
  for (auto& s : out) s.share_pct = total > 0 ? 100 * s.cycles_per_issue / total : 0;
  std::sort(out.begin(), out.end(),
            [](const StallShare& a, const StallShare& b) { return a.cycles_per_issue > b.cycles_per_issue; });
  return out;
}

std::vector<Hotspot> compute_hotspots(const KernelResult& k, uint64_t* pc_base) {
  const Metric* samples = k.find("smsp__pcsamp_sample_count");
  std::unordered_map<uint64_t, Hotspot> by_pc;
  double total = 0;
  uint64_t base = UINT64_MAX;
  if (samples != nullptr) {
    for (const auto& inst : samples->instances) {
      auto v = inst.value.as_number();
      if (!v) continue;
      uint64_t pc = pc_of(inst);
      by_pc[pc].pc = pc;
      by_pc[pc].samples += *v;
      total += *v;
      base = std::min(base, pc);
    }
    for (auto reason : pc_stall_reasons()) {
      const Metric* m = k.find(fmt::format("smsp__pcsamp_warps_issue_stalled_{}", reason));
      if (m == nullptr) continue;
      for (const auto& inst : m->instances) {
        auto it = by_pc.find(pc_of(inst));
        double v = inst.value.as_number().value_or(0);
        if (it == by_pc.end() || v <= it->second.top_stall_samples) continue;
        it->second.top_stall = std::string(reason);
        it->second.top_stall_samples = v;
      }
    }
  } else {
    // CSV source page only: the per-instruction rows carry the same samples.
    for (const auto& row : k.source) {
      if (row.address == 0) continue;
      auto it = row.counters.find("Warp Stall Sampling (All Samples)");
      if (it == row.counters.end() || it->second <= 0) continue;
      Hotspot& h = by_pc[row.address];
      h.pc = row.address;
      h.samples = it->second;
      total += it->second;
      for (const auto& [col, v] : row.counters) {
        if (!col.starts_with("stall_") || col.find("Not Issued") != std::string::npos || v <= h.top_stall_samples)
          continue;
        h.top_stall = col.substr(6);
        h.top_stall_samples = v;
      }
    }
  }
  // The lowest executed PC is the kernel's entry; offsets make PCs comparable across runs.
  if (const Metric* exec = k.find("derived__avg_thread_executed"))
    for (const auto& inst : exec->instances) base = std::min(base, pc_of(inst));
  for (const auto& row : k.source)
    if (row.address != 0) base = std::min(base, row.address);
  std::unordered_map<uint64_t, const SourceRow*> rows;
  std::unordered_map<int, const SourceRow*> lines;
  for (const auto& row : k.source) {
    if (row.address != 0)
      rows[row.address] = &row;
    else if (row.line > 0)
      lines[row.line] = &row;
  }
  std::unordered_map<uint64_t, std::string> notes;
  for (const auto& rule : k.rules)
    for (const auto& mk : rule.markers)
      if (mk.kind == 0 && mk.address != 0 && !notes.count(mk.address)) notes[mk.address] = mk.tooltip;
  std::vector<Hotspot> out;
  for (auto& [pc, h] : by_pc) {
    if (h.samples <= 0) continue;
    h.offset = base == UINT64_MAX ? 0 : pc - base;
    h.share_pct = total > 0 ? 100 * h.samples / total : 0;
    if (auto it = rows.find(pc); it != rows.end()) {
      h.sass = it->second->sass;
      h.line = it->second->line;
      h.file = it->second->file;
      h.source = it->second->cuda;
      if (auto l = lines.find(h.line); h.source.empty() && l != lines.end()) h.source = l->second->cuda;
    }
    if (auto it = notes.find(pc); it != notes.end()) h.note = it->second;
    out.push_back(h);
  }
  std::sort(out.begin(), out.end(), [](const Hotspot& a, const Hotspot& b) {
    return a.samples != b.samples ? a.samples > b.samples : a.pc < b.pc;
  });
  *pc_base = base == UINT64_MAX ? 0 : base;
  return out;
}

MemoryStats compute_memory(const KernelResult& k) {
  MemoryStats m;
  m.sectors_per_request_ld =
      ratio(k, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum");
  m.sectors_per_request_st =
      ratio(k, "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum");
  m.bytes_per_sector_ld = metric_value(k, "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio");
  m.bytes_per_sector_st = metric_value(k, "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio");
  m.l1_hit_pct = metric_value(k, "l1tex__t_sector_hit_rate.pct");
  m.l2_hit_pct = metric_value(k, "lts__t_sector_hit_rate.pct");
  m.shared_conflicts_ld = get(k, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum");
  m.shared_conflicts_st = get(k, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum");
  m.shared_wavefronts_ld = get(k, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum");
  m.shared_wavefronts_st = get(k, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum");
  m.spill_requests = get(k, "derived__local_spilling_requests");
  return m;
}

// The shape of the PM-sampling series of SM instruction throughput over the kernel's active window.
Timeline compute_timeline(const KernelResult& k) {
  Timeline t;
  static constexpr const char* kSeries[] = {
      "TPC.TriageCompute.sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed",
      "SM_A.TriageCompute.l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
      "LTS.TriageCompute.lts__throughput.avg.pct_of_peak_sustained_elapsed",
      "FBSP.TriageCompute.dramc__throughput.avg.pct_of_peak_sustained_elapsed"};
  const Metric* m = nullptr;
  for (const char* name : kSeries)
    if ((m = k.find(name)) != nullptr && m->instances.size() > 2) break;
  if (m == nullptr || m->instances.size() <= 2) return t;
  t.present = true;
  t.series = m->name;
  // Element 0 carries correlation 0 (not a timestamp); the rest are (timestamp ns, value).
  std::vector<std::pair<uint64_t, double>> pts;
  for (const auto& inst : m->instances) {
    uint64_t ts = pc_of(inst);
    if (ts == 0) continue;
    pts.emplace_back(ts, inst.value.as_number().value_or(0));
  }
  std::sort(pts.begin(), pts.end());
  size_t first = pts.size(), last = 0;
  for (size_t i = 0; i < pts.size(); ++i)
    if (pts[i].second > 0) {
      first = std::min(first, i);
      last = i;
    }
  if (first >= pts.size()) {
    t.shape = "idle";
    return t;
  }
  std::vector<double> v;
  for (size_t i = first; i <= last; ++i) v.push_back(pts[i].second);
  t.samples = v.size();
  if (pts.size() > 1)
    t.interval_ns = static_cast<double>(pts.back().first - pts.front().first) / static_cast<double>(pts.size() - 1);
  if (v.size() < 10) {
    t.shape = "too short";
    return t;
  }
  // Level of the middle 60%, then how much of each end sits below half of it.
  size_t n = v.size(), lo = n / 5, hi = n - n / 5;
  std::vector<double> mid(v.begin() + static_cast<long>(lo), v.begin() + static_cast<long>(hi));
  std::sort(mid.begin(), mid.end());
  double level = mid[mid.size() / 2];
  size_t tail = 0, ramp = 0;
  for (size_t i = n; i-- > 0 && v[i] < 0.5 * level;) ++tail;
  for (size_t i = 0; i < n && v[i] < 0.5 * level; ++i) ++ramp;
  t.tail_pct = 100.0 * static_cast<double>(tail) / static_cast<double>(n);
  t.ramp_pct = 100.0 * static_cast<double>(ramp) / static_cast<double>(n);
  // Sawtooth: the series crosses its level back and forth with large swings.
  size_t crossings = 0;
  double mean = 0, var = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(n);
  for (double x : v) var += (x - mean) * (x - mean);
  double cv = mean > 0 ? std::sqrt(var / static_cast<double>(n)) / mean : 0;
  for (size_t i = lo + 1; i < hi; ++i)
    if ((v[i - 1] < level * 0.7 && v[i] > level * 1.0) || (v[i - 1] > level * 1.0 && v[i] < level * 0.7)) ++crossings;
  bool has_tail = t.tail_pct >= 10, has_ramp = t.ramp_pct >= 10;
  if (crossings >= 6 && cv > 0.25)
    t.shape = "sawtooth";
  else if (has_tail && has_ramp)
    t.shape = "ramp+tail";
  else if (has_tail)
    t.shape = "tail";
  else if (has_ramp)
    t.shape = "ramp";
  else
    t.shape = "steady";
  return t;
}

// Rule texts carry "@url:<link>:<text>@"-style markup; keep the text, drop the wrapper.
std::string flatten_markup(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '@') {
      size_t end = text.find('@', i + 1);
      size_t colon = text.rfind(':', end);
      if (end != std::string::npos && colon != std::string::npos && colon > i) {
        out += text.substr(colon + 1, end - colon - 1);
        i = end;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

struct RuleGroup {
  const char* rule;
  const char* title_contains;  // "" = any message of the rule
  const char* group;
};
constexpr RuleGroup kRuleGroups[] = {
    {"UncoalescedGlobalAccess", "", "global-coalescing"},
    {"MemoryCacheAccessPattern", "", "global-coalescing"},
    {"SharedMemoryConflicts", "", "shared-bank-conflicts"},
    {"UncoalescedSharedAccess", "", "shared-bank-conflicts"},
    {"CPIStall", "", "warp-stalls"},
    {"IssueSlotUtilization", "", "warp-stalls"},
    {"AchievedOccupancy", "", "occupancy"},
    {"TheoreticalOccupancy", "", "occupancy"},
    {"LaunchConfiguration", "Tail", "tail-effect"},
    {"LaunchConfiguration", "Block Size", "block-size"},
    {"LaunchConfiguration", "Small Grid", "small-grid"},
    {"WorkloadImbalance", "", "workload-imbalance"},
    {"HighPipeUtilization", "", "pipe-utilization"},
    {"SlowPipeLimiter", "", "pipe-utilization"},
    {"ThreadDivergence", "", "divergence"},
    {"MemoryL2Compression", "", "l2-compression"},
};
// Rules whose estimates misfire on ordinary code (see shared notes on ncu 2025.3.1).
constexpr const char* kNoisyRules[] = {"MemoryL2Compression", "PMSamplingData", "SOLFPRoofline"};

std::vector<RuleFinding> rank_rules(const KernelResult& k) {
  std::map<std::string, RuleFinding> groups;
  for (const auto& rule : k.rules) {
    for (const auto& msg : rule.messages) {
      if (msg.type == MessageType::kNone) continue;
      std::string group = rule.id + (msg.title.empty() ? "" : ":" + msg.title);
      for (const auto& g : kRuleGroups)
        if (rule.id == g.rule &&
            (g.title_contains[0] == '\0' || msg.title.find(g.title_contains) != std::string::npos ||
             msg.text.find(g.title_contains) != std::string::npos)) {
          group = g.group;
          break;
        }
      RuleFinding f{group,
                    rule.id,
                    msg.title.empty() ? rule.display_name : msg.title,
                    std::string(message_type_name(msg.type)),
                    msg.speedup_pct.value_or(0),
                    msg.speedup_type,
                    flatten_markup(msg.text),
                    msg.focus_metrics,
                    false,
                    {}};
      for (const char* noisy : kNoisyRules) f.noisy |= rule.id == noisy;
      auto it = groups.find(group);
      if (it == groups.end()) {
        groups.emplace(group, std::move(f));
        continue;
      }
      // Keep the strongest global estimate; never add estimates of the same effect.
      RuleFinding& kept = it->second;
      bool better =
          (f.speedup_type == "global") > (kept.speedup_type == "global") ||
          ((f.speedup_type == "global") == (kept.speedup_type == "global") && f.speedup_pct > kept.speedup_pct);
      std::string other = better ? kept.rule_id : f.rule_id;
      if (better) {
        f.also = std::move(kept.also);
        kept = std::move(f);
      }
      if (other != kept.rule_id && std::find(kept.also.begin(), kept.also.end(), other) == kept.also.end())
        kept.also.push_back(other);
    }
  }
  std::vector<RuleFinding> out;
  for (auto& [g, f] : groups) out.push_back(std::move(f));
  auto rank = [](const RuleFinding& f) {
    if (f.noisy) return -1.0;
    return f.speedup_type == "global" ? f.speedup_pct : f.speedup_type == "local" ? f.speedup_pct * 1e-3 : 0.0;
  };
  std::sort(out.begin(), out.end(), [&](const RuleFinding& a, const RuleFinding& b) {
    double ra = rank(a), rb = rank(b);
    return ra != rb ? ra > rb : a.group < b.group;
  });
  return out;
}

}  // namespace

KernelAnalysis analyze_kernel(const Report& report, const KernelResult& k, const AnalyzeOptions& options) {
  (void)report;
  KernelAnalysis a;
  a.id = k.id;
  a.name = k.name;
  a.grid = k.grid;
  a.block = k.block;
  for (const char* name : kHeadlineMetrics)
    if (auto v = metric_value(k, name)) a.headline.emplace_back(resolved_name(k, name), *v);
  a.roofline = compute_roofline(k);
  a.occupancy = compute_occupancy(k);
  a.stalls = compute_stalls(k);
  std::vector<Hotspot> all_pcs = compute_hotspots(k, &a.pc_base);
  a.source_note = k.source_note;
  a.code_bytes = k.code_bytes;
  a.hotspots.assign(all_pcs.begin(),
                    all_pcs.begin() + static_cast<long>(std::min(all_pcs.size(), options.max_hotspots)));
  a.memory = compute_memory(k);
  a.tensor_pipe_pct = metric_value(k, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active");
  a.timeline = compute_timeline(k);
  a.rules = rank_rules(k);
  a.priorities = detail::compute_priorities(k, a, all_pcs);
  if (a.priorities.size() > options.max_priorities) a.priorities.resize(options.max_priorities);
  return a;
}

Result<Analysis> analyze(const Report& report, const AnalyzeOptions& options) {
  std::optional<std::regex> filter;
  if (!options.kernel_regex.empty()) {
    try {
      filter.emplace(options.kernel_regex, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return Status::bad_input("--kernel: invalid regular expression '" + options.kernel_regex + "': " + e.what());
    }
  }
  Analysis out;
  out.origin = report.origin;
  out.command_lines = report.command_lines;
  for (const auto& k : report.kernels) {
    if (filter && !std::regex_search(k.name, *filter)) continue;
    out.kernels.push_back(analyze_kernel(report, k, options));
  }
  if (out.kernels.empty())
    return Status::bad_input(filter ? "no kernel matches --kernel '" + options.kernel_regex + "'"
                                    : "the report holds no kernel results");
  return out;
}

const std::vector<std::string>& wiki_page_ids() {
  static const std::vector<std::string> kIds = {
      "diagnosis/bank-conflicts",
      "diagnosis/barrier-stalls",
      "diagnosis/code-fetch",
      "diagnosis/compute-bound",
      "diagnosis/long-scoreboard-stalls",
      "diagnosis/low-occupancy-registers",
      "diagnosis/memory-bound",
      "diagnosis/memory-bound-uncoalesced",
      "diagnosis/register-spills",
      "diagnosis/tail-effect",
      "hopper/fp8",
      "hopper/mbarrier",
      "hopper/setmaxnreg",
      "hopper/tma",
      "hopper/wgmma",
      "technique/fusion",
      "technique/persistent-kernels",
      "technique/software-pipelining",
      "technique/swizzling",
      "technique/vectorized-access",
      "technique/warp-specialization",
  };
  return kIds;
}

}  // namespace kda::ncu
