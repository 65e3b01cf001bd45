// A cache of large tensor buffers. The evaluator allocates and frees the same few sizes over and
// over (outputs read back after every checked call, reference outputs, inputs of every trial); glibc
// returns blocks of 32 MiB and more to the kernel on free, so each new tensor of that size paid a page
// fault and the kernel's zeroing for every 4 KiB page before its first byte was written (about 2/3 of
// the cost of reading a 64 MiB output back on the H200's host). Blocks of kMinCachedBytes and more are
// kept here instead, up to kCacheLimitBytes in all (least recently freed dropped first), and handed to
// the next allocation of exactly the same size.
#pragma once

#include <cstddef>

namespace kda::tensor {

inline constexpr size_t kMinCachedBytes = size_t{1} << 20;
inline constexpr size_t kCacheLimitBytes = size_t{1} << 30;

// A kept block of exactly `bytes` (its contents are whatever its last owner left), or nullptr.
std::byte* take_cached_block(size_t bytes);
// Keeps `p` (`bytes` long, from std::aligned_alloc) for reuse, or frees it when it is too small or
// larger than the whole cache. Thread-safe, like take_cached_block.
void release_block(std::byte* p, size_t bytes);
// Bytes held by the cache now (for tests and benchmarks).
size_t cached_bytes();

}  // namespace kda::tensor
