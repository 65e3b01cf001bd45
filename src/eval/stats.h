// Summary statistics of latency samples.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kda::eval {

struct SampleStats {
  int n = 0;
  double median = 0, mean = 0, min = 0, max = 0, p10 = 0, p90 = 0, stddev = 0;
  double cv = 0;  // stddev / mean
};

// Quantiles by linear interpolation between order statistics.
SampleStats summarize(std::vector<double> samples);
double quantile_sorted(const std::vector<double>& sorted, double q);
double geometric_mean(const std::vector<double>& xs);
double arithmetic_mean(const std::vector<double>& xs);

// Where a call's time went, kernel by kernel: from each timed call's time in each kernel (ms, CUPTI),
// {name: {"median_ms", "calls"}} (the median over the calls the kernel ran in), in name order.
nlohmann::json kernel_medians(const std::map<std::string, std::vector<double>>& ms_by_name);

// A kernel's name as a person reads it: the demangled function without its namespaces, return type
// and parameters ("_ZN..._run10state_scanENS_6ParamsE" -> "state_scan", template arguments kept:
// "gdn_decode_rows<4>"); the name itself where it does not demangle (extern "C" kernels).
std::string kernel_label(const std::string& mangled);

// kernel_medians' result as one line, the slowest kernel first ("state_scan 0.116, wy_prepare 0.077 ms");
// empty for fewer than two kernels (one kernel's time is the latency already said).
std::string kernel_breakdown(const nlohmann::json& by_name);

// "0.0077 ms idle between launches (73 % of the span)" where the median call left the GPU idle for at
// least kIdleNoteShare of its latency (a host-bound sequence of launches); "" otherwise.
inline constexpr double kIdleNoteShare = 0.2;
std::string idle_note(double idle_ms, double latency_ms);

// The two-sided 95 % quantile of Student's t with `df` degrees of freedom (df >= 1; 1.96 beyond 30).
double student_t95(int df);

// A 95 % confidence interval for a geomean speedup from its trials: per workload i and trial t the
// candidate's and the baseline's median latencies, interleaved in the same trial (so a trial's ratio
// cancels what drifts within it). Each trial's geomean speedup G_t over the workloads is one
// replicate; the interval is geomean * exp(+-t95(T-1) * sd(log G_t) / sqrt(T)), centred on the
// reported geomean. nullopt with fewer than two trials (or a missing, non-positive latency).
struct Interval {
  double low = 0, high = 0;
};
// A 95 % t-interval of the mean of `xs` (nullopt with fewer than two values).
std::optional<Interval> mean_ci95(const std::vector<double>& xs);
// The geometric mean of positive ratios, one per independent replicate (e.g. one per evaluation in
// fresh processes), with the 95 % t-interval of the mean of their logarithms mapped back; nullopt
// with fewer than two values or one that is not positive.
struct RatioEstimate {
  double geomean = 0;
  Interval ci;
};
std::optional<RatioEstimate> ratio_ci95(const std::vector<double>& ratios);
std::optional<Interval> geomean_speedup_ci(const std::vector<std::vector<double>>& candidate_trials,
                                           const std::vector<std::vector<double>>& baseline_trials, double geomean);

// The fresh-versus-repeat test against remembered outputs: latencies of timed calls whose input set
// the candidate had never been called on (fresh), against calls on sets it had seen (repeat). A cache
// of outputs, whatever it is keyed on and however many entries it holds, answers repeats from memory.
//   * Unpaired (the host backend): fresh calls against calls on sets loaded again just before (so
//     both pay the same harness work: a host call right after its inputs were written runs slower).
//     The host packs' work depends on shapes only.
//   * Paired (CUDA): each timing set (A, B; the warm-up runs on a third) timed on its first call and
//     on its later calls, the pair being (first call, median of the later ones). The same data means
//     the same work, so an honest pair differs by noise only even where the work depends on the
//     values (MoE routing, DSA sequence lengths: unpaired, fresh draws against other draws put an
//     honest MoE baseline at a ratio of 0.57, H200 run 29). The later calls are the reported latency
//     itself, so a cache that computes honestly on the first few repeats of a set (to look honest
//     to a pair of first call and next call) still has its replays in the median. On the host pairs
//     do not work: a first call on a newly written set ran up to 1.8x slower than the same set
//     written again (honest_persistent_scratch under load, 6 of 6 pairs).
struct FreshRepeat {
  int n_fresh = 0, n_repeat = 0;  // paired: the same count on both sides
  double fresh_median_ms = 0, repeat_median_ms = 0;
  double ratio = 0;          // repeat median / fresh median (paired: median over pairs of repeat / fresh)
  double repeat_faster = 0;  // fraction of (fresh, repeat) pairs whose repeat was faster (ties count half)
  bool applies = false;      // enough samples
  bool memoized = false;     // ratio < kMemoRatio, repeat_faster >= kMemoDominance, gain >= kMemoMinGainMs
};
// Repeats must be this much faster (median) and faster in this fraction of the pairs: the second
// condition keeps a few noisy calls from convicting an honest kernel (unpaired, for one distribution
// the fraction is 0.5 with a standard deviation of sqrt((n+m+1)/(12nm)): 0.12 for the 9 fresh and 12
// reloaded calls of a 3 x 50-iteration host evaluation; paired, each pair is a coin flip).
// A cache that gains less than 1/kMemoRatio escapes the verdict; it also gains little.
inline constexpr double kMemoRatio = 0.7;
inline constexpr double kMemoDominance = 0.9;
inline constexpr int kMemoMinSamples = 3;  // unpaired: on each side
// Paired: two per trial, 6 at the packs' three trials; one or two trials get no verdict.
inline constexpr int kMemoMinPairs = 5;
// ... and save at least this much per call (median). Calls of a few hundred nanoseconds carry harness
// effects of their own (on the host a 0.34 us call ran 0.13 us slower right after its inputs were
// rewritten: integrity_test, honest_specialised_4096 on a holdout shape), and on the GPU a cache's
// lookup (a hash kernel and a device-to-host copy) costs more than 2 us by itself.
inline constexpr double kMemoMinGainMs = 0.002;
// Host: the pairs of the round that confirms a suspicion (each never-seen set called right beside a
// reloaded repeat). All 8 must be faster on the repeat to reach kMemoDominance: 1 in 256 by chance.
inline constexpr int kMemoConfirmPairs = 8;
FreshRepeat fresh_versus_repeat(const std::vector<double>& fresh, const std::vector<double>& repeat);
// `pairs`: (first call ms, repeat ms) of each set: its first call, the median of its later calls.
FreshRepeat fresh_versus_repeat_paired(const std::vector<std::pair<double, double>>& pairs);

}  // namespace kda::eval
