// The values of kda's seeded random tensors, element by element, identical on the host and on a GPU.
//
// Element i of stream s under seed k is a pure function of (k, s, i): Philox4x32-10 block i/4 (philox.h) gives
// four 32-bit words, and element i uses word i%4 (integers) or the normal drawn from the word pair holding it
// (floats). Distributions follow FlashInfer-Bench: float32/float16/bfloat16 standard normal (then rounded);
// float8/float4 standard normal clamped to [-2, 2] then rounded (float_convert.h); int8 uniform [-128, 127];
// int16/int32/int64 uniform [-1024, 1023]; uint8 uniform [0, 255]; bool uniform {0, 1}.
//
// Normals: Box-Muller on the word pair (a, b): u = ((a >> 8) + 1) * 2^-24 in (0, 1] (never 0, so the log is
// finite), theta = 2*pi * (b >> 8) * 2^-24; z0 = sqrt(-2 ln u) cos theta, z1 = ... sin theta. ln, sin and cos are
// polynomials evaluated only with correctly rounded IEEE operations - explicit fused multiply-adds (fmaf on the
// host, __fmaf_rn on the device), +, -, *, / and sqrt (the __f*_rn intrinsics on the device, so nvcc cannot
// contract or approximate them, even under --use_fast_math) - hence bit-identical results everywhere.
// No expression here has the shape a*b+c (every product feeds an explicit fma, a sqrt or a store), so compiler
// contraction has nothing to fuse even where it is on (GCC's C++ default, nvcc's --fmad=true); generate.cc builds
// with -ffp-contract=off as well, and Generate.ThreadsAndFmaUnitDoNotChangeBits compares its FMA and non-FMA paths.
//
// Accuracy (generate_test, exhaustive over all 2^24 inputs): ln within 1.65 ulp of the exact value; sin/cos within
// 8.6e-8 (1.4 ulp at 1) absolute of the exact value; the final normals within 4.4e-7 absolute of a double-precision
// Box-Muller on the same uniforms (200k blocks sampled).
#pragma once

#include <cstdint>
#include <cstring>
#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

#include "tensor/dtype.h"
#include "tensor/float_convert.h"
#include "tensor/hd.h"
#include "tensor/philox.h"

namespace kda::tensor {

namespace rmath {

// Correctly rounded float operations that no compiler may fuse or approximate.
KDA_HD_FORCEINLINE float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fmaf(a, b, c);
#endif
}
KDA_HD_FORCEINLINE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
KDA_HD_FORCEINLINE float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
KDA_HD_FORCEINLINE float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
KDA_HD_FORCEINLINE float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

// Natural log of a positive normal float. u = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(s) with
// s = (m-1)/(m+1), |s| <= 0.1716, by its odd series through s^11 (truncation < 1e-10 relative).
KDA_HD_FORCEINLINE float log_positive(float u) {
  const uint32_t b = fpconv::bits_of(u);
  int e = static_cast<int>(b >> 23) - 127;
  uint32_t mb = (b & 0x7FFFFFu) | 0x3F800000u;
  if (mb > 0x3FB504F3u) {  // m > sqrt(2): halve it
    mb -= 0x00800000u;
    e += 1;
  }
  const float m = fpconv::float_of(mb);
  const float f = add_rn(m, -1.0f);  // exact (Sterbenz)
  const float s = div_rn(f, add_rn(2.0f, f));
  const float z = mul_rn(s, s);
  float p = fma_rn(z, 0x1.745d18p-4f, 0x1.c71c72p-4f);  // 1/11, 1/9
  p = fma_rn(z, p, 0x1.24924ap-3f);                     // 1/7
  p = fma_rn(z, p, 0x1.99999ap-3f);                     // 1/5
  p = fma_rn(z, p, 0x1.555556p-2f);                     // 1/3
  const float t = add_rn(s, s);                         // 2s, exact
  const float ln_m = fma_rn(mul_rn(t, z), p, t);
  const float fe = static_cast<float>(e);
  // ln 2 split so that e * hi is exact for |e| < 256.
  return fma_rn(fe, 0x1.62e4p-1f, fma_rn(fe, 0x1.7f7d1cp-20f, ln_m));
}

// sin and cos of 2*pi * k * 2^-24 for a 24-bit k: the angle is (pi/2)(n + x) with n = round(k / 2^22) and
// x in [-1/2, 1/2] exact, then Taylor polynomials of sin(pi/2 x) (through x^11) and cos(pi/2 x) (through x^12).
KDA_HD_FORCEINLINE void sincos_turn24(uint32_t k, float& sin_out, float& cos_out) {
  const uint32_t n = (k + (1u << 21)) >> 22;                                  // 0..4
  const int32_t r = static_cast<int32_t>(k) - static_cast<int32_t>(n << 22);  // [-2^21, 2^21)
  const float x = mul_rn(static_cast<float>(r), 0x1p-22f);                    // exact
  const float z = mul_rn(x, x);
  float ps = fma_rn(z, -0x1.e30750p-19f, 0x1.507834p-13f);
  ps = fma_rn(z, ps, -0x1.32d2ccp-8f);
  ps = fma_rn(z, ps, 0x1.466bc6p-4f);
  ps = fma_rn(z, ps, -0x1.4abbcep-1f);
  ps = fma_rn(z, ps, 0x1.921fb6p+0f);
  const float sx = mul_rn(x, ps);
  float pc = fma_rn(z, 0x1.f9d38ap-22f, -0x1.a6d1f2p-16f);
  pc = fma_rn(z, pc, 0x1.e1f506p-11f);
  pc = fma_rn(z, pc, -0x1.55d3c8p-6f);
  pc = fma_rn(z, pc, 0x1.03c1f0p-2f);
  pc = fma_rn(z, pc, -0x1.3bd3ccp+0f);
  const float cx = fma_rn(z, pc, 1.0f);
  switch (n & 3u) {
    case 0:
      sin_out = sx;
      cos_out = cx;
      break;
    case 1:
      sin_out = cx;
      cos_out = -sx;
      break;
    case 2:
      sin_out = -sx;
      cos_out = -cx;
      break;
    default:
      sin_out = -cx;
      cos_out = sx;
      break;
  }
}

// The uniform in (0, 1] that Box-Muller takes the log of.
KDA_HD_FORCEINLINE float uniform_open0(uint32_t word) { return mul_rn(static_cast<float>((word >> 8) + 1u), 0x1p-24f); }

// Two independent standard normals from two 32-bit words.
KDA_HD_FORCEINLINE void box_muller(uint32_t a, uint32_t b, float& z0, float& z1) {
  const float radius = sqrt_rn(mul_rn(log_positive(uniform_open0(a)), -2.0f));
  float s, c;
  sincos_turn24(b >> 8, s, c);
  z0 = mul_rn(radius, c);
  z1 = mul_rn(radius, s);
}

KDA_HD_FORCEINLINE float clamp2(float z) { return z < -2.0f ? -2.0f : (z > 2.0f ? 2.0f : z); }

}  // namespace rmath

// The four standard normals of Philox block `block` (elements 4*block .. 4*block+3).
KDA_HD inline void random_normal_block(uint64_t seed, uint64_t stream, uint64_t block, float out[4]) {
  const Philox4x32 w = philox_block(seed, stream, block);
  rmath::box_muller(w.v[0], w.v[1], out[0], out[1]);
  rmath::box_muller(w.v[2], w.v[3], out[2], out[3]);
}

// Storage bits of element `lane` of a block, given the block's words and (for float dtypes) its normals.
KDA_HD_FORCEINLINE uint64_t random_bits_from(DType dtype, const Philox4x32& w, const float normals[4], int lane) {
  const uint32_t x = w.v[lane];
  const int64_t small_int = static_cast<int64_t>(x & 0x7FFu) - 1024;  // uniform [-1024, 1023]
  switch (dtype) {
    case DType::kFloat32: return fpconv::bits_of(normals[lane]);
    case DType::kFloat16: return float_to_float16(normals[lane]);
    case DType::kBFloat16: return float_to_bfloat16(normals[lane]);
    case DType::kFloat8E4M3FN: return float_to_float8_e4m3fn(rmath::clamp2(normals[lane]));
    case DType::kFloat8E5M2: return float_to_float8_e5m2(rmath::clamp2(normals[lane]));
    case DType::kFloat4E2M1: return float_to_float4_e2m1(rmath::clamp2(normals[lane]));
    case DType::kInt64: return static_cast<uint64_t>(small_int);
    case DType::kInt32: return static_cast<uint32_t>(static_cast<int32_t>(small_int));
    case DType::kInt16: return static_cast<uint16_t>(static_cast<int16_t>(small_int));
    case DType::kInt8: return x & 0xFFu;   // two's complement: uniform [-128, 127]
    case DType::kUInt8: return x & 0xFFu;  // uniform [0, 255]
    case DType::kBool: return x & 1u;
  }
  return 0;
}

// Storage bits per element (fp4: 4, two per byte) as a constant expression, and the unsigned type of a
// whole-byte element: what the host fill and the CUDA runner's device fill write.
KDA_HD constexpr int random_storage_bits(DType d) {
  switch (d) {
    case DType::kFloat32:
    case DType::kInt32: return 32;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16: return 16;
    case DType::kFloat4E2M1: return 4;
    case DType::kInt64: return 64;
    default: return 8;
  }
}
template <int kBytes>
struct StorageUInt;
template <>
struct StorageUInt<1> {
  using type = uint8_t;
};
template <>
struct StorageUInt<2> {
  using type = uint16_t;
};
template <>
struct StorageUInt<4> {
  using type = uint32_t;
};
template <>
struct StorageUInt<8> {
  using type = uint64_t;
};

KDA_HD inline bool dtype_is_normal(DType dtype) {
  return static_cast<uint8_t>(dtype) <= static_cast<uint8_t>(DType::kFloat4E2M1);
}

// Storage bits of element i (zero-extended; a float4 element is one nibble): what fill_random stores there.
KDA_HD inline uint64_t random_element_bits(DType dtype, uint64_t seed, uint64_t stream, uint64_t i) {
  const uint64_t block = i / 4;
  const int lane = static_cast<int>(i % 4);
  const Philox4x32 w = philox_block(seed, stream, block);
  float normals[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (dtype_is_normal(dtype)) {
    rmath::box_muller(w.v[0], w.v[1], normals[0], normals[1]);
    rmath::box_muller(w.v[2], w.v[3], normals[2], normals[3]);
  }
  return random_bits_from(dtype, w, normals, lane);
}

}  // namespace kda::tensor
