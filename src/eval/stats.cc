#include "eval/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include <fmt/format.h>

#include "build/ptxas.h"

namespace kda::eval {

double quantile_sorted(const std::vector<double>& s, double q) {
  if (s.empty()) return 0;
  double pos = q * static_cast<double>(s.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, s.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return s[lo] + (s[hi] - s[lo]) * frac;
}

nlohmann::json kernel_medians(const std::map<std::string, std::vector<double>>& ms_by_name) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, ms] : ms_by_name)
    if (!ms.empty()) out[name] = {{"median_ms", summarize(ms).median}, {"calls", ms.size()}};
  return out;
}

std::string kernel_label(const std::string& mangled) {
  std::string d = build::demangle(mangled);
  for (size_t at; (at = d.find("(anonymous namespace)::")) != std::string::npos;) d.erase(at, 23);
  // Cut at the parameter list (the first '(' outside template brackets), then keep what follows the last
  // "::" or ' ' outside them (namespaces, a return type).
  int depth = 0;
  size_t end = d.size(), begin = 0;
  for (size_t i = 0; i < d.size(); ++i) {
    const char c = d[i];
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (depth != 0) continue;
    if (c == '(' && i > 0) {
      end = i;
      break;
    }
    if (c == ' ') begin = i + 1;
    if (c == ':' && i + 1 < d.size() && d[i + 1] == ':') begin = i + 2;
  }
  return begin < end ? d.substr(begin, end - begin) : d;
}

std::string kernel_breakdown(const nlohmann::json& by_name) {
  if (!by_name.is_object() || by_name.size() < 2) return "";
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [name, v] : by_name.items()) rows.emplace_back(v.value("median_ms", 0.0), kernel_label(name));
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out;
  for (const auto& [ms, label] : rows) out += (out.empty() ? "" : ", ") + label + fmt::format(" {:.4f}", ms);
  return out + " ms";
}

std::string idle_note(double idle_ms, double latency_ms) {
  if (!(latency_ms > 0) || !(idle_ms >= kIdleNoteShare * latency_ms)) return "";
  return fmt::format("{:.4f} ms idle between launches ({:.0f} % of the span)", idle_ms, 100 * idle_ms / latency_ms);
}

SampleStats summarize(std::vector<double> v) {
  SampleStats st;
  st.n = static_cast<int>(v.size());
  if (v.empty()) return st;
  std::sort(v.begin(), v.end());
  st.min = v.front();
  st.max = v.back();
  st.median = quantile_sorted(v, 0.5);
  st.p10 = quantile_sorted(v, 0.1);
  st.p90 = quantile_sorted(v, 0.9);
  st.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - st.mean) * (x - st.mean);
  st.stddev = v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0;
  st.cv = st.mean > 0 ? st.stddev / st.mean : 0;
  return st;
}

double arithmetic_mean(const std::vector<double>& xs) {
  if (xs.empty()) return 0;
  return std::accumulate(xs.begin(), xs.end(), 0.0) / static_cast<double>(xs.size());
}

double geometric_mean(const std::vector<double>& xs) {
  if (xs.empty()) return 0;
  double s = 0;
  for (double x : xs) {
    if (!(x > 0)) return 0;
    s += std::log(x);
  }
  return std::exp(s / static_cast<double>(xs.size()));
}

double student_t95(int df) {
  static constexpr double kT[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                  2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                  2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) return 0;
  return df <= 30 ? kT[df - 1] : 1.96;
}

std::optional<Interval> mean_ci95(const std::vector<double>& xs) {
  if (xs.size() < 2) return std::nullopt;
  const double mean = arithmetic_mean(xs);
  double ss = 0;
  for (double x : xs) ss += (x - mean) * (x - mean);
  const double n = static_cast<double>(xs.size());
  const double half = student_t95(static_cast<int>(xs.size()) - 1) * std::sqrt(ss / (n - 1)) / std::sqrt(n);
  return Interval{mean - half, mean + half};
}

std::optional<RatioEstimate> ratio_ci95(const std::vector<double>& ratios) {
  std::vector<double> logs;
  for (double r : ratios) {
    if (!(r > 0)) return std::nullopt;
    logs.push_back(std::log(r));
  }
  auto ci = mean_ci95(logs);
  if (!ci) return std::nullopt;
  return RatioEstimate{std::exp(arithmetic_mean(logs)), Interval{std::exp(ci->low), std::exp(ci->high)}};
}

std::optional<Interval> geomean_speedup_ci(const std::vector<std::vector<double>>& candidate_trials,
                                           const std::vector<std::vector<double>>& baseline_trials, double geomean) {
  if (candidate_trials.empty() || candidate_trials.size() != baseline_trials.size() || !(geomean > 0))
    return std::nullopt;
  size_t trials = SIZE_MAX;
  for (size_t i = 0; i < candidate_trials.size(); ++i)
    trials = std::min({trials, candidate_trials[i].size(), baseline_trials[i].size()});
  if (trials < 2) return std::nullopt;
  std::vector<double> log_g(trials, 0.0);
  for (size_t t = 0; t < trials; ++t) {
    for (size_t i = 0; i < candidate_trials.size(); ++i) {
      const double c = candidate_trials[i][t], b = baseline_trials[i][t];
      if (!(c > 0) || !(b > 0)) return std::nullopt;
      log_g[t] += std::log(b / c);
    }
    log_g[t] /= static_cast<double>(candidate_trials.size());
  }
  const Interval log_ci = *mean_ci95(log_g);  // trials >= 2
  const double half = (log_ci.high - log_ci.low) / 2;
  return Interval{geomean * std::exp(-half), geomean * std::exp(half)};
}

FreshRepeat fresh_versus_repeat(const std::vector<double>& fresh, const std::vector<double>& repeat) {
  FreshRepeat r;
  r.n_fresh = static_cast<int>(fresh.size());
  r.n_repeat = static_cast<int>(repeat.size());
  r.applies = r.n_fresh >= kMemoMinSamples && r.n_repeat >= kMemoMinSamples;
  if (!r.applies) return r;
  r.fresh_median_ms = summarize(fresh).median;
  r.repeat_median_ms = summarize(repeat).median;
  r.ratio = r.fresh_median_ms > 0 ? r.repeat_median_ms / r.fresh_median_ms : 1.0;
  // Pairs counted by merging the sorted samples: for each fresh value, the repeats strictly below it
  // (ties count half), O((n + m) log(n + m)).
  std::vector<double> rs = repeat;
  std::sort(rs.begin(), rs.end());
  double faster = 0;
  for (double f : fresh) {
    const auto lo = std::lower_bound(rs.begin(), rs.end(), f);
    const auto hi = std::upper_bound(lo, rs.end(), f);
    faster += static_cast<double>(lo - rs.begin()) + 0.5 * static_cast<double>(hi - lo);
  }
  r.repeat_faster = faster / (static_cast<double>(r.n_fresh) * static_cast<double>(r.n_repeat));
  r.memoized = r.ratio < kMemoRatio && r.repeat_faster >= kMemoDominance &&
               r.fresh_median_ms - r.repeat_median_ms >= kMemoMinGainMs;
  return r;
}

FreshRepeat fresh_versus_repeat_paired(const std::vector<std::pair<double, double>>& pairs) {
  FreshRepeat r;
  r.n_fresh = r.n_repeat = static_cast<int>(pairs.size());
  r.applies = r.n_fresh >= kMemoMinPairs;
  if (!r.applies) return r;
  std::vector<double> fresh, repeat, ratios, gains;
  double faster = 0;
  for (const auto& [f, p] : pairs) {
    fresh.push_back(f);
    repeat.push_back(p);
    ratios.push_back(f > 0 ? p / f : 1.0);
    gains.push_back(f - p);
    faster += p < f ? 1.0 : p == f ? 0.5 : 0.0;
  }
  r.fresh_median_ms = summarize(fresh).median;
  r.repeat_median_ms = summarize(repeat).median;
  r.ratio = summarize(ratios).median;
  r.repeat_faster = faster / static_cast<double>(pairs.size());
  r.memoized = r.ratio < kMemoRatio && r.repeat_faster >= kMemoDominance && summarize(gains).median >= kMemoMinGainMs;
  return r;
}

}  // namespace kda::eval
