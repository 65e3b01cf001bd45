// A seeded random source whose values are specified exactly on every platform: std::mt19937_64's raw output
// (fixed by the standard) turned into integers and doubles by explicit arithmetic, not by std distributions
// (whose algorithms are implementation-defined). Shared by the contest generators.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>

#include "util/parallel.h"

namespace kda::contest {

class SeededRng {
 public:
  // `stream` separates independent uses of one seed (e.g. block tables vs. cache contents).
  SeededRng(uint64_t seed, uint64_t stream) : engine_(mix(seed ^ mix(stream + 0x9E3779B97F4A7C15ull))) {}
  // `part` splits one stream into independent pieces (one per chunk of a tensor, one per state) that can be
  // drawn on different threads: the values depend on (seed, stream, part), never on the thread count.
  SeededRng(uint64_t seed, uint64_t stream, uint64_t part)
      : engine_(mix(seed ^ mix(stream + 0x9E3779B97F4A7C15ull) ^ mix(mix(part + 0xD1B54A32D192ED03ull)))) {}

  // One seed from two: the workload's public seed and the trial's secret one (every value drawn from the result
  // is as unpredictable as the trial seed).
  static uint64_t combine(uint64_t workload_seed, uint64_t trial_seed) {
    return mix(trial_seed ^ mix(workload_seed + 0x632BE59BD9B4E019ull));
  }

  uint64_t next_u64() { return engine_(); }
  // Uniform in [0, n) for n >= 1 (multiply-high; bias below 2^-40 for the n used here).
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(engine_()) * n) >> 64); }
  // Uniform in [lo, hi] (inclusive), lo <= hi.
  int64_t between(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
  }
  // Uniform in (0, 1]: 53 random bits.
  double unit_open0() { return static_cast<double>((engine_() >> 11) + 1) * 0x1.0p-53; }
  // Standard normal by Box-Muller (two per draw; libm log/sqrt/cos/sin, correctly rounded or within an ulp on
  // glibc, so a value rounded to a narrow format matches across machines except in vanishingly rare ties).
  double normal() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(unit_open0()));
    const double a = 6.283185307179586 * unit_open0();
    spare_ = r * std::sin(a);
    have_spare_ = true;
    return r * std::cos(a);
  }

 private:
  static constexpr uint64_t mix(uint64_t x) {  // splitmix64 finaliser
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }
  std::mt19937_64 engine_;
  double spare_ = 0.0;
  bool have_spare_ = false;
};

// Runs fn(part) for every part in [0, parts) over the host's cores (parts split into contiguous ranges, at least
// `min_parts_per_thread` per thread so that small inputs stay on the calling thread). Each part must draw from its
// own SeededRng(seed, stream, part) and write only its own output: the result is then the same for any thread
// count. Generation runs once per (workload, input set) on the evaluator's host, so large inputs use every core.
inline void for_each_part(int64_t parts, int64_t min_parts_per_thread, const std::function<void(int64_t part)>& fn) {
  if (parts <= 0) return;
  util::run_ranges(util::split_ranges(static_cast<uint64_t>(parts), static_cast<uint64_t>(min_parts_per_thread)),
                   [&](size_t, uint64_t begin, uint64_t end) {
                     for (uint64_t p = begin; p < end; ++p) fn(static_cast<int64_t>(p));
                   });
}

}  // namespace kda::contest
