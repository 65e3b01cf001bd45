#include "tensor/tensor.h"

#include <cstring>

#include "tensor/block_cache.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

namespace kda::tensor {
namespace {

// A freed large buffer is handed to the next tensor of the same size, and a zero-initialising tensor
// that receives a dirty one still starts at zero; other sizes and small tensors do not take it.
TEST(Tensor, LargeBuffersAreReusedAndStillZeroed) {
  const int64_t n = 3 << 20;  // 12 MiB of float32
  const std::byte* first = nullptr;
  {
    Tensor dirty(DType::kFloat32, {n}, kUninitialized);
    std::memset(dirty.data(), 0x5A, static_cast<size_t>(dirty.nbytes()));
    first = dirty.data();
  }
  EXPECT_GE(cached_bytes(), static_cast<size_t>(n) * 4);
  Tensor other_size(DType::kFloat32, {n + 1024});
  EXPECT_NE(other_size.data(), first);
  Tensor zeroed(DType::kFloat32, {n});
  EXPECT_EQ(zeroed.data(), first);
  const float* f = zeroed.data_as<float>();
  for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(f[i], 0.0f) << i;
  EXPECT_EQ(f[n - 1], 0.0f);
  Tensor small(DType::kFloat32, {16});
  EXPECT_NE(small.data(), first);
}

TEST(Tensor, BlockCacheStaysWithinItsLimit) {
  std::vector<Tensor> many;
  const int64_t elems = static_cast<int64_t>(kCacheLimitBytes / 4 / 3 + 4096);  // 3 of them exceed the limit
  for (int i = 0; i < 4; ++i) many.emplace_back(DType::kFloat32, std::vector<int64_t>{elems}, kUninitialized);
  many.clear();
  EXPECT_LE(cached_bytes(), kCacheLimitBytes);
}

TEST(Tensor, ShapeNumelBytesAndAlignment) {
  Tensor t(DType::kBFloat16, {2, 3, 5});
  EXPECT_EQ(t.numel(), 30);
  EXPECT_EQ(t.nbytes(), 60);
  EXPECT_EQ(t.ndim(), 3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % kTensorAlignment, 0u);
  for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.get_bits(i), 0u) << "zero-filled";

  Tensor scalar(DType::kInt64, {});
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.nbytes(), 8);

  Tensor empty(DType::kFloat32, {4, 0});
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.nbytes(), 0);
  EXPECT_NE(empty.data(), nullptr);

  Tensor fp4(DType::kFloat4E2M1, {3});
  EXPECT_EQ(fp4.nbytes(), 2);
}

TEST(Tensor, CheckedNumelRejectsNegativeAndOverflow) {
  EXPECT_EQ(checked_numel({}), 1);
  EXPECT_EQ(checked_numel({3, 0, 7}), 0);
  EXPECT_FALSE(checked_numel({2, -1}).has_value());
  EXPECT_FALSE(checked_numel({int64_t{1} << 31, int64_t{1} << 31}).has_value());
  EXPECT_FALSE(checked_numel({int64_t{1} << 58}).has_value());  // 2^58 int64 elements = 2^64 bits
  EXPECT_EQ(checked_numel({int64_t{1} << 56}), int64_t{1} << 56);
  EXPECT_EQ(shape_string({2, 3}), "[2, 3]");
  EXPECT_EQ(shape_string({}), "[]");
}

TEST(Tensor, Float4PacksLowNibbleFirst) {
  Tensor t(DType::kFloat4E2M1, {3});
  t.set_from_double(0, 1.0);   // code 0x2
  t.set_from_double(1, -6.0);  // code 0xF
  t.set_from_double(2, 0.5);   // code 0x1
  EXPECT_EQ(static_cast<uint8_t>(t.data()[0]), 0xF2);
  EXPECT_EQ(static_cast<uint8_t>(t.data()[1]), 0x01);
  EXPECT_EQ(t.get_as_double(1), -6.0);
  EXPECT_EQ(t.get_as_double(2), 0.5);
  t.set_from_double(0, 100.0);  // saturates to 6 without touching the neighbour
  EXPECT_EQ(static_cast<uint8_t>(t.data()[0]), 0xF7);
}

TEST(Tensor, SetAndGetEveryDtype) {
  for (DType d : kAllDTypes) {
    Tensor t(d, {4});
    t.set_from_double(0, 1.5);
    t.set_from_double(1, -2.0);
    t.set_from_double(3, 0.0);
    const double a = t.get_as_double(0), b = t.get_as_double(1);
    if (is_float(d)) {
      EXPECT_EQ(a, 1.5) << dtype_name(d);
      EXPECT_EQ(b, -2.0) << dtype_name(d);
    } else if (d == DType::kBool) {
      EXPECT_EQ(a, 1.0);
      EXPECT_EQ(b, 1.0);
    } else if (d == DType::kUInt8) {
      EXPECT_EQ(a, 2.0);  // 1.5 ties to even
      EXPECT_EQ(b, 0.0);  // saturates at 0
    } else {
      EXPECT_EQ(a, 2.0) << dtype_name(d);
      EXPECT_EQ(b, -2.0) << dtype_name(d);
    }
    EXPECT_EQ(t.get_as_double(3), 0.0);
  }
}

TEST(Tensor, IntegerSaturationAndNaN) {
  Tensor i8(DType::kInt8, {3});
  i8.set_from_double(0, 1000);
  i8.set_from_double(1, -1000);
  i8.set_from_double(2, std::nan(""));
  EXPECT_EQ(i8.get_as_double(0), 127);
  EXPECT_EQ(i8.get_as_double(1), -128);
  EXPECT_EQ(i8.get_as_double(2), 0);
  Tensor i64(DType::kInt64, {2});
  i64.set_from_double(0, 1e300);
  i64.set_from_double(1, -1e300);
  EXPECT_EQ(i64.span<int64_t>()[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i64.span<int64_t>()[1], std::numeric_limits<int64_t>::min());
  Tensor f8(DType::kFloat8E4M3FN, {1});
  f8.set_from_double(0, 1e6);
  EXPECT_TRUE(std::isnan(f8.get_as_double(0)));  // e4m3fn overflow is NaN
}

TEST(Tensor, DlViewDescribesTheBuffer) {
  Tensor t(DType::kFloat8E4M3FN, {4, 8});
  const DLTensor v = t.dl_view();
  EXPECT_EQ(v.data, static_cast<void*>(t.data()));
  EXPECT_EQ(v.device.device_type, kDLCPU);
  EXPECT_EQ(v.ndim, 2);
  EXPECT_EQ(v.shape[0], 4);
  EXPECT_EQ(v.shape[1], 8);
  EXPECT_EQ(v.strides, nullptr);
  EXPECT_EQ(v.byte_offset, 0u);
  EXPECT_EQ(v.dtype.code, 10);
  EXPECT_EQ(v.dtype.bits, 8);
  EXPECT_EQ(v.dtype.lanes, 1);
}

TEST(Tensor, CopyIsDeepAndEqualityIsBitwise) {
  Tensor a(DType::kFloat32, {3});
  a.span<float>()[1] = 2.5f;
  Tensor b = a;
  EXPECT_NE(a.data(), b.data());
  EXPECT_TRUE(a.bitwise_equal(b));
  b.span<float>()[1] = 3.0f;
  EXPECT_FALSE(a.bitwise_equal(b));
  EXPECT_FALSE(a.bitwise_equal(Tensor(DType::kFloat32, {1, 3})));
  Tensor moved = std::move(b);
  EXPECT_EQ(moved.span<float>()[1], 3.0f);
  // An odd fp4 tensor ignores the unused high nibble.
  Tensor p(DType::kFloat4E2M1, {1}), q(DType::kFloat4E2M1, {1});
  q.data()[0] = std::byte{0x50};
  EXPECT_TRUE(p.bitwise_equal(q));
}

}  // namespace
}  // namespace kda::tensor
