#include "tensor/float_convert.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace kda::tensor {
namespace {

// An independent decoder: the textbook formula with ldexp, written without the bit tricks of float_convert.h.
struct Spec {
  int exp_bits, man_bits;
  bool ieee_specials;  // all-ones exponent is Inf/NaN
  bool fn_nan;         // S.1..1.1..1 is the only NaN (e4m3fn)
};
constexpr Spec kHalf{5, 10, true, false};
constexpr Spec kBf16{8, 7, true, false};
constexpr Spec kE4M3{4, 3, false, true};
constexpr Spec kE5M2{5, 2, true, false};
constexpr Spec kE2M1{2, 1, false, false};

double reference_value(const Spec& s, uint32_t code) {
  const int bias = (1 << (s.exp_bits - 1)) - 1;
  const bool neg = (code >> (s.exp_bits + s.man_bits)) & 1;
  const uint32_t exp = (code >> s.man_bits) & ((1u << s.exp_bits) - 1);
  const uint32_t man = code & ((1u << s.man_bits) - 1);
  double mag;
  if (s.ieee_specials && exp == (1u << s.exp_bits) - 1) {
    mag = man == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (s.fn_nan && exp == (1u << s.exp_bits) - 1 && man == (1u << s.man_bits) - 1) {
    mag = std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    mag = std::ldexp(static_cast<double>(man), 1 - bias - s.man_bits);
  } else {
    mag = std::ldexp(1.0 + std::ldexp(static_cast<double>(man), -s.man_bits), static_cast<int>(exp) - bias);
  }
  return neg ? -mag : mag;
}

bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// The code a correct round-to-nearest-even encoder must produce, by exhaustive search over the finite codes.
uint32_t nearest_code(const Spec& s, double x, uint32_t num_codes) {
  uint32_t best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (uint32_t c = 0; c < num_codes; ++c) {
    const double v = reference_value(s, c);
    if (!std::isfinite(v)) continue;
    if (v == 0 && std::signbit(v) != std::signbit(x)) continue;  // keep the sign of zero results
    const double err = std::fabs(v - x);
    const uint32_t man = c & ((1u << s.man_bits) - 1);
    if (err < best_err || (err == best_err && (man & 1) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return best;
}

TEST(FloatConvert, Float8E4M3FnAllCodes) {
  for (uint32_t c = 0; c < 256; ++c) {
    const auto v = static_cast<uint8_t>(c);
    const double ref = reference_value(kE4M3, c);
    EXPECT_TRUE(same_value(float8_e4m3fn_to_float(v), ref)) << c;
    EXPECT_TRUE(same_value(float8_e4m3fn_to_double(v), ref)) << c;
    EXPECT_EQ(float_to_float8_e4m3fn(float8_e4m3fn_to_float(v)), v) << c;
    EXPECT_EQ(double_to_float8_e4m3fn(float8_e4m3fn_to_double(v)), v) << c;
  }
  EXPECT_EQ(float8_e4m3fn_to_float(0x7E), 448.0f);
  EXPECT_EQ(float8_e4m3fn_to_float(0x01), std::ldexp(1.0f, -9));
}

TEST(FloatConvert, Float8E5M2AllCodes) {
  for (uint32_t c = 0; c < 256; ++c) {
    const auto v = static_cast<uint8_t>(c);
    const double ref = reference_value(kE5M2, c);
    EXPECT_TRUE(same_value(float8_e5m2_to_float(v), ref)) << c;
    // NaNs come back quiet (mantissa bit 1 set) with their sign.
    const uint8_t expect = std::isnan(ref) ? static_cast<uint8_t>(v | 0x02) : v;
    EXPECT_EQ(float_to_float8_e5m2(float8_e5m2_to_float(v)), expect) << c;
    EXPECT_EQ(double_to_float8_e5m2(float8_e5m2_to_double(v)), expect) << c;
  }
  EXPECT_EQ(float8_e5m2_to_float(0x7B), 57344.0f);
  EXPECT_EQ(float8_e5m2_to_float(0x7C), std::numeric_limits<float>::infinity());
}

TEST(FloatConvert, Float4E2M1AllCodes) {
  const float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint32_t c = 0; c < 16; ++c) {
    const auto v = static_cast<uint8_t>(c);
    const double ref = reference_value(kE2M1, c);
    EXPECT_TRUE(same_value(float4_e2m1_to_float(v), ref)) << c;
    EXPECT_EQ(std::fabs(float4_e2m1_to_float(v)), kValues[c & 7]) << c;
    EXPECT_EQ(float_to_float4_e2m1(float4_e2m1_to_float(v)), v) << c;
    EXPECT_EQ(double_to_float4_e2m1(float4_e2m1_to_double(v)), v) << c;
    EXPECT_EQ(float4_e2m1_to_float(static_cast<uint8_t>(v | 0xA0)), float4_e2m1_to_float(v)) << "high nibble ignored";
  }
}

void check_all_16bit(const Spec& spec, float (*decode)(uint16_t), uint16_t (*encode)(float),
                     uint16_t (*encode_d)(double), uint16_t quiet_bit) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const auto v = static_cast<uint16_t>(c);
    const double ref = reference_value(spec, c);
    ASSERT_TRUE(same_value(decode(v), ref)) << c;
    const uint16_t expect = std::isnan(ref) ? static_cast<uint16_t>(v | quiet_bit) : v;
    ASSERT_EQ(encode(decode(v)), expect) << c;
    ASSERT_EQ(encode_d(static_cast<double>(decode(v))), expect) << c;
  }
}

TEST(FloatConvert, Float16AllCodesRoundTrip) {
  check_all_16bit(kHalf, float16_to_float, float_to_float16, double_to_float16, 0x0200);
}

TEST(FloatConvert, BFloat16AllCodesRoundTrip) {
  check_all_16bit(kBf16, bfloat16_to_float, float_to_bfloat16, double_to_bfloat16, 0x0040);
}

// Midpoints between neighbouring codes tie to the even one; a hair either side goes to the nearer one. The double
// encoders get a hair of one double ulp, which a float detour would erase (double rounding).
void check_midpoints(const Spec& spec, uint32_t num_codes, uint32_t (*encode)(float), uint32_t (*encode_d)(double)) {
  const uint32_t sign_bit = num_codes / 2;
  for (uint32_t c = 0; c + 1 < sign_bit; ++c) {
    const double lo = reference_value(spec, c), hi = reference_value(spec, c + 1);
    if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
    const double mid = (lo + hi) / 2;  // exact: one more bit than the format
    const uint32_t even = (c & 1) == 0 ? c : c + 1;
    for (const uint32_t sign : {0u, sign_bit}) {
      const double s = sign ? -1.0 : 1.0;
      ASSERT_EQ(static_cast<float>(mid), mid);
      ASSERT_EQ(encode(static_cast<float>(s * mid)), even | sign) << c;
      ASSERT_EQ(encode(std::nextafter(static_cast<float>(s * mid), 0.0f)), c | sign) << c;
      ASSERT_EQ(encode(std::nextafter(static_cast<float>(s * mid), static_cast<float>(s * HUGE_VALF))), (c + 1) | sign)
          << c;
      ASSERT_EQ(encode_d(s * mid), even | sign) << c;
      ASSERT_EQ(encode_d(std::nextafter(s * mid, 0.0)), c | sign) << c;
      ASSERT_EQ(encode_d(std::nextafter(s * mid, s * HUGE_VAL)), (c + 1) | sign) << c;
    }
  }
}

template <auto F>
uint32_t widen(float x) {
  return F(x);
}
template <auto F>
uint32_t widen_d(double x) {
  return F(x);
}

TEST(FloatConvert, MidpointsTieToEven) {
  check_midpoints(kHalf, 65536, widen<float_to_float16>, widen_d<double_to_float16>);
  check_midpoints(kBf16, 65536, widen<float_to_bfloat16>, widen_d<double_to_bfloat16>);
  check_midpoints(kE4M3, 256, widen<float_to_float8_e4m3fn>, widen_d<double_to_float8_e4m3fn>);
  check_midpoints(kE5M2, 256, widen<float_to_float8_e5m2>, widen_d<double_to_float8_e5m2>);
  check_midpoints(kE2M1, 16, widen<float_to_float4_e2m1>, widen_d<double_to_float4_e2m1>);
}

// Random values across each format's range (and beyond, into underflow) against an exhaustive nearest search.
TEST(FloatConvert, RandomValuesMatchExhaustiveNearest) {
  std::mt19937_64 rng(12345);
  struct Case {
    Spec spec;
    uint32_t codes;
    int min_exp, max_exp;
    uint32_t (*encode)(float);
    uint32_t (*encode_d)(double);
    double overflow_at;  // |x| beyond this (or equal, if inclusive) gives overflow_code
    bool inclusive;
    uint32_t overflow_code;  // without sign
  };
  const Case cases[] = {
      {kE4M3, 256, -13, 8, widen<float_to_float8_e4m3fn>, widen_d<double_to_float8_e4m3fn>, 464, false, 0x7F},
      {kE5M2, 256, -19, 15, widen<float_to_float8_e5m2>, widen_d<double_to_float8_e5m2>, 61440, true, 0x7C},
      {kE2M1, 16, -3, 2, widen<float_to_float4_e2m1>, widen_d<double_to_float4_e2m1>, 1e300, false, 0},
  };
  auto expected = [](const Case& k, double x) {
    const double a = std::fabs(x);
    if (a > k.overflow_at || (k.inclusive && a == k.overflow_at))
      return k.overflow_code | (std::signbit(x) ? k.codes / 2 : 0u);
    return nearest_code(k.spec, x, k.codes);
  };
  for (const auto& k : cases) {
    std::uniform_int_distribution<int> exp_dist(k.min_exp, k.max_exp);
    std::uniform_real_distribution<double> frac(1.0, 2.0);
    for (int i = 0; i < 20000; ++i) {
      double x = std::ldexp(frac(rng), exp_dist(rng));
      if (rng() & 1) x = -x;
      const float xf = static_cast<float>(x);
      ASSERT_EQ(k.encode(xf), expected(k, xf)) << xf;
      ASSERT_EQ(k.encode_d(x), expected(k, x)) << x;
    }
  }
}

TEST(FloatConvert, OverflowAndSpecials) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // e4m3fn: no Inf; 464 ties down to 448, anything that rounds past 448 is NaN (PyTorch / ml_dtypes).
  EXPECT_EQ(float_to_float8_e4m3fn(464.0f), 0x7E);
  EXPECT_EQ(float_to_float8_e4m3fn(std::nextafter(464.0f, 1e9f)), 0x7F);
  EXPECT_EQ(float_to_float8_e4m3fn(1e9f), 0x7F);
  EXPECT_EQ(float_to_float8_e4m3fn(-1e9f), 0xFF);
  EXPECT_EQ(float_to_float8_e4m3fn(inf), 0x7F);
  EXPECT_EQ(float_to_float8_e4m3fn(-inf), 0xFF);
  EXPECT_EQ(float_to_float8_e4m3fn(nan), 0x7F);
  EXPECT_EQ(double_to_float8_e4m3fn(1e300), 0x7F);
  EXPECT_TRUE(std::isnan(float8_e4m3fn_to_float(0xFF)));
  EXPECT_TRUE(std::signbit(float8_e4m3fn_to_float(0xFF)));
  // e5m2: IEEE overflow to Inf at the midpoint 61440 (ties to the odd-free Inf side).
  EXPECT_EQ(float_to_float8_e5m2(61439.0f), 0x7B);
  EXPECT_EQ(float_to_float8_e5m2(61440.0f), 0x7C);
  EXPECT_EQ(float_to_float8_e5m2(-inf), 0xFC);
  EXPECT_EQ(float_to_float8_e5m2(nan), 0x7E);
  // e2m1: saturates; 5 ties to 4 (even mantissa); NaN -> +6.
  EXPECT_EQ(float_to_float4_e2m1(5.0f), 0x6);
  EXPECT_EQ(float_to_float4_e2m1(5.0001f), 0x7);
  EXPECT_EQ(float_to_float4_e2m1(7.0f), 0x7);
  EXPECT_EQ(float_to_float4_e2m1(1e30f), 0x7);
  EXPECT_EQ(float_to_float4_e2m1(-inf), 0xF);
  EXPECT_EQ(float_to_float4_e2m1(nan), 0x7);
  EXPECT_EQ(float_to_float4_e2m1(0.25f), 0x0);  // tie between 0 and 0.5 -> 0
  EXPECT_EQ(float_to_float4_e2m1(-0.26f), 0x9);
  // float16 / bfloat16
  EXPECT_EQ(float_to_float16(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_float16(65519.99f), 0x7BFF);
  EXPECT_EQ(float_to_float16(65520.0f), 0x7C00);
  EXPECT_EQ(float_to_float16(std::ldexp(1.0f, -25)), 0x0000);  // half the smallest subnormal ties to 0
  EXPECT_EQ(float_to_float16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(double_to_float16(std::nextafter(std::ldexp(1.0, -25), 1.0)), 0x0001);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_bfloat16(std::ldexp(1.0f, -133)), 0x0001);  // smallest bf16 subnormal
  EXPECT_EQ(double_to_bfloat16(1e300), 0x7F80);
  EXPECT_EQ(double_to_float16(std::numeric_limits<double>::denorm_min()), 0x0000);
  // Negative zero keeps its sign everywhere.
  EXPECT_EQ(float_to_float16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bfloat16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_float8_e4m3fn(-0.0f), 0x80);
  EXPECT_EQ(float_to_float8_e5m2(-0.0f), 0x80);
  EXPECT_EQ(float_to_float4_e2m1(-0.0f), 0x8);
  EXPECT_EQ(double_to_float8_e4m3fn(-1e-300), 0x80);
  EXPECT_TRUE(std::signbit(float16_to_float(0x8000)));
  // NaN sign and payload survive the IEEE-like formats.
  EXPECT_EQ(float_to_float16(-nan), 0xFE00);
  EXPECT_EQ(float_to_bfloat16(nan), 0x7FC0);
}

}  // namespace
}  // namespace kda::tensor
