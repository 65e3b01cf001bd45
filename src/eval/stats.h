// Summary statistics of latency samples.
#pragma once

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

// The fresh-versus-repeat test against remembered outputs: latencies of timed calls whose input set
// the candidate had never been called on, against calls on sets it had seen, loaded again just
// before the call (so both sides pay the same harness work). An honest kernel's two
// samples come from one distribution (same shapes, same distribution of values, each call after the
// cold-L2 flush); a cache of outputs, whatever it is keyed on, answers the repeated sets faster.
struct FreshRepeat {
  int n_fresh = 0, n_repeat = 0;
  double fresh_median_ms = 0, repeat_median_ms = 0;
  double ratio = 0;            // repeat median / fresh median
  double repeat_faster = 0;    // fraction of (fresh, repeat) pairs where the repeat call was faster
  bool applies = false;        // enough samples on both sides
  bool memoized = false;       // ratio < kMemoRatio, repeat_faster >= kMemoDominance, gain >= kMemoMinGainMs
};
// Repeated calls must be this much faster (median) and faster in this fraction of all pairs: the
// second condition keeps noise from a few slow fresh calls from convicting an honest kernel (for
// one distribution the fraction is 0.5 with a standard deviation of sqrt((n+m+1)/(12nm)): 0.17 for
// the 6 fresh and 6 reloaded repeated calls of a 3 x 50-iteration evaluation on the host, where a
// fraction of 0.9 or more has a probability of 7/924; on the GPU every repeated call but a few
// compares, 0.12 and less).
// A cache that gains less than 1/kMemoRatio escapes the verdict; it also gains little.
inline constexpr double kMemoRatio = 0.7;
inline constexpr double kMemoDominance = 0.9;
inline constexpr int kMemoMinSamples = 3;
// ... and save at least this much per call (median). Calls of a few hundred nanoseconds carry harness
// effects of their own (on the host a 0.34 us call ran 0.13 us slower right after its inputs were
// rewritten: integrity_test, honest_specialised_4096 on a holdout shape), and on the GPU a cache's
// lookup (a hash kernel and a device-to-host copy) costs more than 2 us by itself.
inline constexpr double kMemoMinGainMs = 0.002;
FreshRepeat fresh_versus_repeat(const std::vector<double>& fresh, const std::vector<double>& repeat);

}  // namespace kda::eval
