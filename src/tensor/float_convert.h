// Exact conversions between float/double and the narrow float formats of FlashInfer-Bench tensors.
//
// Header-only and KDA_HD, so that CUDA kernels (input generators, checkers) produce the same bits as the host.
// Every narrow value is held as its raw bits: float16/bfloat16 in a uint16_t, float8 in a uint8_t, float4_e2m1
// in the low nibble of a uint8_t. Decoding is exact (every narrow value is a float). Encoding rounds to nearest,
// ties to even, directly from the source value (a double is not first rounded to float, so no double rounding);
// subnormals are exact in both directions.
//
// Specials, per format (the choices follow PyTorch and ml_dtypes casts):
//   float16, bfloat16, float8_e5m2  IEEE-like: overflow rounds to +-Inf; Inf stays Inf; a NaN stays a NaN with
//                                   its sign and the top payload bits, quiet bit set (x86 F16C does the same).
//   float8_e4m3fn                   no Inf; S.1111.111 is NaN. A value that rounds beyond 448 (|x| > 464, since
//                                   464 ties to even 448), Inf and NaN all become NaN (0x7F, sign kept) - as in
//                                   PyTorch's `.to(torch.float8_e4m3fn)` and ml_dtypes; there is no saturation.
//   float4_e2m1                     no Inf, no NaN: overflow and +-Inf saturate to +-6; NaN, which the format
//                                   cannot hold and ml_dtypes leaves undefined, becomes +6 (0x7).
#pragma once

#include <cstdint>
#include <cstring>

#include "tensor/hd.h"

namespace kda::tensor {

namespace fpconv {

KDA_HD inline uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
KDA_HD inline float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
KDA_HD inline uint64_t bits_of(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

// What a format does with values beyond its largest finite one.
enum class Overflow : uint8_t { kInf, kNaN, kSaturate };

// A binary format with E exponent bits, M mantissa bits, bias 2^(E-1)-1 and a sign bit above them.
template <int E, int M, Overflow O>
struct Format {
  static constexpr Overflow kOverflow = O;
  static constexpr int kBias = (1 << (E - 1)) - 1;
  static constexpr uint32_t kSignBit = 1u << (E + M);
  static constexpr uint32_t kExpMask = ((1u << E) - 1) << M;
  static constexpr uint32_t kManMask = (1u << M) - 1;
  static constexpr uint32_t kInfCode = kExpMask;  // only meaningful for Overflow::kInf
  static constexpr uint32_t kMaxFinite = O == Overflow::kInf   ? kExpMask - 1
                                         : O == Overflow::kNaN ? (kExpMask | kManMask) - 1
                                                               : (kExpMask | kManMask);
  static constexpr uint32_t kNaNCode = kExpMask | kManMask;  // the all-ones NaN (IEEE formats: quiet, full payload)
};

// Rounds the finite nonzero magnitude sig * 2^(e - p) to format F (ties to even) and returns the code without sign.
// `sig` may be unnormalised (leading bit below p) only when e is the source format's smallest exponent and the
// target's smallest normal exponent is not below it - true for every conversion in this file.
template <class F, int E, int M>
KDA_HD inline uint32_t round_magnitude(int e, uint64_t sig, int p) {
  const int biased = e + F::kBias;
  int shift = p - M;
  if (biased < 1) shift += 1 - biased;  // target subnormal: the unit is 2^(1 - bias - M)
  uint64_t q = 0;
  if (shift <= 0) {
    q = sig << -shift;  // the target has more mantissa bits than the source (never for the formats here)
  } else if (shift < 64) {
    q = sig >> shift;
    const uint64_t rem = sig & ((uint64_t{1} << shift) - 1);
    const uint64_t half = uint64_t{1} << (shift - 1);
    q += static_cast<uint64_t>((rem > half) | ((rem == half) & static_cast<bool>(q & 1)));  // branch-free
  }
  // Normal: q is in [2^M, 2^(M+1)], so adding (biased-1) << M carries into the exponent on a mantissa overflow.
  // Subnormal: q is in [0, 2^M] and 2^M is the smallest normal's code.
  const uint64_t code = biased < 1 ? q : (static_cast<uint64_t>(biased - 1) << M) + q;
  if (code > F::kMaxFinite) {
    if constexpr (F::kOverflow == Overflow::kInf) return F::kInfCode;
    if constexpr (F::kOverflow == Overflow::kNaN) return F::kNaNCode;
    return F::kMaxFinite;
  }
  return static_cast<uint32_t>(code);
}

// Encoding of +-Inf and NaN for format F; `payload` is the source NaN's mantissa, left-aligned to bit 63.
template <class F, int E, int M, Overflow O>
KDA_HD inline uint32_t encode_special(uint32_t sign, bool nan, uint64_t payload) {
  if constexpr (O == Overflow::kInf) {
    if (!nan) return sign | F::kInfCode;
    const uint32_t top = static_cast<uint32_t>(payload >> (64 - M));
    return sign | F::kExpMask | top | (1u << (M - 1));
  } else if constexpr (O == Overflow::kNaN) {
    return sign | F::kNaNCode;
  } else {
    return nan ? F::kMaxFinite : (sign | F::kMaxFinite);
  }
}

template <int E, int M, Overflow O>
KDA_HD inline uint32_t encode_from_float(float x) {
  using F = Format<E, M, O>;
  const uint32_t b = bits_of(x);
  const uint32_t sign = (b >> 31) ? F::kSignBit : 0u;
  const uint32_t exp = (b >> 23) & 0xFF;
  const uint32_t man = b & 0x7FFFFF;
  if (exp == 0xFF) return encode_special<F, E, M, O>(sign, man != 0, static_cast<uint64_t>(man) << 41);
  if (exp == 0 && man == 0) return sign;
  const int e = exp == 0 ? -126 : static_cast<int>(exp) - 127;
  const uint64_t sig = exp == 0 ? man : (man | 0x800000u);
  return sign | round_magnitude<F, E, M>(e, sig, 23);
}

template <int E, int M, Overflow O>
KDA_HD inline uint32_t encode_from_double(double x) {
  using F = Format<E, M, O>;
  const uint64_t b = bits_of(x);
  const uint32_t sign = (b >> 63) ? F::kSignBit : 0u;
  const uint32_t exp = static_cast<uint32_t>((b >> 52) & 0x7FF);
  const uint64_t man = b & ((uint64_t{1} << 52) - 1);
  if (exp == 0x7FF) return encode_special<F, E, M, O>(sign, man != 0, man << 12);
  if (exp == 0 && man == 0) return sign;
  const int e = exp == 0 ? -1022 : static_cast<int>(exp) - 1023;
  const uint64_t sig = exp == 0 ? man : (man | (uint64_t{1} << 52));
  return sign | round_magnitude<F, E, M>(e, sig, 52);
}

template <int E, int M, Overflow O>
KDA_HD inline float decode_to_float(uint32_t code) {
  using F = Format<E, M, O>;
  const uint32_t sign = (code & F::kSignBit) ? 0x80000000u : 0u;
  const uint32_t exp = (code & F::kExpMask) >> M;
  const uint32_t man = code & F::kManMask;
  if constexpr (O == Overflow::kInf) {
    if (exp == (1u << E) - 1) return float_of(sign | 0x7F800000u | (man << (23 - M)));
  } else if constexpr (O == Overflow::kNaN) {
    if ((code & ~F::kSignBit) == F::kNaNCode) return float_of(sign | 0x7FC00000u);
  }
  if (exp == 0) {
    // Subnormal man * 2^(1 - bias - M): an exact product with a power of two that is a normal float.
    const float unit = float_of(static_cast<uint32_t>(127 + 1 - F::kBias - M) << 23);
    return float_of(sign | bits_of(static_cast<float>(man) * unit));
  }
  return float_of(sign | ((exp - F::kBias + 127) << 23) | (man << (23 - M)));
}

}  // namespace fpconv

// float16 (IEEE binary16)
KDA_HD inline float float16_to_float(uint16_t h) { return fpconv::decode_to_float<5, 10, fpconv::Overflow::kInf>(h); }
KDA_HD inline uint16_t float_to_float16(float x) {
  return static_cast<uint16_t>(fpconv::encode_from_float<5, 10, fpconv::Overflow::kInf>(x));
}
KDA_HD inline uint16_t double_to_float16(double x) {
  return static_cast<uint16_t>(fpconv::encode_from_double<5, 10, fpconv::Overflow::kInf>(x));
}

// bfloat16 (the top half of a float32)
KDA_HD inline float bfloat16_to_float(uint16_t b) { return fpconv::float_of(static_cast<uint32_t>(b) << 16); }
KDA_HD inline uint16_t float_to_bfloat16(float x) {
  return static_cast<uint16_t>(fpconv::encode_from_float<8, 7, fpconv::Overflow::kInf>(x));
}
KDA_HD inline uint16_t double_to_bfloat16(double x) {
  return static_cast<uint16_t>(fpconv::encode_from_double<8, 7, fpconv::Overflow::kInf>(x));
}

// float8_e4m3fn (OCP FP8 E4M3: bias 7, max 448, no Inf, NaN = S.1111.111)
KDA_HD inline float float8_e4m3fn_to_float(uint8_t v) {
  return fpconv::decode_to_float<4, 3, fpconv::Overflow::kNaN>(v);
}
KDA_HD inline uint8_t float_to_float8_e4m3fn(float x) {
  return static_cast<uint8_t>(fpconv::encode_from_float<4, 3, fpconv::Overflow::kNaN>(x));
}
KDA_HD inline uint8_t double_to_float8_e4m3fn(double x) {
  return static_cast<uint8_t>(fpconv::encode_from_double<4, 3, fpconv::Overflow::kNaN>(x));
}

// float8_e5m2 (OCP FP8 E5M2: bias 15, max 57344, IEEE Inf/NaN)
KDA_HD inline float float8_e5m2_to_float(uint8_t v) { return fpconv::decode_to_float<5, 2, fpconv::Overflow::kInf>(v); }
KDA_HD inline uint8_t float_to_float8_e5m2(float x) {
  return static_cast<uint8_t>(fpconv::encode_from_float<5, 2, fpconv::Overflow::kInf>(x));
}
KDA_HD inline uint8_t double_to_float8_e5m2(double x) {
  return static_cast<uint8_t>(fpconv::encode_from_double<5, 2, fpconv::Overflow::kInf>(x));
}

// float4_e2m1 (OCP MXFP4 element: bias 1, values 0, 0.5, 1, 1.5, 2, 3, 4, 6; low nibble; the high nibble is ignored)
KDA_HD inline float float4_e2m1_to_float(uint8_t v) {
  return fpconv::decode_to_float<2, 1, fpconv::Overflow::kSaturate>(v & 0xFu);
}
KDA_HD inline uint8_t float_to_float4_e2m1(float x) {
  return static_cast<uint8_t>(fpconv::encode_from_float<2, 1, fpconv::Overflow::kSaturate>(x));
}
KDA_HD inline uint8_t double_to_float4_e2m1(double x) {
  return static_cast<uint8_t>(fpconv::encode_from_double<2, 1, fpconv::Overflow::kSaturate>(x));
}

// Every narrow value is exactly a float, hence exactly a double.
KDA_HD inline double float16_to_double(uint16_t h) { return float16_to_float(h); }
KDA_HD inline double bfloat16_to_double(uint16_t b) { return bfloat16_to_float(b); }
KDA_HD inline double float8_e4m3fn_to_double(uint8_t v) { return float8_e4m3fn_to_float(v); }
KDA_HD inline double float8_e5m2_to_double(uint8_t v) { return float8_e5m2_to_float(v); }
KDA_HD inline double float4_e2m1_to_double(uint8_t v) { return float4_e2m1_to_float(v); }

}  // namespace kda::tensor
