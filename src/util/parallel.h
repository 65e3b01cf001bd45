// Splitting one large pass over memory (a copy, a scan, a comparison) over the host's cores. The
// evaluator reads back and checks outputs of up to hundreds of MB after every checked call; one
// core moves 5-10 GB/s, the H200's host has 16.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace kda::util {

// [begin, end) ranges covering [0, n): at most one per hardware thread, each at least
// `min_per_part` long (so small inputs stay one range) and, except the last, a multiple of `align`.
std::vector<std::pair<uint64_t, uint64_t>> split_ranges(uint64_t n, uint64_t min_per_part, uint64_t align = 1);

// Runs fn(index, begin, end) for every range, the first on the calling thread and the others on
// threads of their own (where no more threads can be created, on the calling thread too), and
// returns when all are done.
void run_ranges(const std::vector<std::pair<uint64_t, uint64_t>>& ranges,
                const std::function<void(size_t index, uint64_t begin, uint64_t end)>& fn);

}  // namespace kda::util
