// SharedArena: harness-owned tensor memory shared with a runner process through a memfd.
//
// The evaluator allocates every input and output, fills inputs, poisons outputs and surrounds each
// slot with random guard bands. The runner maps the same memfd; on the host backend the candidate
// reads and writes the arena directly, so the evaluator reads outputs, checks guard bands and
// re-hashes inputs itself — nothing the candidate reports about its own buffers is trusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tensor/dtype.h"
#include "tensor/tensor.h"
#include "util/status.h"

namespace kda::eval {

inline constexpr size_t kGuardBytes = 4096;        // guard band before and after every slot
inline constexpr size_t kPoisonBlockBytes = 4096;  // poison: one seeded block, tiled (a multiple of every element size)

struct Slot {
  std::string name;
  tensor::DType dtype = tensor::DType::kFloat32;
  std::vector<int64_t> shape;  // empty for a 0-d scalar
  bool scalar = false;         // a definition scalar (shape null): passed as a 0-d host tensor
  uint64_t offset = 0;         // of the data (guard bands lie just before and after)
  uint64_t nbytes = 0;
};

struct ArenaLayout {
  std::vector<Slot> inputs;
  std::vector<Slot> outputs;
  uint64_t size = 0;
  nlohmann::json to_json() const;
  static Result<ArenaLayout> from_json(const nlohmann::json& j);
};

// Lays out slots (64-byte aligned, guard bands between) for the given inputs and outputs.
ArenaLayout plan_layout(const std::vector<Slot>& inputs, const std::vector<Slot>& outputs);

// The poison block of `seed` for `dtype`: quiet NaNs with random payloads for float types (0x7F for
// fp8, which has no payload bits), random canaries for integers and fp4. A slot is poisoned by tiling
// it, on the host (SharedArena::poison) or on the device (the CUDA runner, from the same block).
void poison_block(tensor::DType dtype, uint64_t seed, std::byte (&block)[kPoisonBlockBytes]);
// How many elements of `data` (nbytes of a `dtype` slot) still hold the poison of `seed`: compared
// with the seeded block directly, 8 bytes at a time, no poisoned copy made. Counted for float32/16,
// bfloat16, fp8 and 32/64-bit integers, whose poison an honest kernel does not produce by chance
// (NaN payloads, random canaries); 0 for other dtypes.
int64_t count_poisoned(tensor::DType dtype, uint64_t seed, const std::byte* data, uint64_t nbytes);
// What a slot holds after poison(slot, seed) (device_inputs_test compares the device's poison with it).
tensor::Tensor poison_tensor(const Slot& slot, uint64_t seed);

class SharedArena {
 public:
  SharedArena() = default;
  ~SharedArena();
  SharedArena(SharedArena&& o) noexcept;
  SharedArena& operator=(SharedArena&& o) noexcept;
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  // Creates an anonymous memfd of `size` bytes mapped read-write.
  static Result<SharedArena> create(uint64_t size, const std::string& name);
  // Maps an existing memfd (the runner side).
  static Result<SharedArena> map_fd(int fd, uint64_t size);
  // Grows or shrinks the memfd and remaps (evaluator side, before sending a new layout).
  Status resize(uint64_t size);

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  std::byte* data() { return base_; }
  const std::byte* data() const { return base_; }

  void write(const Slot& slot, const tensor::Tensor& t);
  tensor::Tensor read(const Slot& slot) const;
  // Fills every guard band of the layout with bytes derived from `seed`.
  void fill_guards(const ArenaLayout& layout, uint64_t seed);
  // Names of slots whose guard bands no longer hold the pattern of `seed` (empty = intact).
  std::vector<std::string> damaged_guards(const ArenaLayout& layout, uint64_t seed) const;
  // Fills an output slot with a poison pattern: quiet NaNs with a payload for float types, random
  // canaries for integers; a result that leaves any element untouched is caught by the checker.
  void poison(const Slot& slot, uint64_t seed);
  // True when the slot's bytes equal `t`'s storage (the input-mutation check: a plain compare
  // against the evaluator's own copy, an order of magnitude cheaper than hashing both sides).
  bool equals(const Slot& slot, const tensor::Tensor& t) const;

 private:
  int fd_ = -1;
  bool owns_fd_ = false;
  std::byte* base_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace kda::eval
