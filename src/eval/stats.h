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

}  // namespace kda::eval
