#include "tensor/tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "tensor/block_cache.h"
#include "tensor/float_convert.h"

namespace kda::tensor {

namespace {

// The bytes allocated for a tensor of nbytes: a multiple of the alignment, at least one block, so
// that data() is never null (DLPack consumers may dereference it for empty tensors).
size_t block_bytes(int64_t nbytes) {
  const size_t size = (static_cast<size_t>(nbytes) + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  return size == 0 ? kTensorAlignment : size;
}

// With zero_elements false only the padding after the first nbytes is zeroed (the caller writes the rest).
// Large blocks come from the block cache where it holds one of the same size.
std::byte* allocate_aligned(int64_t nbytes, bool zero_elements = true) {
  const size_t alloc = block_bytes(nbytes);
  void* p = take_cached_block(alloc);
  if (p == nullptr) p = std::aligned_alloc(kTensorAlignment, alloc);
  if (p == nullptr) throw std::bad_alloc();
  const size_t keep = zero_elements ? 0 : static_cast<size_t>(nbytes);
  std::memset(static_cast<std::byte*>(p) + keep, 0, alloc - keep);
  return static_cast<std::byte*>(p);
}

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
void store(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

// Round to nearest (ties to even) and clamp into [lo, hi]; NaN -> 0. Works for int64 bounds, whose double images
// are not exact, by comparing before converting.
int64_t saturate_round(double v, int64_t lo, int64_t hi) {
  if (std::isnan(v)) return 0;
  const double r = std::nearbyint(v);
  if (r <= static_cast<double>(lo)) return lo;
  if (r >= static_cast<double>(hi)) return hi;  // 2^63 as a double is beyond int64: caught here
  return static_cast<int64_t>(r);
}

}  // namespace

std::optional<int64_t> checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    // Keep n * 64 (the bit count of the widest dtype) in range, so that byte sizes never overflow.
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / 64 / d) return std::nullopt;
    n *= d;
  }
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

void Tensor::FreeDeleter::operator()(std::byte* p) const { release_block(p, bytes); }

Tensor::Tensor() : Tensor(DType::kFloat32, {0}) {}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  const auto n = checked_numel(shape_);
  assert(n.has_value() && "Tensor: negative or overflowing shape");
  numel_ = n.value_or(0);
  nbytes_ = dtype_storage_bytes(dtype_, numel_);
  data_ = {allocate_aligned(nbytes_), FreeDeleter{block_bytes(nbytes_)}};
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape, Uninitialized) : dtype_(dtype), shape_(std::move(shape)) {
  const auto n = checked_numel(shape_);
  assert(n.has_value() && "Tensor: negative or overflowing shape");
  numel_ = n.value_or(0);
  nbytes_ = dtype_storage_bytes(dtype_, numel_);
  data_ = {allocate_aligned(nbytes_, /*zero_elements=*/false), FreeDeleter{block_bytes(nbytes_)}};
}

Tensor::Tensor(const Tensor& other)
    : dtype_(other.dtype_), shape_(other.shape_), numel_(other.numel_), nbytes_(other.nbytes_) {
  data_ = {allocate_aligned(nbytes_, /*zero_elements=*/false), FreeDeleter{block_bytes(nbytes_)}};
  if (nbytes_ > 0) std::memcpy(data_.get(), other.data_.get(), static_cast<size_t>(nbytes_));
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

uint64_t Tensor::get_bits(int64_t i) const {
  assert(i >= 0 && i < numel_);
  const std::byte* base = data_.get();
  switch (dtype_bits(dtype_)) {
    case 4: {
      const auto byte = static_cast<uint8_t>(base[i / 2]);
      return (i % 2 == 0) ? (byte & 0xFu) : (byte >> 4);
    }
    case 8: return static_cast<uint8_t>(base[i]);
    case 16: return load<uint16_t>(base + 2 * i);
    case 32: return load<uint32_t>(base + 4 * i);
    default: return load<uint64_t>(base + 8 * i);
  }
}

void Tensor::set_bits(int64_t i, uint64_t bits) {
  assert(i >= 0 && i < numel_);
  std::byte* base = data_.get();
  switch (dtype_bits(dtype_)) {
    case 4: {
      auto byte = static_cast<uint8_t>(base[i / 2]);
      const auto nib = static_cast<uint8_t>(bits & 0xFu);
      byte =
          (i % 2 == 0) ? static_cast<uint8_t>((byte & 0xF0u) | nib) : static_cast<uint8_t>((byte & 0x0Fu) | (nib << 4));
      base[i / 2] = static_cast<std::byte>(byte);
      return;
    }
    case 8: base[i] = static_cast<std::byte>(bits & 0xFFu); return;
    case 16: store<uint16_t>(base + 2 * i, static_cast<uint16_t>(bits)); return;
    case 32: store<uint32_t>(base + 4 * i, static_cast<uint32_t>(bits)); return;
    default: store<uint64_t>(base + 8 * i, bits); return;
  }
}

double Tensor::get_as_double(int64_t i) const {
  const uint64_t b = get_bits(i);
  switch (dtype_) {
    case DType::kFloat32: return fpconv::float_of(static_cast<uint32_t>(b));
    case DType::kFloat16: return float16_to_double(static_cast<uint16_t>(b));
    case DType::kBFloat16: return bfloat16_to_double(static_cast<uint16_t>(b));
    case DType::kFloat8E4M3FN: return float8_e4m3fn_to_double(static_cast<uint8_t>(b));
    case DType::kFloat8E5M2: return float8_e5m2_to_double(static_cast<uint8_t>(b));
    case DType::kFloat4E2M1: return float4_e2m1_to_double(static_cast<uint8_t>(b));
    case DType::kInt64: return static_cast<double>(static_cast<int64_t>(b));
    case DType::kInt32: return static_cast<int32_t>(static_cast<uint32_t>(b));
    case DType::kInt16: return static_cast<int16_t>(static_cast<uint16_t>(b));
    case DType::kInt8: return static_cast<int8_t>(static_cast<uint8_t>(b));
    case DType::kUInt8: return static_cast<double>(b);
    case DType::kBool: return b != 0 ? 1.0 : 0.0;
  }
  return 0.0;
}

void Tensor::set_from_double(int64_t i, double v) {
  uint64_t b = 0;
  switch (dtype_) {
    case DType::kFloat32: b = fpconv::bits_of(static_cast<float>(v)); break;
    case DType::kFloat16: b = double_to_float16(v); break;
    case DType::kBFloat16: b = double_to_bfloat16(v); break;
    case DType::kFloat8E4M3FN: b = double_to_float8_e4m3fn(v); break;
    case DType::kFloat8E5M2: b = double_to_float8_e5m2(v); break;
    case DType::kFloat4E2M1: b = double_to_float4_e2m1(v); break;
    case DType::kInt64:
      b = static_cast<uint64_t>(
          saturate_round(v, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
      break;
    case DType::kInt32: b = static_cast<uint32_t>(static_cast<int32_t>(saturate_round(v, INT32_MIN, INT32_MAX))); break;
    case DType::kInt16: b = static_cast<uint16_t>(static_cast<int16_t>(saturate_round(v, INT16_MIN, INT16_MAX))); break;
    case DType::kInt8: b = static_cast<uint8_t>(static_cast<int8_t>(saturate_round(v, INT8_MIN, INT8_MAX))); break;
    case DType::kUInt8: b = static_cast<uint64_t>(saturate_round(v, 0, UINT8_MAX)); break;
    case DType::kBool: b = v != 0.0 ? 1 : 0; break;  // NaN != 0 is true
  }
  set_bits(i, b);
}

DLTensor Tensor::dl_view() const {
  DLTensor t{};
  t.data = const_cast<std::byte*>(data_.get());
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape_.size());
  t.dtype = to_dlpack(dtype_);
  t.shape = const_cast<int64_t*>(shape_.data());
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

bool Tensor::bitwise_equal(const Tensor& other) const {
  if (dtype_ != other.dtype_ || shape_ != other.shape_) return false;
  if (nbytes_ == 0) return true;
  if (dtype_ == DType::kFloat4E2M1 && numel_ % 2 == 1) {
    // The unused high nibble of the last byte is not part of the tensor.
    if (std::memcmp(data_.get(), other.data_.get(), static_cast<size_t>(nbytes_ - 1)) != 0) return false;
    return get_bits(numel_ - 1) == other.get_bits(numel_ - 1);
  }
  return std::memcmp(data_.get(), other.data_.get(), static_cast<size_t>(nbytes_)) == 0;
}

}  // namespace kda::tensor
