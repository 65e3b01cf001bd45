#include "tensor/block_cache.h"

#include <cstdlib>
#include <deque>
#include <mutex>
#include <utility>

namespace kda::tensor {

namespace {

struct Cache {
  std::mutex mu;
  std::deque<std::pair<std::byte*, size_t>> blocks;  // oldest first
  size_t total = 0;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: tensors may be freed during static destruction
  return *c;
}

}  // namespace

std::byte* take_cached_block(size_t bytes) {
  if (bytes < kMinCachedBytes) return nullptr;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto it = c.blocks.rbegin(); it != c.blocks.rend(); ++it) {
    if (it->second != bytes) continue;
    std::byte* p = it->first;
    c.total -= bytes;
    c.blocks.erase(std::next(it).base());
    return p;
  }
  return nullptr;
}

void release_block(std::byte* p, size_t bytes) {
  if (p == nullptr) return;
  if (bytes < kMinCachedBytes || bytes > kCacheLimitBytes) {
    std::free(p);
    return;
  }
  Cache& c = cache();
  std::deque<std::pair<std::byte*, size_t>> evicted;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    while (!c.blocks.empty() && c.total + bytes > kCacheLimitBytes) {
      c.total -= c.blocks.front().second;
      evicted.push_back(c.blocks.front());
      c.blocks.pop_front();
    }
    c.blocks.emplace_back(p, bytes);
    c.total += bytes;
  }
  for (auto& [q, n] : evicted) std::free(q);  // outside the lock: returning memory to the kernel is slow
}

size_t cached_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.total;
}

}  // namespace kda::tensor
