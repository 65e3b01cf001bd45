// The ranked advice of `kda ncu analyze`: a table of diagnoses, each a function of one kernel's
// metrics and analysis that names a problem with its evidence, an action and an expected gain (ncu's
// own rule estimate where one covers the same group, else a stated model), then the rule findings
// no diagnosis covered; all ranked by expected gain.
#include "ncu/priorities.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

namespace kda::ncu::detail {

namespace {

// Sustained DRAM bandwidth rarely exceeds this share of the theoretical peak.
constexpr double kPracticalDramPct = 90.0;

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
  if (reason == "barrier" || reason == "membar")
    return {"diagnosis/barrier-stalls", "hopper/mbarrier", "technique/warp-specialization"};
  if (reason == "short_scoreboard" || reason == "mio_throttle")
    return {"diagnosis/bank-conflicts", "technique/software-pipelining"};
  if (reason == "gmma") return {"hopper/wgmma", "technique/warp-specialization"};
  if (reason == "math_pipe_throttle") return {"diagnosis/compute-bound"};
  if (reason == "no_instruction") return {"diagnosis/code-fetch"};
  return {"technique/software-pipelining"};
}

std::vector<std::string> occupancy_wiki(const std::vector<std::string>& limiters) {
  if (std::find(limiters.begin(), limiters.end(), "registers") != limiters.end())
    return {"diagnosis/low-occupancy-registers", "hopper/setmaxnreg"};
  return {"diagnosis/low-occupancy-registers", "diagnosis/tail-effect"};
}

std::string stall_advice(const std::string& reason) {
  static const std::map<std::string, std::string> kAdvice = {
      {"long_scoreboard",
       "Warps wait on global/local memory: keep more loads in flight (unroll, vectorize, software-pipeline with "
       "cp.async/TMA) or cut the bytes loaded."},
      {"short_scoreboard",
       "Warps wait on shared memory or MUFU results: remove bank conflicts, reuse values in registers, interleave "
       "independent work."},
      {"barrier",
       "Warps wait at __syncthreads: balance work between warps, split the block's phases, or use finer-grained sync "
       "(mbarrier / named barriers)."},
      {"mio_throttle",
       "The MIO queue (shared memory, special math) is full: use wider shared accesses, fewer shared instructions, "
       "fewer conflicts."},
      {"lg_throttle",
       "The global load/store queue is full: use 128-bit vector accesses so fewer instructions move the same bytes."},
      {"math_pipe_throttle",
       "A math pipe is saturated: move work to an idle pipe (tensor cores, FMA vs ALU) or reduce instruction count."},
      {"wait",
       "Fixed-latency dependencies dominate: raise instruction-level parallelism (independent accumulators, "
       "unrolling)."},
      {"gmma", "Warps wait on wgmma: overlap loads with MMA (deeper pipeline, warp specialisation)."},
      {"branch_resolving", "Branch resolution stalls: make control flow uniform or predicate small branches."},
      {"no_instruction", "Instruction cache misses: shrink the unrolled code or improve locality."},
      {"membar", "Memory fences stall warps: relax or batch fences."},
      {"dispatch_stall", "Dispatch stalls: usually pipeline contention; check the pipe utilisation."},
  };
  auto it = kAdvice.find(reason);
  return it != kAdvice.end() ? it->second : "Reduce the dominant stall reason (" + reason + ").";
}

// A per-PC metric (e.g. excessive sectors) as source evidence: instances grouped by CUDA source line
// (PCs without a line stay on their own), the three largest groups, each with its instruction
// count, one of its instructions, its share of the stall samples and the metric's total there.
// One line per group instead of one per instruction: a 30-instruction unrolled loop is one finding.
std::vector<std::string> by_source_line(const KernelResult& k, const Metric& m, const std::vector<Hotspot>& all,
                                        uint64_t base, std::string_view what) {
  struct Group {
    double value = 0, top = -1, share = 0;
    int count = 0, line = 0;
    uint64_t pc = 0;
    std::string file, sass, text;
  };
  std::unordered_map<uint64_t, const SourceRow*> rows;
  std::unordered_map<int, std::string> line_text;
  for (const auto& r : k.source) {
    if (r.address != 0)
      rows[r.address] = &r;
    else if (r.line > 0 && !r.cuda.empty())
      line_text.emplace(r.line, r.cuda);
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
    if (line > 0 && g.text.empty())
      g.text = row && !row->cuda.empty() ? row->cuda : line_text.count(line) ? line_text[line] : "";
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
    out.push_back(fmt::format("{}: {} instruction{}{}, {:.1f}% of stall samples, {:.0f} {}", where, g.count,
                              g.count == 1 ? "" : "s", sass.empty() ? "" : " (e.g. " + sass + ")", g.share, g.value,
                              what));
  }
  if (sorted.size() > 3) out.push_back(fmt::format("... and {} more source line(s) or PCs", sorted.size() - 3));
  return out;
}

// What every diagnosis reads, and the rule groups their gains came from (so the same ncu finding is
// not listed again on its own).
struct Context {
  const KernelResult& k;
  const KernelAnalysis& a;
  const std::vector<Hotspot>& all_pcs;
  double sm_pct = get(k, "sm__throughput.avg.pct_of_peak_sustained_elapsed");
  double mem_pct = get(k, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed");
  double dram_pct = get(k, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed");
  double wavefronts = a.memory.shared_wavefronts_ld + a.memory.shared_wavefronts_st;
  double conflicts = a.memory.shared_conflicts_ld + a.memory.shared_conflicts_st;
  std::set<std::string> used_groups;

  // The gain of `p`: ncu's estimate of the rule group where one applies, else the model's.
  void from_rule(Priority& p, std::string_view group, double model_gain, std::string model_basis) {
    if (const RuleFinding* r = rule_group(a.rules, group)) {
      p.expected_gain_pct = r->speedup_pct;
      p.gain_basis = basis_of(*r);
      used_groups.insert(std::string(group));
    } else {
      p.expected_gain_pct = model_gain;
      p.gain_basis = std::move(model_basis);
    }
  }
};

// Uncoalesced global loads (sectors carry bytes nobody uses).
std::optional<Priority> global_coalescing(Context& c) {
  const KernelResult& k = c.k;
  const KernelAnalysis& a = c.a;
  const MemoryStats& mem = a.memory;
  if (mem.bytes_per_sector_ld && mem.sectors_per_request_ld && *mem.bytes_per_sector_ld > 0 &&
      *mem.bytes_per_sector_ld < 24) {
    Priority p{
        .id = "global-coalescing",
        .title = fmt::format("Uncoalesced global loads: {:.1f} of 32 bytes used per sector, {:.1f} sectors per request",
                             *mem.bytes_per_sector_ld, *mem.sectors_per_request_ld),
        .action =
            "Make consecutive threads read consecutive addresses (transpose the index math, stage strided data through "
            "shared memory, or change the data layout); then use 128-bit loads.",
        .effort = "medium",
        .wiki = {"diagnosis/memory-bound-uncoalesced", "technique/vectorized-access", "hopper/tma"}};
    double waste = 1 - *mem.bytes_per_sector_ld / 32;
    c.from_rule(p, "global-coalescing", std::min(90.0, waste * c.mem_pct),
                "model: unused sector bytes x memory throughput share");
    p.evidence = {
        {"smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", *mem.bytes_per_sector_ld, "byte/sector"},
        {"sectors_per_request.global_ld (l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum / "
         "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum)",
         *mem.sectors_per_request_ld, "sector/request"},
        ev(k, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%")};
    if (const Metric* ex = k.find("derived__memory_l2_theoretical_sectors_global_excessive")) {
      p.evidence.push_back({ex->name, ex->value.number, "sector"});
      p.source_evidence = by_source_line(k, *ex, c.all_pcs, a.pc_base, "excessive sectors");
    }
    return p;
  }
  return std::nullopt;
}

// Shared-memory bank conflicts.
std::optional<Priority> shared_bank_conflicts(Context& c) {
  const KernelResult& k = c.k;
  const KernelAnalysis& a = c.a;
  if (c.wavefronts > 0 && c.conflicts / c.wavefronts >= 0.10) {
    double ways = c.wavefronts - c.conflicts > 0 ? c.wavefronts / (c.wavefronts - c.conflicts) : 32;
    Priority p{
        .id = "shared-bank-conflicts",
        .title = fmt::format("Shared-memory bank conflicts: {:.0f}% of shared wavefronts are conflicts (~{:.0f}-way)",
                             100 * c.conflicts / c.wavefronts, ways),
        .action =
            "Pad the shared array (e.g. [N][33] instead of [N][32]) or XOR-swizzle the index so a warp's 32 accesses "
            "hit 32 different banks.",
        .effort = "low",
        .wiki = {"diagnosis/bank-conflicts", "technique/swizzling"}};
    c.from_rule(p, "shared-bank-conflicts",
                std::min(90.0, 100 * c.conflicts / c.wavefronts *
                                   get(k, "l1tex__throughput.avg.pct_of_peak_sustained_active") / 100),
                "model: conflict share of wavefronts x L1 throughput share");
    p.evidence = {ev(k, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
                  ev(k, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"),
                  ev(k, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
                  ev(k, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum")};
    if (const Metric* ex = k.find("derived__memory_l1_wavefronts_shared_excessive"))
      p.source_evidence = by_source_line(k, *ex, c.all_pcs, a.pc_base, "excessive shared wavefronts");
    return p;
  }
  return std::nullopt;
}

// The SM's own L1/shared-memory roof binds, far from DRAM, with the math pipes idle.
std::optional<Priority> shared_memory_throughput(Context& c) {
  const KernelResult& k = c.k;
  const KernelAnalysis& a = c.a;
  // The memory roof that binds is the SM's own (shared-memory instructions, MIO queue), far from
  // DRAM, while the math pipes have headroom. Typical of a dot product or matrix product done with
  // scalar FMAs fed from shared memory.
  const double l1_pct = get(k, "l1tex__throughput.avg.pct_of_peak_sustained_active");
  const double shared_share = c.wavefronts > 0 && k.find("l1tex__data_pipe_lsu_wavefronts.sum") != nullptr
                                  ? c.wavefronts / std::max(1.0, get(k, "l1tex__data_pipe_lsu_wavefronts.sum"))
                                  : (c.wavefronts > 0 ? 1.0 : 0.0);
  const bool mio_top =
      !a.stalls.empty() && (a.stalls.front().reason == "mio_throttle" || a.stalls.front().reason == "short_scoreboard");
  if (l1_pct >= 70 && c.dram_pct < 30 && c.wavefronts > 0 && shared_share >= 0.5 && mio_top &&
      a.tensor_pipe_pct.value_or(0) < 10) {
    const double roof = a.roofline.fraction_of_roof;
    Priority p{
        .id = "shared-memory-throughput",
        .title = fmt::format(
            "Shared-memory bound: L1/shared throughput {:.0f}% of peak, DRAM {:.0f}%, {} {:.0f}% of stalls, "
            "{:.0f}% of the roofline's attainable rate",
            l1_pct, c.dram_pct, a.stalls.front().reason, a.stalls.front().share_pct, 100 * roof),
        .action =
            "The loop is limited by shared-memory instructions, not by the math or DRAM: load more per instruction "
            "(LDS.64/128, ldmatrix), register-tile so every loaded value feeds several FMAs, and if the math is a dot "
            "or "
            "matrix product (FP8/BF16 operands) run it on the tensor cores (mma.sync / wgmma), which read each operand "
            "tile from shared memory once.",
        .expected_gain_pct = std::clamp(100 * (1 - roof), 0.0, 80.0),
        .gain_basis =
            "model: headroom to the roofline's attainable rate while the shared-memory pipe, not a roof, binds (capped "
            "at 80%)",
        .effort = "high",
        .evidence = {ev(k, "l1tex__throughput.avg.pct_of_peak_sustained_active", "%"),
                     ev(k, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%"),
                     ev(k,
                        fmt::format("smsp__average_warps_issue_stalled_{}_per_issue_active.ratio",
                                    a.stalls.front().reason),
                        "cycle"),
                     ev(k, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"),
                     ev(k, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "%")},
        .wiki = {"diagnosis/bank-conflicts", "hopper/wgmma", "technique/software-pipelining"}};
    for (const auto& h : a.hotspots) p.source_evidence.push_back(hotspot_text(h));
    return p;
  }
  return std::nullopt;
}

// At (or near) the DRAM roof with efficient access: only fewer bytes help.
std::optional<Priority> dram_bandwidth(Context& c) {
  const KernelResult& k = c.k;
  const KernelAnalysis& a = c.a;
  const MemoryStats& mem = a.memory;
  if (a.roofline.bound == "memory" && c.dram_pct >= 60 && !(mem.bytes_per_sector_ld && *mem.bytes_per_sector_ld < 24)) {
    Priority p{.id = "dram-bandwidth",
               .title = fmt::format("DRAM-bound: {:.1f}% of peak DRAM throughput at {:.2f} FLOP/byte", c.dram_pct,
                                    a.roofline.arithmetic_intensity),
               .action =
                   "The kernel streams memory efficiently; to go faster move fewer bytes: fuse with neighbouring "
                   "kernels, keep reused data in shared memory/L2, use narrower types; make sure loads are 128-bit.",
               .expected_gain_pct = std::max(0.0, 100 * (1 - c.dram_pct / kPracticalDramPct)),
               .gain_basis = fmt::format("model: headroom to {:.0f}% of peak DRAM bandwidth", kPracticalDramPct),
               .effort = "high",
               .evidence = {ev(k, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%"),
                            ev(k, "dram__bytes.sum.per_second", "byte/s"),
                            {"roofline.arithmetic_intensity", a.roofline.arithmetic_intensity, "FLOP/byte"}},
               .wiki = {"diagnosis/memory-bound", "technique/fusion", "technique/vectorized-access"}};
    return p;
  }
  return std::nullopt;
}

// Latency-bound (neither roof near, warps stall), or one stall reason dominating anyway.
std::optional<Priority> warp_stalls(Context& c) {
  const KernelResult& k = c.k;
  const KernelAnalysis& a = c.a;
  if (!a.stalls.empty() && c.sm_pct < 60 && c.mem_pct < 60) {
    const StallShare& top = a.stalls.front();
    Priority p{
        .id = "warp-stalls",
        .title = fmt::format("Latency-bound: SM {:.0f}% and memory {:.0f}% of peak; {} is {:.0f}% of stall cycles",
                             c.sm_pct, c.mem_pct, top.reason, top.share_pct),
        .action = stall_advice(top.reason),
        .effort = "medium",
        .wiki = stall_wiki(top.reason)};
    double issue = get(k, "smsp__issue_active.avg.per_cycle_active");
    c.from_rule(p, "warp-stalls", std::min(90.0, top.share_pct * (1 - issue)),
                "model: top stall share x idle issue slots");
    p.evidence = {
        ev(k, fmt::format("smsp__average_warps_issue_stalled_{}_per_issue_active.ratio", top.reason), "cycle"),
        ev(k, "smsp__average_warp_latency_per_inst_issued.ratio", "cycle"),
        ev(k, "smsp__issue_active.avg.per_cycle_active")};
    for (const auto& h : a.hotspots) p.source_evidence.push_back(hotspot_text(h));
    return p;
  } else if (!a.stalls.empty() && a.stalls.front().share_pct >= 30) {
    // Not latency-bound overall, but one stall dominates: still worth naming with its hot PCs.
    const StallShare& top = a.stalls.front();
    Priority p{.id = "warp-stalls",
               .title = fmt::format("{} is {:.0f}% of warp stall cycles", top.reason, top.share_pct),
               .action = stall_advice(top.reason),
               .effort = "medium",
               .wiki = stall_wiki(top.reason)};
    c.from_rule(p, "warp-stalls", 0, "model: not latency-bound; no separate gain");
    p.evidence = {
        ev(k, fmt::format("smsp__average_warps_issue_stalled_{}_per_issue_active.ratio", top.reason), "cycle"),
        ev(k, "smsp__average_warp_latency_per_inst_issued.ratio", "cycle")};
    for (const auto& h : a.hotspots) p.source_evidence.push_back(hotspot_text(h));
    return p;
  }
  return std::nullopt;
}

// Occupancy: theoretical below 80 %, or achieved well below theoretical.
std::optional<Priority> occupancy(Context& c) {
  const KernelResult& k = c.k;
  const KernelAnalysis& a = c.a;
  const auto& occ = a.occupancy;
  if (occ.theoretical_pct > 0 &&
      (occ.theoretical_pct < 80 || occ.achieved_pct < 0.8 * occ.theoretical_pct || rule_group(a.rules, "occupancy"))) {
    bool theoretical = occ.theoretical_pct < 80;
    std::string limiter = occ.limiters.empty() ? "unknown" : fmt::format("{}", fmt::join(occ.limiters, "/"));
    Priority p{
        .id = "occupancy",
        .title = theoretical ? fmt::format("Theoretical occupancy {:.0f}%, limited by {}", occ.theoretical_pct, limiter)
                             : fmt::format("Achieved occupancy {:.0f}% of a theoretical {:.0f}%", occ.achieved_pct,
                                           occ.theoretical_pct),
        .action = theoretical
                      ? (limiter.find("registers") != std::string::npos
                             ? "Cap registers (__launch_bounds__, -maxrregcount) or cut live values."
                         : limiter.find("shared_mem") != std::string::npos
                             ? "Use less shared memory per block (smaller tiles, fewer stages) or raise the carveout."
                             : "Change the block size so more blocks fit per SM.")
                      : "Achieved < theoretical: balance work between blocks/warps and avoid a partial last wave.",
        .effort = theoretical ? "medium" : "medium",
        .wiki = occupancy_wiki(occ.limiters)};
    c.from_rule(p, "occupancy", (occ.theoretical_pct - occ.achieved_pct) / std::max(occ.theoretical_pct, 1.0) * 50,
                "model: half the unused warp slots");
    p.evidence = {ev(k, "sm__maximum_warps_per_active_cycle_pct", "%"),
                  ev(k, "sm__warps_active.avg.pct_of_peak_sustained_active", "%")};
    for (const auto& [name, v] : occ.block_limits)
      p.evidence.push_back({"launch__occupancy_limit_" + name, v, "block"});
    return p;
  }
  return std::nullopt;
}

// Waves: too few blocks, or a partial last wave.
std::optional<Priority> tail_effect(Context& c) {
  const KernelResult& k = c.k;
  const KernelAnalysis& a = c.a;
  const auto& occ = a.occupancy;
  if (occ.waves_per_sm > 0) {
    double w = occ.waves_per_sm, full = std::ceil(w);
    double idle = (full - w) / full;  // share of the last wave's slots left idle, spread over the run
    if (w < 1 || (idle >= 0.1 && w < 8) || rule_group(a.rules, "tail-effect")) {
      Priority p{
          .id = "tail-effect",
          .title =
              w < 1 ? fmt::format("Grid fills only {:.0f}% of one wave", 100 * w)
                    : fmt::format("{:.2f} waves per SM: a partial last wave ({:.0f}% full) leaves SMs idle at the end",
                                  w, 100 * (w - std::floor(w))),
          .action = w < 1 ? "Launch more, smaller blocks (or split the work further) so every SM gets work."
                          : "Size the grid to a whole number of waves (blocks = k x SMs x blocks/SM), or use a "
                            "persistent grid-stride kernel.",
          .effort = "low",
          .evidence = {ev(k, "launch__waves_per_multiprocessor"), ev(k, "launch__grid_size"),
                       ev(k, "launch__sm_count")},
          .wiki = {"diagnosis/tail-effect", "technique/persistent-kernels"}};
      c.from_rule(p, "tail-effect", 100 * (w < 1 ? 1 - w : idle), "model: idle share of the last wave");
      if (w < 1) c.used_groups.insert("small-grid");  // ncu's "Small Grid" finding says the same thing
      return p;
    }
  }
  return std::nullopt;
}

// Code that arrives from memory: kda eval (and ncu's --cache-control all) starts each call with a cold L2, so a
// kernel whose code runs through once (loops unrolled; a small grid or a single pass) fetches its instruction
// lines one after another. The model: the code's KiB times a cost per KiB, against the kernel's duration. The
// cost is an estimate: the slope of a line through five kda kernels' H100 latencies at their smallest inputs
// against their code size (GDN decode 6.9 KiB 2.2 us, short_scan 18.7 KiB 4.7 us, chunk_output 27.6 KiB 8.0 us,
// wy_prepare 42.4 KiB 12.8 us, the MoE route 67 KiB 15.7 us: 0.23 us a KiB, 1.0 us at none; session 12,
// knowledge/diagnosis/code-fetch.md). bench/gpu/code_fetch.cu measures it apart from any algorithm.
constexpr double kFetchNsPerKiB = 230;
std::optional<Priority> code_fetch(Context& c) {
  const KernelResult& k = c.k;
  const double duration_ns = get(k, "gpu__time_duration.sum");
  if (!c.a.code_bytes || duration_ns <= 0) return std::nullopt;
  const double kib = static_cast<double>(*c.a.code_bytes) / 1024, fetch_ns = kib * kFetchNsPerKiB;
  // A kernel done sooner than its whole code could arrive ran only part of it (a branch for small inputs): the
  // size says nothing about what it fetched.
  if (kib < 8 || fetch_ns > duration_ns || fetch_ns < 0.1 * duration_ns) return std::nullopt;
  const double share = std::min(90.0, 100 * fetch_ns / duration_ns);
  Priority p{.id = "code-fetch",
             .title = fmt::format("{:.0f} KiB of code: about {:.1f} us of instruction fetch after a cold L2", kib,
                                  fetch_ns / 1000),
             .action =
                 "Keep the loops that run once rolled (#pragma unroll 1, or a small unroll factor) and unroll "
                 "only the inner loops that repeat; move rarely taken paths (edge cases, slow-path math) out "
                 "of line.",
             .expected_gain_pct = share,
             .gain_basis = "model: code KiB x an estimated 0.23 us of fetch per KiB / duration",
             .effort = "low",
             .evidence = {{"code_bytes (the kernel's .text in the report's cubin)",
                           static_cast<double>(*c.a.code_bytes), "byte"},
                          ev(k, "gpu__time_duration.sum")},
             .wiki = {"diagnosis/code-fetch"}};
  for (const auto& s : c.a.stalls)  // compute_stalls' names (the per-PC samples call it no_instructions)
    if (s.reason == "no_instruction") p.evidence.push_back({"no_instruction stall share", s.share_pct, "%"});
  return p;
}

// Register spills to local memory.
std::optional<Priority> register_spills(Context& c) {
  const KernelResult& k = c.k;
  const KernelAnalysis& a = c.a;
  const MemoryStats& mem = a.memory;
  if (mem.spill_requests > 0) {
    Priority p{.id = "register-spills",
               .title = fmt::format("{:.0f} local-memory spill requests", mem.spill_requests),
               .action =
                   "Reduce register pressure (smaller tiles per thread, fewer live accumulators) or relax "
                   "__launch_bounds__ so the compiler stops spilling.",
               .expected_gain_pct = std::min(50.0, get(k, "derived__local_spilling_requests_pct")),
               .gain_basis = "model: spill share of memory requests",
               .effort = "medium",
               .evidence = {ev(k, "derived__local_spilling_requests"),
                            ev(k, "derived__local_spilling_requests_pct", "%"), ev(k, "launch__registers_per_thread")},
               .wiki = {"diagnosis/register-spills", "diagnosis/low-occupancy-registers", "hopper/setmaxnreg"}};
    return p;
  }
  return std::nullopt;
}

// Compute-bound on the FP32 pipes with idle tensor cores.
std::optional<Priority> tensor_cores(Context& c) {
  const KernelResult& k = c.k;
  const KernelAnalysis& a = c.a;
  if (a.roofline.bound == "compute" && c.sm_pct >= 60 && a.tensor_pipe_pct.value_or(0) < 1 &&
      a.roofline.flop_per_s > 0.3 * a.roofline.peak_flop_per_s) {
    Priority p{.id = "tensor-cores",
               .title = fmt::format("Compute-bound on the FP32 pipes ({:.0f}% of FP32 peak) with idle tensor cores",
                                    100 * a.roofline.flop_per_s / a.roofline.peak_flop_per_s),
               .action =
                   "If the math is a matrix product or convolution, move it to tensor cores (wgmma / mma.sync with "
                   "BF16/FP16/TF32/FP8 inputs).",
               .expected_gain_pct = 50,
               .gain_basis = "model: tensor-core peak is several times the FP32 peak",
               .effort = "high",
               .evidence = {{"roofline.flop_per_s", a.roofline.flop_per_s, "FLOP/s"},
                            ev(k, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "%")},
               .wiki = {"diagnosis/compute-bound", "hopper/wgmma"}};
    return p;
  }
  return std::nullopt;
}

// The tensor pipe near its roof: what is left is overhead around the MMAs, or precision.
std::optional<Priority> tensor_pipe_roof(Context& c) {
  const KernelResult& k = c.k;
  const KernelAnalysis& a = c.a;
  if (a.tensor_pipe_pct.value_or(0) >= 50) {
    double t = *a.tensor_pipe_pct;
    Priority p{.id = "tensor-pipe-roof",
               .title = fmt::format("Tensor pipe {:.0f}% busy: close to the MMA roof", t),
               .action =
                   "Cut the work around the MMAs (epilogue, address math, synchronisation) with warp specialisation "
                   "and deeper TMA pipelines; "
                   "beyond that only a cheaper precision (FP8) or fewer FLOPs help.",
               .expected_gain_pct = std::max(0.0, 90.0 - t) / 2,
               .gain_basis = "model: half the headroom to 90% tensor pipe",
               .effort = "high",
               .evidence = {ev(k, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "%"),
                            {"roofline.tensor_ops_per_s", a.roofline.tensor_ops_per_s, "op/s"}},
               .wiki = {"hopper/wgmma", "technique/warp-specialization", "hopper/fp8"}};
    return p;
  }
  return std::nullopt;
}

// A PM-sampling tail the wave count does not explain.
std::optional<Priority> timeline_tail(Context& c) {
  const KernelAnalysis& a = c.a;
  if (a.timeline.present && (a.timeline.shape == "tail" || a.timeline.shape == "ramp+tail") &&
      a.timeline.tail_pct >= 15) {
    Priority p{
        .id = "timeline-tail",
        .title = fmt::format("Activity drops for the last {:.0f}% of the kernel (PM sampling)", a.timeline.tail_pct),
        .action =
            "Some blocks run much longer than others: balance per-block work, order long blocks first, or split the "
            "longest work items.",
        .expected_gain_pct = a.timeline.tail_pct / 2,
        .gain_basis = "model: half the low-activity tail",
        .effort = "medium",
        .evidence = {{"pm_sampling.tail_pct (" + a.timeline.series + ")", a.timeline.tail_pct, "%"}},
        .wiki = {"diagnosis/tail-effect", "technique/persistent-kernels"}};
    return p;
  }
  return std::nullopt;
}

// The ncu rule findings with a global estimate that no diagnosis covered, each as its own priority.
void uncovered_rule_findings(const Context& c, std::vector<Priority>& out) {
  const KernelResult& k = c.k;
  const KernelAnalysis& a = c.a;
  for (const auto& r : a.rules) {
    if (r.noisy || r.speedup_type != "global" || r.speedup_pct < 1 || c.used_groups.count(r.group)) continue;
    if (std::any_of(out.begin(), out.end(), [&](const Priority& p) { return p.id == r.group; })) continue;
    Priority p{.id = r.group,
               .title = r.title + " (ncu rule " + r.rule_id + ")",
               .action = r.message.size() > 400 ? r.message.substr(0, 400) + "..." : r.message,
               .expected_gain_pct = r.speedup_pct,
               .gain_basis = basis_of(r),
               .effort = "medium"};
    for (const auto& [name, v] : r.focus_metrics) {
      const Metric* m = k.find(name);
      p.evidence.push_back({name, v, m ? m->unit : ""});
    }
    if (p.evidence.empty()) p.evidence.push_back({"ncu_rule." + r.rule_id + ".speedup_pct", r.speedup_pct, "%"});
    if (r.group == "workload-imbalance") p.wiki = {"diagnosis/tail-effect"};
    if (r.group == "block-size") p.wiki = {"diagnosis/low-occupancy-registers"};
    out.push_back(std::move(p));
  }
}

using Diagnosis = std::optional<Priority> (*)(Context&);
// In this order (the order of equal gains in the ranking).
constexpr Diagnosis kDiagnoses[] = {
    global_coalescing, shared_bank_conflicts, shared_memory_throughput,
    dram_bandwidth,    warp_stalls,           occupancy,
    tail_effect,       register_spills,       tensor_cores,
    tensor_pipe_roof,  timeline_tail,         code_fetch,
};

}  // namespace

std::vector<Priority> compute_priorities(const KernelResult& k, const KernelAnalysis& a,
                                         const std::vector<Hotspot>& all_pcs) {
  Context c{k, a, all_pcs};
  std::vector<Priority> out;
  for (Diagnosis d : kDiagnoses)
    if (auto p = d(c)) out.push_back(std::move(*p));
  uncovered_rule_findings(c, out);
  std::stable_sort(out.begin(), out.end(),
                   [](const Priority& x, const Priority& y) { return x.expected_gain_pct > y.expected_gain_pct; });
  return out;
}

}  // namespace kda::ncu::detail
