// Summary statistics of latency samples.
#pragma once

#include <utility>
#include <vector>

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

// The fresh-versus-repeat test against remembered outputs, on pairs: each never-seen input set is
// timed on its first call (fresh) and again on the next call, on the same inputs (repeat; on the
// host written into the arena again first, so both calls pay the same harness work). The same data
// means the same work, so an honest kernel's pair is the same up to noise even where the work
// depends on the values (MoE routing, DSA sequence lengths: an unpaired comparison of fresh draws
// with other draws put an honest MoE baseline at a ratio of 0.57, H200 run 29); a cache of outputs,
// whatever it is keyed on and however many entries it holds, answers the repeat from memory.
struct FreshRepeat {
  int n_fresh = 0, n_repeat = 0;  // pairs: the same count on both sides
  double fresh_median_ms = 0, repeat_median_ms = 0;
  double ratio = 0;            // median over pairs of repeat / fresh
  double repeat_faster = 0;    // fraction of pairs whose repeat was faster (ties count half)
  bool applies = false;        // enough pairs
  bool memoized = false;       // ratio < kMemoRatio, repeat_faster >= kMemoDominance, gain >= kMemoMinGainMs
};
// Repeats must be this much faster (median pair ratio) and faster in this fraction of the pairs: the
// second condition keeps a few noisy pairs from convicting an honest kernel (for one distribution
// each pair is a coin flip: 6 pairs all faster by chance has probability 1/64, and the ratio and gain
// conditions come on top).
// A cache that gains less than 1/kMemoRatio escapes the verdict; it also gains little.
inline constexpr double kMemoRatio = 0.7;
inline constexpr double kMemoDominance = 0.9;
inline constexpr int kMemoMinSamples = 3;
// ... and save at least this much per call (median). Calls of a few hundred nanoseconds carry harness
// effects of their own (on the host a 0.34 us call ran 0.13 us slower right after its inputs were
// rewritten: integrity_test, honest_specialised_4096 on a holdout shape), and on the GPU a cache's
// lookup (a hash kernel and a device-to-host copy) costs more than 2 us by itself.
inline constexpr double kMemoMinGainMs = 0.002;
// `pairs`: (fresh ms, repeat ms) of each never-seen set.
FreshRepeat fresh_versus_repeat(const std::vector<std::pair<double, double>>& pairs);

}  // namespace kda::eval
