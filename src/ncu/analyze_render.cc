// JSON and Markdown renderings of an Analysis (REPORT.md / analysis.json of `kda ncu analyze`).
#include <cmath>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ncu/analyze.h"

namespace kda::ncu {

namespace {

using nlohmann::json;

// "kernel.cu:104" (the file's base name), "104" without a file, "" without a line.
std::string line_cell(const Hotspot& h) {
  if (h.line <= 0) return "";
  const size_t slash = h.file.rfind('/');
  const std::string base = slash == std::string::npos ? h.file : h.file.substr(slash + 1);
  return base.empty() ? std::to_string(h.line) : base + ":" + std::to_string(h.line);
}

// One source line for a table cell: trimmed, pipes escaped, at most 80 characters.
std::string source_cell(std::string text) {
  const size_t first = text.find_first_not_of(" \t");
  text = first == std::string::npos ? std::string() : text.substr(first);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c == '`' ? '\'' : c;
  }
  return out.empty() ? "" : "`" + out + "`";
}

json num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
json opt(const std::optional<double>& v) { return v ? num(*v) : json(nullptr); }
json dim(const Dim3& d) { return json::array({d.x, d.y, d.z}); }

json priority_json(const Priority& p, size_t rank) {
  json evidence = json::array();
  for (const auto& e : p.evidence)
    evidence.push_back({{"metric", e.metric}, {"value", num(e.value)}, {"unit", e.unit}});
  return {{"rank", rank},
          {"id", p.id},
          {"title", p.title},
          {"action", p.action},
          {"expected_gain_pct", num(p.expected_gain_pct)},
          {"gain_basis", p.gain_basis},
          {"effort", p.effort},
          {"evidence", evidence},
          {"source_evidence", p.source_evidence},
          {"wiki", p.wiki}};
}

// Human-readable value with a unit (base units in, scaled for reading).
std::string human(double v, const std::string& unit) {
  if (!std::isfinite(v)) return "n/a";
  if (unit == "ns")
    return v >= 1e6   ? fmt::format("{:.3f} ms", v / 1e6)
           : v >= 1e3 ? fmt::format("{:.2f} us", v / 1e3)
                      : fmt::format("{:.0f} ns", v);
  if (unit == "%") return fmt::format("{:.2f}%", v);
  auto scaled = [&](const char* base) {
    const char* prefixes[] = {"", "K", "M", "G", "T", "P"};
    int i = 0;
    while (std::fabs(v) >= 1000 && i < 5) {
      v /= 1000;
      ++i;
    }
    return fmt::format("{:.3g} {}{}", v, prefixes[i], base);
  };
  if (unit == "byte") return scaled("B");
  if (unit == "byte/s") return scaled("B/s");
  if (unit == "hz") return scaled("Hz");
  if (unit == "FLOP/s") return scaled("FLOP/s");
  if (v == std::trunc(v) && std::fabs(v) < 1e15) return fmt::format("{:.0f}{}", v, unit.empty() ? "" : " " + unit);
  return fmt::format("{:.4g}{}", v, unit.empty() ? "" : " " + unit);
}

}  // namespace

nlohmann::json to_json(const Analysis& analysis) {
  json kernels = json::array();
  for (const auto& k : analysis.kernels) {
    json metrics = json::object();
    for (const auto& [name, v] : k.headline) metrics[name] = num(v);
    json stalls = json::array();
    for (const auto& s : k.stalls)
      stalls.push_back(
          {{"reason", s.reason}, {"cycles_per_issue", num(s.cycles_per_issue)}, {"share_pct", num(s.share_pct)}});
    json hotspots = json::array();
    for (const auto& h : k.hotspots)
      hotspots.push_back({{"pc", fmt::format("0x{:x}", h.pc)},
                          {"offset", fmt::format("0x{:x}", h.offset)},
                          {"samples", num(h.samples)},
                          {"share_pct", num(h.share_pct)},
                          {"top_stall", h.top_stall},
                          {"top_stall_samples", num(h.top_stall_samples)},
                          {"line", h.line},
                          {"file", h.file},
                          {"sass", h.sass},
                          {"source", h.source},
                          {"note", h.note}});
    json rules = json::array();
    for (const auto& r : k.rules)
      rules.push_back({{"group", r.group},
                       {"rule", r.rule_id},
                       {"title", r.title},
                       {"type", r.type},
                       {"speedup_pct", num(r.speedup_pct)},
                       {"speedup_type", r.speedup_type},
                       {"message", r.message},
                       {"noisy", r.noisy},
                       {"also", r.also}});
    json priorities = json::array();
    for (size_t i = 0; i < k.priorities.size(); ++i) priorities.push_back(priority_json(k.priorities[i], i + 1));
    const auto& r = k.roofline;
    const auto& o = k.occupancy;
    const auto& m = k.memory;
    const auto& t = k.timeline;
    kernels.push_back({
        {"id", k.id},
        {"name", k.name},
        {"grid", dim(k.grid)},
        {"block", dim(k.block)},
        {"metrics", metrics},
        {"roofline",
         {{"flop_per_s", num(r.flop_per_s)},
          {"tensor_ops_per_s", num(r.tensor_ops_per_s)},
          {"peak_flop_per_s", num(r.peak_flop_per_s)},
          {"dram_bytes_per_s", num(r.dram_bytes_per_s)},
          {"peak_dram_bytes_per_s", num(r.peak_dram_bytes_per_s)},
          {"arithmetic_intensity", num(r.arithmetic_intensity)},
          {"ridge_point", num(r.ridge_point)},
          {"bound", r.bound},
          {"fraction_of_roof", num(r.fraction_of_roof)},
          {"peak_source", r.peak_source}}},
        {"occupancy",
         {{"theoretical_pct", num(o.theoretical_pct)},
          {"achieved_pct", num(o.achieved_pct)},
          {"waves_per_sm", num(o.waves_per_sm)},
          {"block_limits", o.block_limits},
          {"limiters", o.limiters}}},
        {"stalls", stalls},
        {"hotspots", hotspots},
        {"pc_base", fmt::format("0x{:x}", k.pc_base)},
        {"source_note", k.source_note},
        {"code_bytes", k.code_bytes ? nlohmann::json(*k.code_bytes) : nlohmann::json(nullptr)},
        {"memory",
         {{"sectors_per_request_global_ld", opt(m.sectors_per_request_ld)},
          {"sectors_per_request_global_st", opt(m.sectors_per_request_st)},
          {"bytes_per_sector_global_ld", opt(m.bytes_per_sector_ld)},
          {"bytes_per_sector_global_st", opt(m.bytes_per_sector_st)},
          {"l1_hit_pct", opt(m.l1_hit_pct)},
          {"l2_hit_pct", opt(m.l2_hit_pct)},
          {"shared_bank_conflicts_ld", num(m.shared_conflicts_ld)},
          {"shared_bank_conflicts_st", num(m.shared_conflicts_st)},
          {"shared_wavefronts_ld", num(m.shared_wavefronts_ld)},
          {"shared_wavefronts_st", num(m.shared_wavefronts_st)},
          {"spill_requests", num(m.spill_requests)}}},
        {"tensor_pipe_pct", opt(k.tensor_pipe_pct)},
        {"timeline",
         {{"present", t.present},
          {"series", t.series},
          {"samples", t.samples},
          {"interval_ns", num(t.interval_ns)},
          {"shape", t.shape},
          {"tail_pct", num(t.tail_pct)},
          {"ramp_pct", num(t.ramp_pct)}}},
        {"rules", rules},
        {"priorities", priorities},
    });
  }
  return {{"origin", analysis.origin}, {"command_lines", analysis.command_lines}, {"kernels", kernels}};
}

std::string to_markdown(const Analysis& analysis) {
  std::ostringstream s;
  s << "# Nsight Compute analysis\n\n";
  s << "Source: " << analysis.origin
    << (analysis.command_lines.empty() ? "" : " — `" + analysis.command_lines.front() + "`") << "\n\n";
  for (const auto& k : analysis.kernels) {
    auto metric = [&](const std::string& name) -> std::optional<double> {
      for (const auto& [n, v] : k.headline)
        if (n == name) return v;
      return std::nullopt;
    };
    s << fmt::format("## Kernel {}: `{}`\n\n", k.id, k.name);
    s << fmt::format("Grid ({}, {}, {}) x block ({}, {}, {}).", k.grid.x, k.grid.y, k.grid.z, k.block.x, k.block.y,
                     k.block.z);
    if (auto d = metric("gpu__time_duration.sum")) s << " Duration **" << human(*d, "ns") << "**.";
    if (k.code_bytes) s << fmt::format(" Code {:.1f} KiB.", static_cast<double>(*k.code_bytes) / 1024);
    auto pct = [&](const char* name) {
      auto v = metric(name);
      return v ? fmt::format("{:.1f}%", *v) : std::string("n/a");
    };
    s << " SM " << pct("sm__throughput.avg.pct_of_peak_sustained_elapsed") << ", memory "
      << pct("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed") << ", DRAM "
      << pct("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed") << " of peak.\n\n";
    const auto& r = k.roofline;
    s << fmt::format(
        "Roofline: **{}-bound**; {} of {} DRAM bandwidth, {} of {} FP32 peak, {:.3g} FLOP/byte (ridge {:.3g}); {:.0f}% "
        "of the attainable roof (peaks from {}).\n\n",
        r.bound, human(r.dram_bytes_per_s, "byte/s"), human(r.peak_dram_bytes_per_s, "byte/s"),
        human(r.flop_per_s, "FLOP/s"), human(r.peak_flop_per_s, "FLOP/s"), r.arithmetic_intensity, r.ridge_point,
        100 * r.fraction_of_roof, r.peak_source);
    s << "### Priorities\n\n";
    if (k.priorities.empty()) s << "No actionable finding.\n\n";
    for (size_t i = 0; i < k.priorities.size(); ++i) {
      const auto& p = k.priorities[i];
      s << fmt::format("{}. **{}** — expected gain ~{:.0f}% ({}), effort {}.\n", i + 1, p.title, p.expected_gain_pct,
                       p.gain_basis, p.effort);
      s << "   - Do: " << p.action << "\n";
      if (!p.evidence.empty()) {
        s << "   - Evidence:";
        for (size_t j = 0; j < p.evidence.size(); ++j)
          s << (j ? ";" : "") << " `" << p.evidence[j].metric
            << "` = " << human(p.evidence[j].value, p.evidence[j].unit);
        s << "\n";
      }
      for (const auto& src : p.source_evidence) s << "   - Source: " << src << "\n";
      if (!p.wiki.empty()) s << "   - KernelWiki: " << fmt::format("{}", fmt::join(p.wiki, ", ")) << "\n";
    }
    s << "\n### Occupancy and launch\n\n";
    const auto& o = k.occupancy;
    s << fmt::format("Theoretical {:.1f}%, achieved {:.1f}%, {:.2f} waves per SM. Block limits per SM:",
                     o.theoretical_pct, o.achieved_pct, o.waves_per_sm);
    for (const auto& [name, v] : o.block_limits) s << fmt::format(" {} {:.0f};", name, v);
    s << " limiter: " << (o.limiters.empty() ? std::string("n/a") : fmt::format("{}", fmt::join(o.limiters, ", ")))
      << ".\n\n";
    if (!k.stalls.empty()) {
      s << "### Warp stalls\n\n| reason | cycles per issued instruction | share |\n|---|---|---|\n";
      for (size_t i = 0; i < k.stalls.size() && i < 6; ++i)
        s << fmt::format("| {} | {:.2f} | {:.1f}% |\n", k.stalls[i].reason, k.stalls[i].cycles_per_issue,
                         k.stalls[i].share_pct);
      s << "\n";
    }
    if (!k.hotspots.empty()) {
      s << "Hot PCs (sampled):\n\n| pc offset | line | instruction | samples | top stall | source "
           "|\n|---|---|---|---|---|---|\n";
      for (const auto& h : k.hotspots)
        s << fmt::format("| +0x{:x} | {} | `{}` | {:.0f} ({:.1f}%) | {} | {} |\n", h.offset, line_cell(h),
                         h.sass.empty() ? "?" : h.sass, h.samples, h.share_pct, h.top_stall, source_cell(h.source));
      s << "\n";
    }
    if (!k.source_note.empty()) s << "Source view: " << k.source_note << ".\n\n";
    const auto& m = k.memory;
    s << "### Memory\n\n";
    auto o2 = [](const std::optional<double>& v, const char* fmtstr) {
      return v ? fmt::format(fmt::runtime(fmtstr), *v) : std::string("n/a");
    };
    s << "Global loads: " << o2(m.sectors_per_request_ld, "{:.2f}") << " sectors/request, "
      << o2(m.bytes_per_sector_ld, "{:.2f}")
      << " of 32 bytes used per sector. Stores: " << o2(m.sectors_per_request_st, "{:.2f}")
      << " sectors/request. L1 hit " << o2(m.l1_hit_pct, "{:.1f}%") << ", L2 hit " << o2(m.l2_hit_pct, "{:.1f}%")
      << ".";
    s << fmt::format(
        " Shared bank conflicts: {:.0f} of {:.0f} load wavefronts, {:.0f} of {:.0f} store wavefronts. Spill requests: "
        "{:.0f}.\n\n",
        m.shared_conflicts_ld, m.shared_wavefronts_ld, m.shared_conflicts_st, m.shared_wavefronts_st, m.spill_requests);
    if (k.tensor_pipe_pct) s << fmt::format("Tensor pipe active {:.1f}% of peak.\n\n", *k.tensor_pipe_pct);
    if (k.timeline.present)
      s << fmt::format(
          "PM-sampling timeline: **{}** over {} samples of ~{:.0f} ns (tail {:.0f}%, ramp {:.0f}%; series `{}`).\n\n",
          k.timeline.shape, k.timeline.samples, k.timeline.interval_ns, k.timeline.tail_pct, k.timeline.ramp_pct,
          k.timeline.series);
    if (!k.rules.empty()) {
      s << "### NVIDIA rules (de-duplicated, ranked by global estimate)\n\n| group | rule | type | estimate | note "
           "|\n|---|---|---|---|---|\n";
      for (const auto& rf : k.rules) {
        if (rf.type == "INF" && rf.speedup_pct == 0) continue;
        std::string note = rf.noisy ? "known to misfire" : "";
        if (!rf.also.empty())
          note += (note.empty() ? "" : "; ") + std::string("also ") + fmt::format("{}", fmt::join(rf.also, ", "));
        s << fmt::format(
            "| {} | {} | {} | {} | {} |\n", rf.group, rf.rule_id, rf.type,
            rf.speedup_type.empty() ? std::string("-") : fmt::format("{:.2f}% {}", rf.speedup_pct, rf.speedup_type),
            note);
      }
      s << "\n";
    }
  }
  return s.str();
}

}  // namespace kda::ncu
