// Test helpers for the contest generators (included by their _test.cc files only): the fresh-per-trial contract
// of generators.h, checked tensor by tensor.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>

#include "contest/generators.h"
#include "tensor/tensor.h"

namespace kda::contest::testing {

using Axes = std::map<std::string, int64_t>;
using Tensors = std::map<std::string, tensor::Tensor>;

inline Tensors run_generator(Generator gen, const Axes& axes, uint64_t workload_seed, uint64_t trial_seed) {
  Tensors out;
  const Status st = gen(axes, workload_seed, trial_seed, out);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

// Fraction of elements whose bits differ (same shape and dtype; 1.0 when they do not match).
inline double fraction_differing(const tensor::Tensor& a, const tensor::Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return 1.0;
  if (a.numel() == 0) return 0.0;
  int64_t differ = 0;
  for (int64_t i = 0; i < a.numel(); ++i) differ += a.get_bits(i) != b.get_bits(i);
  return static_cast<double>(differ) / static_cast<double>(a.numel());
}

// The contract, for one generator and axes: the same (workload seed, trial seed) gives the same tensors bit for
// bit; another trial seed (same workload seed) changes every tensor named in `min_changed` in at least that
// fraction of its elements (what stays equal is the structure the axes fix, e.g. cu_seqlens' ends, a block
// table's trailing page-0 slots); so does another workload seed with the same trial seed. `min_changed` must
// name every tensor the generator writes: all of them are fresh.
inline void expect_fresh_per_trial(Generator gen, const Axes& axes, const std::map<std::string, double>& min_changed) {
  const uint64_t kWorkload = 0x5eed0001, kTrials[] = {11, 12, 0xfedcba9876543210ull};
  const Tensors first = run_generator(gen, axes, kWorkload, kTrials[0]);
  ASSERT_EQ(first.size(), min_changed.size()) << "every generated tensor must be listed as fresh";
  const Tensors again = run_generator(gen, axes, kWorkload, kTrials[0]);
  for (const auto& [name, t] : first) {
    ASSERT_TRUE(min_changed.count(name)) << name << " is generated but not listed";
    ASSERT_TRUE(again.count(name)) << name;
    EXPECT_TRUE(t.bitwise_equal(again.at(name))) << name << ": same seeds must give the same bits";
  }
  for (uint64_t trial : {kTrials[1], kTrials[2]}) {
    const Tensors other = run_generator(gen, axes, kWorkload, trial);
    for (const auto& [name, want] : min_changed) {
      ASSERT_TRUE(other.count(name)) << name;
      const double changed = fraction_differing(first.at(name), other.at(name));
      EXPECT_GE(changed, want) << name << ": trial seed " << trial << " changed " << changed
                               << " of its elements (fixed per workload?)";
    }
  }
  const Tensors other_workload = run_generator(gen, axes, kWorkload + 1, kTrials[0]);
  for (const auto& [name, want] : min_changed)
    EXPECT_GE(fraction_differing(first.at(name), other_workload.at(name)), want) << name << " (workload seed)";
}

}  // namespace kda::contest::testing
