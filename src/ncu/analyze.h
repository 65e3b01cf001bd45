// Turns one report into ranked, evidenced advice per kernel: headline numbers against peak,
// roofline position, occupancy and its limiter, warp stalls (aggregate and per PC, joined to SASS
// and source lines when the report has them), memory efficiency, tensor pipe use, the PM-sampling
// timeline's shape, and NVIDIA's rule results de-duplicated and re-ranked; at most five priorities.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ncu/report.h"
#include "util/status.h"

namespace kda::ncu {

struct AnalyzeOptions {
  std::string kernel_regex;  // ECMAScript regex searched in the demangled name; "" = every kernel
  size_t max_priorities = 5;
  size_t max_hotspots = 5;
};

struct Evidence {
  std::string metric;  // an ncu metric name, or a derived quantity ("sectors_per_request.global_ld")
  double value = 0;
  std::string unit;
};

struct Priority {
  std::string id;                // stable key, e.g. "global-coalescing"
  std::string title;             // one line
  std::string action;            // what to change
  double expected_gain_pct = 0;  // estimated share of kernel time saved (0..100)
  std::string gain_basis;  // how the estimate was made ("ncu rule UncoalescedGlobalAccess (global)", "model: ...")
  std::string effort;      // "low", "medium", "high"
  std::vector<Evidence> evidence;
  std::vector<std::string> source_evidence;  // "pc+0x0f0 line 2: LDG.E R2, [R2] (45% of samples, long_scoreboard)"
  std::vector<std::string> wiki;             // KernelWiki page ids
};

struct Roofline {
  double flop_per_s = 0, peak_flop_per_s = 0;  // FP32+FP64+FP16 non-tensor FLOP/s; peak = FP32 FMA peak
  double tensor_ops_per_s = 0;  // sum of sm__ops_path_tensor_src_*.sum.per_second (0 without tensor work)
  double dram_bytes_per_s = 0, peak_dram_bytes_per_s = 0;
  double arithmetic_intensity = 0;  // FLOP per DRAM byte
  double ridge_point = 0;           // FLOP per byte where the roofs meet
  std::string bound;                // "memory" or "compute" (with tensor work: the busier of tensor pipe/SM vs memory)
  double fraction_of_roof = 0;      // achieved / attainable at this intensity
  std::string peak_source;          // "report" or "H200 defaults"
};

struct Occupancy {
  double theoretical_pct = 0, achieved_pct = 0, waves_per_sm = 0;
  std::map<std::string, double> block_limits;  // "registers" -> blocks per SM
  std::vector<std::string> limiters;           // smallest block limit(s)
};

struct StallShare {
  std::string reason;
  double cycles_per_issue = 0;
  double share_pct = 0;
};

struct Hotspot {
  uint64_t pc = 0;
  uint64_t offset = 0;  // pc minus the kernel's lowest sampled/executed PC
  double samples = 0, share_pct = 0;
  std::string top_stall;
  double top_stall_samples = 0;
  int line = 0;        // CUDA source line when known
  std::string file;    // its source file when known (native join)
  std::string sass;    // instruction text when known
  std::string source;  // CUDA source line text when known
  std::string note;    // a rule's source-marker tooltip for this PC, if any
};

struct MemoryStats {
  std::optional<double> sectors_per_request_ld, sectors_per_request_st;
  std::optional<double> bytes_per_sector_ld, bytes_per_sector_st;
  std::optional<double> l1_hit_pct, l2_hit_pct;
  double shared_conflicts_ld = 0, shared_conflicts_st = 0, shared_wavefronts_ld = 0, shared_wavefronts_st = 0;
  double spill_requests = 0;
};

struct Timeline {
  bool present = false;
  std::string series;  // metric the shape was computed from
  size_t samples = 0;  // samples in the active window
  double interval_ns = 0;
  std::string shape;    // "steady", "tail", "ramp", "ramp+tail", "sawtooth", "too short"
  double tail_pct = 0;  // share of the active window at the end below half the mid level
  double ramp_pct = 0;  // same at the start
};

struct RuleFinding {
  std::string group;  // effect key shared by rules that report the same thing
  std::string rule_id, title, type;
  double speedup_pct = 0;
  std::string speedup_type;                                   // "global", "local", ""
  std::string message;                                        // the rule's text, link markup flattened
  std::vector<std::pair<std::string, double>> focus_metrics;  // the metrics the rule based its message on
  bool noisy = false;                                         // a rule known to misfire (e.g. MemoryL2Compression)
  std::vector<std::string> also;                              // other rule ids folded into this group
};

struct KernelAnalysis {
  int id = 0;
  std::string name;
  Dim3 grid, block;
  std::vector<std::pair<std::string, double>> headline;  // ncu metric name -> base-unit value, in display order
  Roofline roofline;
  Occupancy occupancy;
  std::vector<StallShare> stalls;      // descending
  std::vector<Hotspot> hotspots;       // descending by samples (at most AnalyzeOptions::max_hotspots)
  uint64_t pc_base = 0;                // lowest PC seen for the kernel (its entry); offsets are relative to it
  std::string source_note;             // why hotspots lack lines or SASS (e.g. "build with -lineinfo"), "" if not
  std::optional<uint64_t> code_bytes;  // the kernel's code size (its .text in the report's cubin), when embedded
  MemoryStats memory;
  std::optional<double> tensor_pipe_pct;
  Timeline timeline;
  std::vector<RuleFinding> rules;  // de-duplicated, ranked
  std::vector<Priority> priorities;
};

struct Analysis {
  std::string origin;
  std::vector<std::string> command_lines;
  std::vector<KernelAnalysis> kernels;
};

// Bad --kernel regex, or no kernel matching it, is a kBadInput error.
Result<Analysis> analyze(const Report& report, const AnalyzeOptions& options = {});
KernelAnalysis analyze_kernel(const Report& report, const KernelResult& kernel, const AnalyzeOptions& options = {});

nlohmann::json to_json(const Analysis& analysis);
std::string to_markdown(const Analysis& analysis);

// The KernelWiki page ids this module can cite (documented in docs/ncu-format.md).
const std::vector<std::string>& wiki_page_ids();

}  // namespace kda::ncu
