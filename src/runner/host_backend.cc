// Host backend: the candidate reads and writes the shared arena directly; calls are timed with the
// monotonic clock on a cold cache: on x86-64 every line of the arena (inputs, outputs, guards) is
// evicted from all cache levels with clflush, which costs time in proportion to the workload's own
// bytes; elsewhere the last-level cache is flushed by writing twice its size.
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>

#include <dlpack/dlpack.h>

#include "runner/backend.h"

namespace kda::runner {

namespace {

#if !defined(__x86_64__)
constexpr size_t kMaxUsefulLlcBytes = size_t{32} << 20;

size_t last_level_cache_bytes() {
  long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0) return static_cast<size_t>(l3);
  // sysfs fallback: the largest cache index of cpu0.
  size_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    std::string s;
    if (!(f >> s) || s.empty()) continue;
    size_t v = std::stoul(s);
    if (s.back() == 'K') v <<= 10;
    if (s.back() == 'M') v <<= 20;
    best = std::max(best, v);
  }
  return best > 0 ? best : size_t{32} << 20;
}
#endif

class HostBackend final : public Backend {
 public:
  Status init() override {
    // Virtual machines often report the whole package's L3 (hundreds of MB on EPYC) while a core
    // reaches only its complex's slice (32 MB on Zen): 2x a capped size evicts what one core can
    // hold without spending most of the evaluation writing the flush buffer.
#if !defined(__x86_64__)
    flush_.resize(2 * std::min<size_t>(last_level_cache_bytes(), kMaxUsefulLlcBytes));
#endif
    return {};
  }
  std::vector<std::filesystem::path> sandbox_devices() const override { return {}; }
  const char* python_device() const override { return "cpu"; }
  nlohmann::json environment() const override {
    const std::string cpu = cpu_model_name();
    return {{"hardware", cpu.empty() ? std::string("host CPU") : cpu + " (host CPU)"}};
  }

  Status set_layout(const eval::ArenaLayout& layout, eval::SharedArena& arena) override {
    arena_ = arena.data();
    arena_bytes_ = layout.size;  // the arena may be larger than the layout: only this much is flushed
    describe_tensors(layout, [&arena](const eval::Slot& s) {
      return std::pair<void*, DLDevice>{arena.data() + s.offset, DLDevice{kDLCPU, 0}};
    });
    return bind_python();
  }

  CallReply call(const CallRequest& req) override {
    CallReply r;
    if (req.graph != CallRequest::Graph::kNone) {
      r.error = "CUDA graph capture needs the CUDA backend";
      return r;
    }
    const auto t_enter = std::chrono::steady_clock::now();
    if (req.flush) flush();
    auto t0 = std::chrono::steady_clock::now();
    r.ok = call_entry(nullptr, &r.rc, &r.error);
    auto t1 = std::chrono::steady_clock::now();
    r.elapsed_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    r.extra["pre_ns"] = std::chrono::duration_cast<std::chrono::nanoseconds>(t0 - t_enter).count();  // the cache flush
    return r;
  }

 private:
  void flush() {
#if defined(__x86_64__)
    // clflush writes back dirty lines and invalidates them everywhere in the coherence domain.
    for (size_t i = 0; i < arena_bytes_; i += 64) _mm_clflush(arena_ + i);
    _mm_mfence();
#else
    // Write (not just read) so that dirty lines of the previous call are evicted too.
    ++flush_epoch_;
    for (size_t i = 0; i < flush_.size(); i += 64) flush_[i] = static_cast<char>(flush_epoch_ + i);
#endif
  }

  std::byte* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  std::vector<char> flush_;
  unsigned flush_epoch_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<HostBackend>(); }

}  // namespace kda::runner
