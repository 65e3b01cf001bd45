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

namespace kda::ncu {

namespace {

// Peaks used only when the report lacks the metrics to derive them (H200 SXM, boost clocks).
constexpr double kDefaultPeakDramBytesPerS = 4.8e12;
constexpr double kDefaultPeakFp32FlopPerS = 66.9e12;
// Sustained DRAM bandwidth rarely exceeds this share of the theoretical peak.
constexpr double kPracticalDramPct = 90.0;

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

double get(const KernelResult& k, std::string_view name, double fallback = 0) { return metric_value(k, name).value_or(fallback); }

std::optional<double> ratio(const KernelResult& k, std::string_view num, std::string_view den) {
  auto n = metric_value(k, num);
  auto d = metric_value(k, den);
  if (!n || !d || *d <= 0) return std::nullopt;
  return *n / *d;
}

Evidence ev(const KernelResult& k, std::string_view name, std::string unit = "") {
  std::string resolved = resolved_name(k, name);
  const Metric* m = k.find(resolved);
  return {resolved, get(k, name), unit.empty() && m ? m->unit : unit};
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
                          per_cycle("dadd") + per_cycle("dmul") + 2 * per_cycle("hfma") + per_cycle("hadd") + per_cycle("hmul");
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
  for (const char* src : {"bf16_dst_fp32", "fp16", "tf32_dst_fp32", "fp8_sparsity_off", "fp8_sparsity_on", "int8", "fp64"})
    r.tensor_ops_per_s += get(k, fmt::format("sm__ops_path_tensor_src_{}.sum.per_second", src));
  double tensor_pct = get(k, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active");
  // Only real tensor-core work leaves the FP32 roof: a busy tensor pipe, or tensor ops at least the
  // FP32 FLOPs. A percent or two of tensor-pipe activity in an FP32 kernel is noise (issue 21: a
  // kernel at 7.8 FLOP/byte under a ridge of 14 was called compute-bound for 1 % of it).
  const bool tensor_work = tensor_pct >= kTensorPipeBusyPct || (r.tensor_ops_per_s > 0 && r.tensor_ops_per_s >= r.flop_per_s);
  if (tensor_work) {
    double compute = std::max(tensor_pct, get(k, "sm__throughput.avg.pct_of_peak_sustained_elapsed"));
    double memory = get(k, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed");
    r.bound = compute >= memory ? "compute" : "memory";
  }
  double attainable = std::min(r.peak_flop_per_s, r.arithmetic_intensity * r.peak_dram_bytes_per_s);
  if (r.bound == "memory") r.fraction_of_roof = r.peak_dram_bytes_per_s > 0 ? r.dram_bytes_per_s / r.peak_dram_bytes_per_s : 0;
  else r.fraction_of_roof = attainable > 0 ? r.flop_per_s / attainable : 0;
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
  std::sort(out.begin(), out.end(), [](const StallShare& a, const StallShare& b) { return a.cycles_per_issue > b.cycles_per_issue; });
  return out;
}

uint64_t pc_of(const Instance& i) { return i.correlation.is_integer() ? i.correlation.integer : static_cast<uint64_t>(i.correlation.number); }

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
        if (!col.starts_with("stall_") || col.find("Not Issued") != std::string::npos || v <= h.top_stall_samples) continue;
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
    if (row.address != 0) rows[row.address] = &row;
    else if (row.line > 0) lines[row.line] = &row;
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
  std::sort(out.begin(), out.end(), [](const Hotspot& a, const Hotspot& b) { return a.samples != b.samples ? a.samples > b.samples : a.pc < b.pc; });
  *pc_base = base == UINT64_MAX ? 0 : base;
  return out;
}

MemoryStats compute_memory(const KernelResult& k) {
  MemoryStats m;
  m.sectors_per_request_ld = ratio(k, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum");
  m.sectors_per_request_st = ratio(k, "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum");
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
    if (pts[i].second > 0) { first = std::min(first, i); last = i; }
  if (first >= pts.size()) { t.shape = "idle"; return t; }
  std::vector<double> v;
  for (size_t i = first; i <= last; ++i) v.push_back(pts[i].second);
  t.samples = v.size();
  if (pts.size() > 1) t.interval_ns = static_cast<double>(pts.back().first - pts.front().first) / static_cast<double>(pts.size() - 1);
  if (v.size() < 10) { t.shape = "too short"; return t; }
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
  if (crossings >= 6 && cv > 0.25) t.shape = "sawtooth";
  else if (has_tail && has_ramp) t.shape = "ramp+tail";
  else if (has_tail) t.shape = "tail";
  else if (has_ramp) t.shape = "ramp";
  else t.shape = "steady";
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
        if (rule.id == g.rule && (g.title_contains[0] == '\0' || msg.title.find(g.title_contains) != std::string::npos ||
                                   msg.text.find(g.title_contains) != std::string::npos)) {
          group = g.group;
          break;
        }
      RuleFinding f{group, rule.id, msg.title.empty() ? rule.display_name : msg.title,
                    std::string(message_type_name(msg.type)), msg.speedup_pct.value_or(0), msg.speedup_type, flatten_markup(msg.text), msg.focus_metrics, false, {}};
      for (const char* noisy : kNoisyRules) f.noisy |= rule.id == noisy;
      auto it = groups.find(group);
      if (it == groups.end()) {
        groups.emplace(group, std::move(f));
        continue;
      }
      // Keep the strongest global estimate; never add estimates of the same effect.
      RuleFinding& kept = it->second;
      bool better = (f.speedup_type == "global") > (kept.speedup_type == "global") ||
                    ((f.speedup_type == "global") == (kept.speedup_type == "global") && f.speedup_pct > kept.speedup_pct);
      std::string other = better ? kept.rule_id : f.rule_id;
      if (better) {
        f.also = std::move(kept.also);
        kept = std::move(f);
      }
      if (other != kept.rule_id && std::find(kept.also.begin(), kept.also.end(), other) == kept.also.end()) kept.also.push_back(other);
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

const RuleFinding* rule_group(const std::vector<RuleFinding>& rules, std::string_view group) {
  for (const auto& r : rules)
    if (r.group == group && r.speedup_type == "global" && !r.noisy) return &r;
  return nullptr;
}

std::string basis_of(const RuleFinding& r) {
  return fmt::format("ncu rule {} ({} estimate{})", r.rule_id, r.speedup_type,
                     r.also.empty() ? "" : ", same effect as " + fmt::format("{}", fmt::join(r.also, ", ")));
}

std::string hotspot_text(const Hotspot& h) {
  std::string s = fmt::format("pc+0x{:x}", h.offset);
  if (h.line > 0) {
    const std::string file = std::filesystem::path(h.file).filename().string();
    s += file.empty() ? fmt::format(" line {}", h.line) : fmt::format(" {}:{}", file, h.line);
  }
  if (!h.sass.empty()) {
    std::string sass = h.sass;
    sass.erase(0, sass.find_first_not_of(' '));
    s += ": " + sass;
  }
  s += fmt::format(" ({:.1f}% of samples", h.share_pct);
  if (!h.top_stall.empty()) s += ", mostly " + h.top_stall;
  s += ")";
  return s;
}

// KernelWiki pages (knowledge/) for a dominant stall reason.
std::vector<std::string> stall_wiki(const std::string& reason) {
  if (reason == "long_scoreboard" || reason == "lg_throttle")
    return {"diagnosis/long-scoreboard-stalls", "technique/software-pipelining", "hopper/tma"};
  if (reason == "barrier" || reason == "membar") return {"diagnosis/barrier-stalls", "hopper/mbarrier", "technique/warp-specialization"};
  if (reason == "short_scoreboard" || reason == "mio_throttle") return {"diagnosis/bank-conflicts", "technique/software-pipelining"};
  if (reason == "gmma") return {"hopper/wgmma", "technique/warp-specialization"};
  if (reason == "math_pipe_throttle") return {"diagnosis/compute-bound"};
  return {"technique/software-pipelining"};
}

std::vector<std::string> occupancy_wiki(const std::vector<std::string>& limiters) {
  if (std::find(limiters.begin(), limiters.end(), "registers") != limiters.end())
    return {"diagnosis/low-occupancy-registers", "hopper/setmaxnreg"};
  return {"diagnosis/low-occupancy-registers", "diagnosis/tail-effect"};
}

std::string stall_advice(const std::string& reason) {
  static const std::map<std::string, std::string> kAdvice = {
      {"long_scoreboard", "Warps wait on global/local memory: keep more loads in flight (unroll, vectorize, software-pipeline with cp.async/TMA) or cut the bytes loaded."},
      {"short_scoreboard", "Warps wait on shared memory or MUFU results: remove bank conflicts, reuse values in registers, interleave independent work."},
      {"barrier", "Warps wait at __syncthreads: balance work between warps, split the block's phases, or use finer-grained sync (mbarrier / named barriers)."},
      {"mio_throttle", "The MIO queue (shared memory, special math) is full: use wider shared accesses, fewer shared instructions, fewer conflicts."},
      {"lg_throttle", "The global load/store queue is full: use 128-bit vector accesses so fewer instructions move the same bytes."},
      {"math_pipe_throttle", "A math pipe is saturated: move work to an idle pipe (tensor cores, FMA vs ALU) or reduce instruction count."},
      {"wait", "Fixed-latency dependencies dominate: raise instruction-level parallelism (independent accumulators, unrolling)."},
      {"gmma", "Warps wait on wgmma: overlap loads with MMA (deeper pipeline, warp specialisation)."},
      {"branch_resolving", "Branch resolution stalls: make control flow uniform or predicate small branches."},
      {"no_instruction", "Instruction cache misses: shrink the unrolled code or improve locality."},
      {"membar", "Memory fences stall warps: relax or batch fences."},
      {"dispatch_stall", "Dispatch stalls: usually pipeline contention; check the pipe utilisation."},
  };
  auto it = kAdvice.find(reason);
  return it != kAdvice.end() ? it->second : "Reduce the dominant stall reason (" + reason + ").";
}

// Describes a PC for evidence: the sampled hotspot when there is one, else its offset.
// A per-PC metric (e.g. excessive sectors) as source evidence: instances grouped by CUDA source line
// (PCs without a line stay on their own), the three largest groups, each with its instruction
// count, one of its instructions, its share of the stall samples and the metric's total there.
// One line per group instead of one per instruction: a 30-instruction unrolled loop is one finding.
std::vector<std::string> by_source_line(const KernelResult& k, const Metric& m, const std::vector<Hotspot>& all, uint64_t base,
                                        std::string_view what) {
  struct Group {
    double value = 0, top = -1, share = 0;
    int count = 0, line = 0;
    uint64_t pc = 0;
    std::string file, sass, text;
  };
  std::unordered_map<uint64_t, const SourceRow*> rows;
  std::unordered_map<int, std::string> line_text;
  for (const auto& r : k.source) {
    if (r.address != 0) rows[r.address] = &r;
    else if (r.line > 0 && !r.cuda.empty()) line_text.emplace(r.line, r.cuda);
  }
  std::unordered_map<uint64_t, const Hotspot*> sampled;
  for (const auto& h : all) sampled[h.pc] = &h;
  std::map<std::pair<int, uint64_t>, Group> groups;  // (line, pc when the line is unknown)
  for (const auto& inst : m.instances) {
    const double v = inst.value.as_number().value_or(0);
    if (v <= 0) continue;
    const uint64_t pc = pc_of(inst);
    const SourceRow* row = rows.count(pc) ? rows[pc] : nullptr;
    const int line = row ? row->line : 0;
    Group& g = groups[{line, line > 0 ? 0 : pc}];
    g.value += v;
    ++g.count;
    g.line = line;
    if (auto it = sampled.find(pc); it != sampled.end()) g.share += it->second->share_pct;
    if (v > g.top) {
      g.top = v;
      g.pc = pc;
      g.sass = row ? row->sass : "";
      g.file = row ? row->file : "";
    }
    if (line > 0 && g.text.empty()) g.text = row && !row->cuda.empty() ? row->cuda : line_text.count(line) ? line_text[line] : "";
  }
  std::vector<Group> sorted;
  for (auto& [key, g] : groups) sorted.push_back(std::move(g));
  std::sort(sorted.begin(), sorted.end(), [](const Group& x, const Group& y) { return x.value > y.value; });
  std::vector<std::string> out;
  for (size_t i = 0; i < sorted.size() && i < 3; ++i) {
    const Group& g = sorted[i];
    // The file's name only: a solution's sources are compiled in a build directory whose path says nothing.
    const std::string file = std::filesystem::path(g.file).filename().string();
    std::string where = g.line > 0 ? fmt::format("{}line {}", file.empty() ? "" : file + ":", g.line)
                                   : fmt::format("pc+0x{:x}", base != 0 && g.pc >= base ? g.pc - base : g.pc);
    std::string text = g.text;
    text.erase(0, text.find_first_not_of(" \t"));
    if (!text.empty()) where += fmt::format(" `{}`", text.size() > 80 ? text.substr(0, 80) + "..." : text);
    std::string sass = g.sass;
    sass.erase(0, sass.find_first_not_of(' '));
    out.push_back(fmt::format("{}: {} instruction{}{}, {:.1f}% of stall samples, {:.0f} {}", where, g.count, g.count == 1 ? "" : "s",
                              sass.empty() ? "" : " (e.g. " + sass + ")", g.share, g.value, what));
  }
  if (sorted.size() > 3) out.push_back(fmt::format("... and {} more source line(s) or PCs", sorted.size() - 3));
  return out;
}

std::vector<Priority> compute_priorities(const KernelResult& k, const KernelAnalysis& a, const std::vector<Hotspot>& all_pcs) {
  std::vector<Priority> out;
  const auto& mem = a.memory;
  double duration = get(k, "gpu__time_duration.sum");
  double sm_pct = get(k, "sm__throughput.avg.pct_of_peak_sustained_elapsed");
  double mem_pct = get(k, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed");
  double dram_pct = get(k, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed");
  std::set<std::string> used_groups;
  auto from_rule = [&](Priority& p, std::string_view group, double model_gain, std::string model_basis) {
    if (const RuleFinding* r = rule_group(a.rules, group)) {
      p.expected_gain_pct = r->speedup_pct;
      p.gain_basis = basis_of(*r);
      used_groups.insert(std::string(group));
    } else {
      p.expected_gain_pct = model_gain;
      p.gain_basis = std::move(model_basis);
    }
  };

  // 1. Uncoalesced global access: sectors carry bytes nobody uses.
  if (mem.bytes_per_sector_ld && mem.sectors_per_request_ld && *mem.bytes_per_sector_ld > 0 && *mem.bytes_per_sector_ld < 24) {
    Priority p{.id = "global-coalescing",
               .title = fmt::format("Uncoalesced global loads: {:.1f} of 32 bytes used per sector, {:.1f} sectors per request",
                                    *mem.bytes_per_sector_ld, *mem.sectors_per_request_ld),
               .action = "Make consecutive threads read consecutive addresses (transpose the index math, stage strided data through shared memory, or change the data layout); then use 128-bit loads.",
               .effort = "medium",
               .wiki = {"diagnosis/memory-bound-uncoalesced", "technique/vectorized-access", "hopper/tma"}};
    double waste = 1 - *mem.bytes_per_sector_ld / 32;
    from_rule(p, "global-coalescing", std::min(90.0, waste * mem_pct), "model: unused sector bytes x memory throughput share");
    p.evidence = {{"smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", *mem.bytes_per_sector_ld, "byte/sector"},
                  {"sectors_per_request.global_ld (l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum / l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum)", *mem.sectors_per_request_ld, "sector/request"},
                  ev(k, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%")};
    if (const Metric* ex = k.find("derived__memory_l2_theoretical_sectors_global_excessive")) {
      p.evidence.push_back({ex->name, ex->value.number, "sector"});
      p.source_evidence = by_source_line(k, *ex, all_pcs, a.pc_base, "excessive sectors");
    }
    out.push_back(std::move(p));
  }

  // 2. Shared-memory bank conflicts.
  double wavefronts = mem.shared_wavefronts_ld + mem.shared_wavefronts_st;
  double conflicts = mem.shared_conflicts_ld + mem.shared_conflicts_st;
  if (wavefronts > 0 && conflicts / wavefronts >= 0.10) {
    double ways = wavefronts - conflicts > 0 ? wavefronts / (wavefronts - conflicts) : 32;
    Priority p{.id = "shared-bank-conflicts",
               .title = fmt::format("Shared-memory bank conflicts: {:.0f}% of shared wavefronts are conflicts (~{:.0f}-way)", 100 * conflicts / wavefronts, ways),
               .action = "Pad the shared array (e.g. [N][33] instead of [N][32]) or XOR-swizzle the index so a warp's 32 accesses hit 32 different banks.",
               .effort = "low",
               .wiki = {"diagnosis/bank-conflicts", "technique/swizzling"}};
    from_rule(p, "shared-bank-conflicts", std::min(90.0, 100 * conflicts / wavefronts * get(k, "l1tex__throughput.avg.pct_of_peak_sustained_active") / 100),
              "model: conflict share of wavefronts x L1 throughput share");
    p.evidence = {ev(k, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"), ev(k, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"),
                  ev(k, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"), ev(k, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum")};
    if (const Metric* ex = k.find("derived__memory_l1_wavefronts_shared_excessive"))
      p.source_evidence = by_source_line(k, *ex, all_pcs, a.pc_base, "excessive shared wavefronts");
    out.push_back(std::move(p));
  }

  // 2b. L1/shared-memory throughput bound: the memory roof that binds is the SM's own (shared-memory
  // instructions, MIO queue), far from DRAM, while the math pipes have headroom. Typical of a dot
  // product or matrix product done with scalar FMAs fed from shared memory.
  const double l1_pct = get(k, "l1tex__throughput.avg.pct_of_peak_sustained_active");
  const double shared_share = wavefronts > 0 && k.find("l1tex__data_pipe_lsu_wavefronts.sum") != nullptr
                                  ? wavefronts / std::max(1.0, get(k, "l1tex__data_pipe_lsu_wavefronts.sum"))
                                  : (wavefronts > 0 ? 1.0 : 0.0);
  const bool mio_top = !a.stalls.empty() && (a.stalls.front().reason == "mio_throttle" || a.stalls.front().reason == "short_scoreboard");
  if (l1_pct >= 70 && dram_pct < 30 && wavefronts > 0 && shared_share >= 0.5 && mio_top && a.tensor_pipe_pct.value_or(0) < 10) {
    const double roof = a.roofline.fraction_of_roof;
    Priority p{.id = "shared-memory-throughput",
               .title = fmt::format("Shared-memory bound: L1/shared throughput {:.0f}% of peak, DRAM {:.0f}%, {} {:.0f}% of stalls, "
                                    "{:.0f}% of the roofline's attainable rate",
                                    l1_pct, dram_pct, a.stalls.front().reason, a.stalls.front().share_pct, 100 * roof),
               .action = "The loop is limited by shared-memory instructions, not by the math or DRAM: load more per instruction "
                         "(LDS.64/128, ldmatrix), register-tile so every loaded value feeds several FMAs, and if the math is a dot or "
                         "matrix product (FP8/BF16 operands) run it on the tensor cores (mma.sync / wgmma), which read each operand "
                         "tile from shared memory once.",
               .expected_gain_pct = std::clamp(100 * (1 - roof), 0.0, 80.0),
               .gain_basis = "model: headroom to the roofline's attainable rate while the shared-memory pipe, not a roof, binds (capped at 80%)",
               .effort = "high",
               .evidence = {ev(k, "l1tex__throughput.avg.pct_of_peak_sustained_active", "%"), ev(k, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%"),
                            ev(k, fmt::format("smsp__average_warps_issue_stalled_{}_per_issue_active.ratio", a.stalls.front().reason), "cycle"),
                            ev(k, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"), ev(k, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "%")},
               .wiki = {"diagnosis/bank-conflicts", "hopper/wgmma", "technique/software-pipelining"}};
    for (const auto& h : a.hotspots) p.source_evidence.push_back(hotspot_text(h));
    out.push_back(std::move(p));
  }

  // 3. Memory-bound at (or near) the DRAM roof with efficient access: only fewer bytes help.
  if (a.roofline.bound == "memory" && dram_pct >= 60 && !(mem.bytes_per_sector_ld && *mem.bytes_per_sector_ld < 24)) {
    Priority p{.id = "dram-bandwidth",
               .title = fmt::format("DRAM-bound: {:.1f}% of peak DRAM throughput at {:.2f} FLOP/byte", dram_pct, a.roofline.arithmetic_intensity),
               .action = "The kernel streams memory efficiently; to go faster move fewer bytes: fuse with neighbouring kernels, keep reused data in shared memory/L2, use narrower types; make sure loads are 128-bit.",
               .expected_gain_pct = std::max(0.0, 100 * (1 - dram_pct / kPracticalDramPct)),
               .gain_basis = fmt::format("model: headroom to {:.0f}% of peak DRAM bandwidth", kPracticalDramPct),
               .effort = "high",
               .evidence = {ev(k, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%"), ev(k, "dram__bytes.sum.per_second", "byte/s"),
                            {"roofline.arithmetic_intensity", a.roofline.arithmetic_intensity, "FLOP/byte"}},
               .wiki = {"diagnosis/memory-bound", "technique/fusion", "technique/vectorized-access"}};
    out.push_back(std::move(p));
  }

  // 4. Latency-bound: neither roof is near, warps stall.
  if (!a.stalls.empty() && sm_pct < 60 && mem_pct < 60) {
    const StallShare& top = a.stalls.front();
    Priority p{.id = "warp-stalls",
               .title = fmt::format("Latency-bound: SM {:.0f}% and memory {:.0f}% of peak; {} is {:.0f}% of stall cycles", sm_pct, mem_pct, top.reason, top.share_pct),
               .action = stall_advice(top.reason),
               .effort = "medium",
               .wiki = stall_wiki(top.reason)};
    double issue = get(k, "smsp__issue_active.avg.per_cycle_active");
    from_rule(p, "warp-stalls", std::min(90.0, top.share_pct * (1 - issue)), "model: top stall share x idle issue slots");
    p.evidence = {ev(k, fmt::format("smsp__average_warps_issue_stalled_{}_per_issue_active.ratio", top.reason), "cycle"),
                  ev(k, "smsp__average_warp_latency_per_inst_issued.ratio", "cycle"), ev(k, "smsp__issue_active.avg.per_cycle_active")};
    for (const auto& h : a.hotspots) p.source_evidence.push_back(hotspot_text(h));
    out.push_back(std::move(p));
  } else if (!a.stalls.empty() && a.stalls.front().share_pct >= 30) {
    // Not latency-bound overall, but one stall dominates: still worth naming with its hot PCs.
    const StallShare& top = a.stalls.front();
    Priority p{.id = "warp-stalls",
               .title = fmt::format("{} is {:.0f}% of warp stall cycles", top.reason, top.share_pct),
               .action = stall_advice(top.reason),
               .effort = "medium",
               .wiki = stall_wiki(top.reason)};
    from_rule(p, "warp-stalls", 0, "model: not latency-bound; no separate gain");
    p.evidence = {ev(k, fmt::format("smsp__average_warps_issue_stalled_{}_per_issue_active.ratio", top.reason), "cycle"),
                  ev(k, "smsp__average_warp_latency_per_inst_issued.ratio", "cycle")};
    for (const auto& h : a.hotspots) p.source_evidence.push_back(hotspot_text(h));
    out.push_back(std::move(p));
  }

  // 5. Occupancy.
  const auto& occ = a.occupancy;
  if (occ.theoretical_pct > 0 && (occ.theoretical_pct < 80 || occ.achieved_pct < 0.8 * occ.theoretical_pct || rule_group(a.rules, "occupancy"))) {
    bool theoretical = occ.theoretical_pct < 80;
    std::string limiter = occ.limiters.empty() ? "unknown" : fmt::format("{}", fmt::join(occ.limiters, "/"));
    Priority p{.id = "occupancy",
               .title = theoretical ? fmt::format("Theoretical occupancy {:.0f}%, limited by {}", occ.theoretical_pct, limiter)
                                    : fmt::format("Achieved occupancy {:.0f}% of a theoretical {:.0f}%", occ.achieved_pct, occ.theoretical_pct),
               .action = theoretical ? (limiter.find("registers") != std::string::npos ? "Cap registers (__launch_bounds__, -maxrregcount) or cut live values."
                                        : limiter.find("shared_mem") != std::string::npos ? "Use less shared memory per block (smaller tiles, fewer stages) or raise the carveout."
                                                                                           : "Change the block size so more blocks fit per SM.")
                                     : "Achieved < theoretical: balance work between blocks/warps and avoid a partial last wave.",
               .effort = theoretical ? "medium" : "medium",
               .wiki = occupancy_wiki(occ.limiters)};
    from_rule(p, "occupancy", (occ.theoretical_pct - occ.achieved_pct) / std::max(occ.theoretical_pct, 1.0) * 50, "model: half the unused warp slots");
    p.evidence = {ev(k, "sm__maximum_warps_per_active_cycle_pct", "%"), ev(k, "sm__warps_active.avg.pct_of_peak_sustained_active", "%")};
    for (const auto& [name, v] : occ.block_limits) p.evidence.push_back({"launch__occupancy_limit_" + name, v, "block"});
    out.push_back(std::move(p));
  }

  // 6. Waves: too few blocks, or a partial last wave.
  if (occ.waves_per_sm > 0) {
    double w = occ.waves_per_sm, full = std::ceil(w);
    double idle = (full - w) / full;  // share of the last wave's slots left idle, spread over the run
    if (w < 1 || (idle >= 0.1 && w < 8) || rule_group(a.rules, "tail-effect")) {
      Priority p{.id = "tail-effect",
                 .title = w < 1 ? fmt::format("Grid fills only {:.0f}% of one wave", 100 * w)
                                : fmt::format("{:.2f} waves per SM: a partial last wave ({:.0f}% full) leaves SMs idle at the end", w, 100 * (w - std::floor(w))),
                 .action = w < 1 ? "Launch more, smaller blocks (or split the work further) so every SM gets work."
                                 : "Size the grid to a whole number of waves (blocks = k x SMs x blocks/SM), or use a persistent grid-stride kernel.",
                 .effort = "low",
                 .evidence = {ev(k, "launch__waves_per_multiprocessor"), ev(k, "launch__grid_size"), ev(k, "launch__sm_count")},
                 .wiki = {"diagnosis/tail-effect", "technique/persistent-kernels"}};
      from_rule(p, "tail-effect", 100 * (w < 1 ? 1 - w : idle), "model: idle share of the last wave");
      if (w < 1) used_groups.insert("small-grid");  // ncu's "Small Grid" finding says the same thing
      out.push_back(std::move(p));
    }
  }

  // 7. Register spills.
  if (mem.spill_requests > 0) {
    Priority p{.id = "register-spills",
               .title = fmt::format("{:.0f} local-memory spill requests", mem.spill_requests),
               .action = "Reduce register pressure (smaller tiles per thread, fewer live accumulators) or relax __launch_bounds__ so the compiler stops spilling.",
               .expected_gain_pct = std::min(50.0, get(k, "derived__local_spilling_requests_pct")),
               .gain_basis = "model: spill share of memory requests",
               .effort = "medium",
               .evidence = {ev(k, "derived__local_spilling_requests"), ev(k, "derived__local_spilling_requests_pct", "%"), ev(k, "launch__registers_per_thread")},
               .wiki = {"diagnosis/register-spills", "diagnosis/low-occupancy-registers", "hopper/setmaxnreg"}};
    out.push_back(std::move(p));
  }

  // 8. Compute-bound FP32 without tensor cores.
  if (a.roofline.bound == "compute" && sm_pct >= 60 && a.tensor_pipe_pct.value_or(0) < 1 && a.roofline.flop_per_s > 0.3 * a.roofline.peak_flop_per_s) {
    Priority p{.id = "tensor-cores",
               .title = fmt::format("Compute-bound on the FP32 pipes ({:.0f}% of FP32 peak) with idle tensor cores", 100 * a.roofline.flop_per_s / a.roofline.peak_flop_per_s),
               .action = "If the math is a matrix product or convolution, move it to tensor cores (wgmma / mma.sync with BF16/FP16/TF32/FP8 inputs).",
               .expected_gain_pct = 50,
               .gain_basis = "model: tensor-core peak is several times the FP32 peak",
               .effort = "high",
               .evidence = {{"roofline.flop_per_s", a.roofline.flop_per_s, "FLOP/s"}, ev(k, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "%")},
               .wiki = {"diagnosis/compute-bound", "hopper/wgmma"}};
    out.push_back(std::move(p));
  }

  // 8b. Tensor pipe busy: the MMA roof is near; what is left is overhead around the MMAs or precision.
  if (a.tensor_pipe_pct.value_or(0) >= 50) {
    double t = *a.tensor_pipe_pct;
    Priority p{.id = "tensor-pipe-roof",
               .title = fmt::format("Tensor pipe {:.0f}% busy: close to the MMA roof", t),
               .action = "Cut the work around the MMAs (epilogue, address math, synchronisation) with warp specialisation and deeper TMA pipelines; "
                         "beyond that only a cheaper precision (FP8) or fewer FLOPs help.",
               .expected_gain_pct = std::max(0.0, 90.0 - t) / 2,
               .gain_basis = "model: half the headroom to 90% tensor pipe",
               .effort = "high",
               .evidence = {ev(k, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "%"), {"roofline.tensor_ops_per_s", a.roofline.tensor_ops_per_s, "op/s"}},
               .wiki = {"hopper/wgmma", "technique/warp-specialization", "hopper/fp8"}};
    out.push_back(std::move(p));
  }

  // 9. PM timeline tail not explained by the wave count.
  if (a.timeline.present && (a.timeline.shape == "tail" || a.timeline.shape == "ramp+tail") && a.timeline.tail_pct >= 15) {
    Priority p{.id = "timeline-tail",
               .title = fmt::format("Activity drops for the last {:.0f}% of the kernel (PM sampling)", a.timeline.tail_pct),
               .action = "Some blocks run much longer than others: balance per-block work, order long blocks first, or split the longest work items.",
               .expected_gain_pct = a.timeline.tail_pct / 2,
               .gain_basis = "model: half the low-activity tail",
               .effort = "medium",
               .evidence = {{"pm_sampling.tail_pct (" + a.timeline.series + ")", a.timeline.tail_pct, "%"}},
               .wiki = {"diagnosis/tail-effect", "technique/persistent-kernels"}};
    out.push_back(std::move(p));
  }

  // 10. Remaining rule findings with a global estimate that no model above covered.
  for (const auto& r : a.rules) {
    if (r.noisy || r.speedup_type != "global" || r.speedup_pct < 1 || used_groups.count(r.group)) continue;
    if (std::any_of(out.begin(), out.end(), [&](const Priority& p) { return p.id == r.group; })) continue;
    Priority p{.id = r.group, .title = r.title + " (ncu rule " + r.rule_id + ")",
               .action = r.message.size() > 400 ? r.message.substr(0, 400) + "..." : r.message,
               .expected_gain_pct = r.speedup_pct, .gain_basis = basis_of(r), .effort = "medium"};
    for (const auto& [name, v] : r.focus_metrics) {
      const Metric* m = k.find(name);
      p.evidence.push_back({name, v, m ? m->unit : ""});
    }
    if (p.evidence.empty()) p.evidence.push_back({"ncu_rule." + r.rule_id + ".speedup_pct", r.speedup_pct, "%"});
    if (r.group == "workload-imbalance") p.wiki = {"diagnosis/tail-effect"};
    if (r.group == "block-size") p.wiki = {"diagnosis/low-occupancy-registers"};
    out.push_back(std::move(p));
  }

  (void)duration;
  std::stable_sort(out.begin(), out.end(), [](const Priority& x, const Priority& y) { return x.expected_gain_pct > y.expected_gain_pct; });
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
  a.hotspots.assign(all_pcs.begin(), all_pcs.begin() + static_cast<long>(std::min(all_pcs.size(), options.max_hotspots)));
  a.memory = compute_memory(k);
  a.tensor_pipe_pct = metric_value(k, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active");
  a.timeline = compute_timeline(k);
  a.rules = rank_rules(k);
  a.priorities = compute_priorities(k, a, all_pcs);
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
    return Status::bad_input(filter ? "no kernel matches --kernel '" + options.kernel_regex + "'" : "the report holds no kernel results");
  return out;
}

const std::vector<std::string>& wiki_page_ids() {
  static const std::vector<std::string> kIds = {
      "diagnosis/bank-conflicts",         "diagnosis/barrier-stalls",        "diagnosis/compute-bound",
      "diagnosis/long-scoreboard-stalls", "diagnosis/low-occupancy-registers", "diagnosis/memory-bound",
      "diagnosis/memory-bound-uncoalesced", "diagnosis/register-spills",   "diagnosis/tail-effect",
      "hopper/fp8",                       "hopper/mbarrier",                 "hopper/setmaxnreg",
      "hopper/tma",
      "hopper/wgmma",                     "technique/fusion",                "technique/persistent-kernels",
      "technique/software-pipelining",    "technique/swizzling",             "technique/vectorized-access",
      "technique/warp-specialization",
  };
  return kIds;
}

}  // namespace kda::ncu
