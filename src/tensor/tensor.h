// Tensor: an owning, contiguous (row-major) host tensor with a 64-byte aligned buffer.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "tensor/dtype.h"

namespace kda::tensor {

inline constexpr size_t kTensorAlignment = 64;

// Elements in `shape`, or nullopt when a dimension is negative or the count times 64 (bits) overflows int64.
std::optional<int64_t> checked_numel(const std::vector<int64_t>& shape);

// "[2, 3, 4]"; "[]" for a scalar.
std::string shape_string(const std::vector<int64_t>& shape);

// Tag for a tensor whose bytes the caller overwrites at once (a copy of an output): no zero fill.
struct Uninitialized {};
inline constexpr Uninitialized kUninitialized{};

class Tensor {
 public:
  // An empty float32 tensor of shape [0].
  Tensor();
  // Zero-filled. `shape` must be valid (see checked_numel); a 0-d shape is a scalar with one element.
  Tensor(DType dtype, std::vector<int64_t> shape);
  // The same without the zero fill of the element bytes: every byte must be written before it is read.
  Tensor(DType dtype, std::vector<int64_t> shape, Uninitialized);

  Tensor(const Tensor& other);  // deep copy
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  ~Tensor() = default;

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const { return numel_; }
  // Storage bytes; float4_e2m1 packs two elements per byte, low nibble first (an odd count rounds up).
  int64_t nbytes() const { return nbytes_; }

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  std::span<std::byte> bytes() { return {data_.get(), static_cast<size_t>(nbytes_)}; }
  std::span<const std::byte> bytes() const { return {data_.get(), static_cast<size_t>(nbytes_)}; }

  // Typed views. T must have the element's storage size (uint16_t for float16/bfloat16, uint8_t for fp8 and
  // bool); float4_e2m1 has no typed view (use the raw-bits accessors).
  template <typename T>
  T* data_as() {
    assert(dtype_bits(dtype_) == static_cast<int>(8 * sizeof(T)));
    return reinterpret_cast<T*>(data_.get());
  }
  template <typename T>
  const T* data_as() const {
    assert(dtype_bits(dtype_) == static_cast<int>(8 * sizeof(T)));
    return reinterpret_cast<const T*>(data_.get());
  }
  template <typename T>
  std::span<T> span() {
    return {data_as<T>(), static_cast<size_t>(numel_)};
  }
  template <typename T>
  std::span<const T> span() const {
    return {data_as<T>(), static_cast<size_t>(numel_)};
  }

  // Element i (flat, row-major) as its raw storage bits, zero-extended (a float4 element is one nibble).
  uint64_t get_bits(int64_t i) const;
  void set_bits(int64_t i, uint64_t bits);

  // Element i as a double: exact for every dtype except int64 beyond 2^53. bool reads 0 or 1.
  double get_as_double(int64_t i) const;
  // Stores v into element i: floats round to nearest even (float_convert.h semantics: e4m3fn overflow -> NaN,
  // e2m1 saturates); integers round to nearest (ties to even) and saturate to the type's range, NaN -> 0;
  // bool stores v != 0 (NaN -> 1).
  void set_from_double(int64_t i, double v);

  // A DLPack view (kDLCPU, compact row-major: strides null, byte_offset 0). Valid while this tensor lives and is
  // not reshaped; the DLTensor's data pointer is writable even from a const tensor (the ABI has no const).
  DLTensor dl_view() const;

  // Byte-wise equality of dtype, shape and contents (a NaN equals the same NaN bits).
  bool bitwise_equal(const Tensor& other) const;

 private:
  struct FreeDeleter {
    size_t bytes;  // the allocation's size: large blocks go back to tensor/block_cache.h (no initialiser:
                   // inside the incomplete Tensor one makes the deleter not default-constructible)
    void operator()(std::byte* p) const;
  };
  DType dtype_ = DType::kFloat32;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  int64_t nbytes_ = 0;
  std::unique_ptr<std::byte[], FreeDeleter> data_;
};

}  // namespace kda::tensor
