// A keyed 128-bit digest of a byte range, defined word by word so that a GPU computes it in parallel
// and the host gets the same value (tests compare the two).
//
// Word i is the i-th little-endian 64-bit word of the range (the last one zero-padded). Each lane sums,
// modulo 2^64, a splitmix64 finaliser of the word mixed with its index and the lane's key, so the digest
// is independent of summation order and any change of one word changes both lanes. The key is a secret
// of the evaluation: a candidate that wanted to mutate an input and keep its digest would have to know it.
// It detects inputs changed by a call where the evaluator keeps no host copy of them (device-generated
// inputs); it is not a cryptographic hash.
#pragma once

#include <cstdint>

#include "tensor/hd.h"

namespace kda::eval {

struct Digest128 {
  uint64_t lo = 0, hi = 0;
  friend bool operator==(const Digest128&, const Digest128&) = default;
};

namespace digest_detail {

KDA_HD_FORCEINLINE uint64_t fmix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace digest_detail

// The two lane terms of word `w` at index `i` under `key`.
KDA_HD_FORCEINLINE void digest_word_terms(uint64_t w, uint64_t i, uint64_t key, uint64_t& lo, uint64_t& hi) {
  using digest_detail::fmix;
  lo = fmix(w ^ (key + (i + 1) * 0x9E3779B97F4A7C15ull));
  hi = fmix((w + fmix(key ^ 0xD1B54A32D192ED03ull)) ^ ((i + 1) * 0xC2B2AE3D27D4EB4Full));
}

// Folds the byte count into the lane sums (a truncated or extended range changes the digest).
KDA_HD_FORCEINLINE Digest128 digest_finish(uint64_t lo_sum, uint64_t hi_sum, uint64_t nbytes, uint64_t key) {
  using digest_detail::fmix;
  return {fmix(lo_sum ^ fmix(nbytes + key)), fmix(hi_sum + fmix(nbytes ^ key))};
}

// Host version: the reference for the device kernel and the evaluator's check of device generation.
inline Digest128 digest_bytes(const void* data, uint64_t nbytes, uint64_t key) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t lo_sum = 0, hi_sum = 0;
  const uint64_t words = (nbytes + 7) / 8;
  for (uint64_t i = 0; i < words; ++i) {
    uint64_t w = 0;
    const uint64_t n = nbytes - 8 * i < 8 ? nbytes - 8 * i : 8;
    for (uint64_t b = 0; b < n; ++b) w |= static_cast<uint64_t>(p[8 * i + b]) << (8 * b);
    uint64_t lo = 0, hi = 0;
    digest_word_terms(w, i, key, lo, hi);
    lo_sum += lo;
    hi_sum += hi;
  }
  return digest_finish(lo_sum, hi_sum, nbytes, key);
}

}  // namespace kda::eval
