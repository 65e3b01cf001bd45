#include "eval/arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <bit>
#include <cstring>

#include <nlohmann/json.hpp>

#include "tensor/float_convert.h"
#include "util/parallel.h"

namespace kda::eval {

namespace {

constexpr uint64_t kAlign = 64;
// Reading back and scanning outputs: at least this much per thread (smaller outputs stay on one).
constexpr uint64_t kParallelBytes = uint64_t{4} << 20;
uint64_t align_up(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// splitmix64: a tiny, well-distributed generator for guard and poison patterns (not for inputs).
uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void fill_pattern(std::byte* p, size_t n, uint64_t seed) {
  uint64_t s = seed;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = splitmix(s);
    std::memcpy(p + i, &v, 8);
  }
  uint64_t v = splitmix(s);
  std::memcpy(p + i, &v, n - i);
}

bool matches_pattern(const std::byte* p, size_t n, uint64_t seed) {
  std::byte expect[kGuardBytes];
  fill_pattern(expect, n, seed);
  return std::memcmp(p, expect, n) == 0;
}

uint64_t slot_seed(uint64_t seed, size_t index, int side) { return seed * 1000003u + index * 2 + side; }

nlohmann::json slot_json(const Slot& s) {
  return {{"name", s.name},     {"dtype", std::string(tensor::dtype_name(s.dtype))},
          {"shape", s.shape},   {"scalar", s.scalar},
          {"offset", s.offset}, {"nbytes", s.nbytes}};
}

Result<Slot> slot_from_json(const nlohmann::json& j) {
  Slot s;
  try {
    s.name = j.at("name").get<std::string>();
    auto dt = tensor::dtype_from_name(j.at("dtype").get<std::string>());
    if (!dt) return Status::bad_input("layout: unknown dtype");
    s.dtype = *dt;
    s.shape = j.at("shape").get<std::vector<int64_t>>();
    s.scalar = j.at("scalar").get<bool>();
    s.offset = j.at("offset").get<uint64_t>();
    s.nbytes = j.at("nbytes").get<uint64_t>();
  } catch (const std::exception& e) {
    return Status::bad_input(std::string("layout: ") + e.what());
  }
  return s;
}

}  // namespace

nlohmann::json ArenaLayout::to_json() const {
  nlohmann::json j{{"size", size}, {"inputs", nlohmann::json::array()}, {"outputs", nlohmann::json::array()}};
  for (const auto& s : inputs) j["inputs"].push_back(slot_json(s));
  for (const auto& s : outputs) j["outputs"].push_back(slot_json(s));
  return j;
}

Result<ArenaLayout> ArenaLayout::from_json(const nlohmann::json& j) {
  ArenaLayout l;
  if (!j.is_object() || !j.contains("inputs") || !j.contains("outputs") || !j.contains("size"))
    return Status::bad_input("layout: missing fields");
  l.size = j["size"].get<uint64_t>();
  for (const auto& s : j["inputs"]) {
    KDA_ASSIGN_OR_RETURN(Slot slot, slot_from_json(s));
    l.inputs.push_back(std::move(slot));
  }
  for (const auto& s : j["outputs"]) {
    KDA_ASSIGN_OR_RETURN(Slot slot, slot_from_json(s));
    l.outputs.push_back(std::move(slot));
  }
  for (const auto* group : {&l.inputs, &l.outputs})
    for (const auto& s : *group)
      if (s.offset < kGuardBytes || s.offset + s.nbytes + kGuardBytes > l.size)
        return Status::bad_input("layout: slot " + s.name + " outside the arena");
  return l;
}

ArenaLayout plan_layout(const std::vector<Slot>& inputs, const std::vector<Slot>& outputs) {
  ArenaLayout l;
  // [guard][slot][guard] ... : each slot's guard bands are its own, never shared with a neighbour.
  uint64_t at = 0;
  auto place = [&at](Slot s) {
    s.offset = align_up(at + kGuardBytes);
    at = s.offset + s.nbytes + kGuardBytes;
    return s;
  };
  for (const auto& s : inputs) l.inputs.push_back(place(s));
  for (const auto& s : outputs) l.outputs.push_back(place(s));
  l.size = align_up(at);
  return l;
}

SharedArena::~SharedArena() {
  if (base_ != nullptr) ::munmap(base_, size_);
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
}

SharedArena::SharedArena(SharedArena&& o) noexcept { *this = std::move(o); }

SharedArena& SharedArena::operator=(SharedArena&& o) noexcept {
  if (this != &o) {
    if (base_ != nullptr) ::munmap(base_, size_);
    if (owns_fd_ && fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    owns_fd_ = o.owns_fd_;
    base_ = o.base_;
    size_ = o.size_;
    o.fd_ = -1;
    o.owns_fd_ = false;
    o.base_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

Result<SharedArena> SharedArena::create(uint64_t size, const std::string& name) {
  int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) return Status::io(std::string("memfd_create: ") + std::strerror(errno));
  SharedArena a;
  a.fd_ = fd;
  a.owns_fd_ = true;
  KDA_RETURN_IF_ERROR(a.resize(size));
  return a;
}

Result<SharedArena> SharedArena::map_fd(int fd, uint64_t size) {
  SharedArena a;
  a.fd_ = fd;
  a.owns_fd_ = false;
  if (size == 0) return a;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Status::io(std::string("mmap arena: ") + std::strerror(errno));
  a.base_ = static_cast<std::byte*>(p);
  a.size_ = size;
  return a;
}

Status SharedArena::resize(uint64_t size) {
  if (base_ != nullptr) ::munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0)
    return Status::io(std::string("arena ftruncate: ") + std::strerror(errno));
  if (size == 0) return {};
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) return Status::io(std::string("mmap arena: ") + std::strerror(errno));
  base_ = static_cast<std::byte*>(p);
  size_ = size;
  return {};
}

void SharedArena::write(const Slot& slot, const tensor::Tensor& t) {
  std::memcpy(base_ + slot.offset, t.data(), std::min<uint64_t>(slot.nbytes, static_cast<uint64_t>(t.nbytes())));
}

tensor::Tensor SharedArena::read(const Slot& slot) const {
  tensor::Tensor t(slot.dtype, slot.shape, tensor::kUninitialized);
  const uint64_t n = std::min<uint64_t>(slot.nbytes, static_cast<uint64_t>(t.nbytes()));
  util::run_ranges(util::split_ranges(n, kParallelBytes, 4096), [&](size_t, uint64_t begin, uint64_t end) {
    std::memcpy(t.data() + begin, base_ + slot.offset + begin, end - begin);
  });
  if (n < static_cast<uint64_t>(t.nbytes())) std::memset(t.data() + n, 0, static_cast<size_t>(t.nbytes()) - n);
  return t;
}

void SharedArena::fill_guards(const ArenaLayout& layout, uint64_t seed) {
  size_t i = 0;
  for (const auto* group : {&layout.inputs, &layout.outputs}) {
    for (const auto& s : *group) {
      fill_pattern(base_ + s.offset - kGuardBytes, kGuardBytes, slot_seed(seed, i, 0));
      fill_pattern(base_ + s.offset + s.nbytes, kGuardBytes, slot_seed(seed, i, 1));
      ++i;
    }
  }
}

std::vector<std::string> SharedArena::damaged_guards(const ArenaLayout& layout, uint64_t seed) const {
  std::vector<std::string> bad;
  size_t i = 0;
  for (const auto* group : {&layout.inputs, &layout.outputs}) {
    for (const auto& s : *group) {
      bool before = matches_pattern(base_ + s.offset - kGuardBytes, kGuardBytes, slot_seed(seed, i, 0));
      bool after = matches_pattern(base_ + s.offset + s.nbytes, kGuardBytes, slot_seed(seed, i, 1));
      if (!before || !after) bad.push_back(s.name + (before ? " (after the end)" : " (before the start)"));
      ++i;
    }
  }
  return bad;
}

void poison_block(tensor::DType dtype, uint64_t seed, std::byte (&block)[kPoisonBlockBytes]) {
  // One block is drawn from the seed and tiled over the slot: the values are as unpredictable to the
  // candidate as a per-element stream, and poisoning a 64 MB output costs a memcpy instead of 32
  // million generator steps (it happens before every call).
  std::byte* p = block;
  uint64_t s = seed;
  using tensor::DType;
  switch (dtype) {
    case DType::kFloat32:
      for (size_t i = 0; i < kPoisonBlockBytes; i += 4) {
        uint32_t v = 0x7FC00000u | static_cast<uint32_t>(splitmix(s) & 0x3FFFFFu) | 1u;
        std::memcpy(p + i, &v, 4);
      }
      break;
    case DType::kFloat16:
      for (size_t i = 0; i < kPoisonBlockBytes; i += 2) {
        uint16_t v = static_cast<uint16_t>(0x7E00u | (splitmix(s) & 0x1FFu) | 1u);
        std::memcpy(p + i, &v, 2);
      }
      break;
    case DType::kBFloat16:
      for (size_t i = 0; i < kPoisonBlockBytes; i += 2) {
        uint16_t v = static_cast<uint16_t>(0x7FC0u | (splitmix(s) & 0x3Fu) | 1u);
        std::memcpy(p + i, &v, 2);
      }
      break;
    case DType::kFloat8E4M3FN:
      std::memset(p, 0x7F, kPoisonBlockBytes);  // e4m3fn's only NaN encodings are 0x7F / 0xFF
      break;
    case DType::kFloat8E5M2:
      std::memset(p, 0x7F, kPoisonBlockBytes);  // a NaN in e5m2
      break;
    default:
      // Integers (and fp4, which has no NaN): random canaries; a skipped element keeps a value the
      // reference almost surely does not produce.
      fill_pattern(p, kPoisonBlockBytes, seed ^ 0xA5A5A5A5u);
      break;
  }
}

namespace {

void tile(std::byte* out, uint64_t nbytes, const std::byte (&block)[kPoisonBlockBytes]) {
  for (uint64_t at = 0; at < nbytes; at += kPoisonBlockBytes)
    std::memcpy(out + at, block, std::min<uint64_t>(kPoisonBlockBytes, nbytes - at));
}

}  // namespace

namespace {

// Elements of `b` equal to those of `a`, Word by Word. Below 8 bytes a word, 8 bytes at a time:
// v = x ^ y has an all-zero lane exactly where the element is equal, and ~(((v & low) + low) | v | low)
// (low: every lane's bits but its top one) sets a lane's top bit exactly when the lane is zero,
// with no carry between lanes, so a popcount counts the equal elements.
template <typename Word>
int64_t count_equal_words(const std::byte* a, const std::byte* b, int64_t n) {
  int64_t same = 0, i = 0;
  if constexpr (sizeof(Word) < 8) {
    constexpr uint64_t kLow = sizeof(Word) == 1   ? 0x7F7F7F7F7F7F7F7FULL
                              : sizeof(Word) == 2 ? 0x7FFF7FFF7FFF7FFFULL
                                                  : 0x7FFFFFFF7FFFFFFFULL;
    constexpr int64_t kLanes = 8 / sizeof(Word);
    for (; i + kLanes <= n; i += kLanes) {
      uint64_t x, y;
      std::memcpy(&x, a + i * sizeof(Word), 8);
      std::memcpy(&y, b + i * sizeof(Word), 8);
      const uint64_t v = x ^ y;
      same += std::popcount(~(((v & kLow) + kLow) | v | kLow));
    }
  }
  for (; i < n; ++i) {
    Word x, y;
    std::memcpy(&x, a + i * sizeof(Word), sizeof(Word));
    std::memcpy(&y, b + i * sizeof(Word), sizeof(Word));
    same += x == y;
  }
  return same;
}

}  // namespace

int64_t count_poisoned(tensor::DType dtype, uint64_t seed, const std::byte* data, uint64_t nbytes) {
  using tensor::DType;
  alignas(8) std::byte block[kPoisonBlockBytes];
  poison_block(dtype, seed, block);
  // Over the host's cores for large outputs, in whole poison blocks.
  auto count = [&](auto word) {
    using Word = decltype(word);
    const auto ranges = util::split_ranges(nbytes, kParallelBytes, kPoisonBlockBytes);
    std::vector<int64_t> same(ranges.size(), 0);
    util::run_ranges(ranges, [&](size_t k, uint64_t begin, uint64_t end) {
      for (uint64_t at = begin; at < end; at += kPoisonBlockBytes) {
        const uint64_t chunk = std::min<uint64_t>(kPoisonBlockBytes, end - at);
        same[k] += count_equal_words<Word>(block, data + at, static_cast<int64_t>(chunk / sizeof(Word)));
      }
    });
    int64_t total = 0;
    for (int64_t s : same) total += s;
    return total;
  };
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32: return count(uint32_t{});
    case DType::kFloat16:
    case DType::kBFloat16: return count(uint16_t{});
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2: return count(uint8_t{});
    case DType::kInt64: return count(uint64_t{});
    default: return 0;
  }
}

tensor::Tensor poison_tensor(const Slot& slot, uint64_t seed) {
  tensor::Tensor t(slot.dtype, slot.shape);
  alignas(8) std::byte block[kPoisonBlockBytes];
  poison_block(slot.dtype, seed, block);
  tile(static_cast<std::byte*>(t.data()), std::min<uint64_t>(slot.nbytes, static_cast<uint64_t>(t.nbytes())), block);
  return t;
}

void SharedArena::poison(const Slot& slot, uint64_t seed) {
  alignas(8) std::byte block[kPoisonBlockBytes];
  poison_block(slot.dtype, seed, block);
  tile(base_ + slot.offset, slot.nbytes, block);
}

bool SharedArena::equals(const Slot& slot, const tensor::Tensor& t) const {
  if (static_cast<uint64_t>(t.nbytes()) != slot.nbytes) return false;
  return std::memcmp(base_ + slot.offset, t.data(), slot.nbytes) == 0;
}

}  // namespace kda::eval
