// A minimal protobuf wire-format decoder: walks the (field number, wire type, payload) triples of one
// message. It knows no schema; callers map field numbers to meanings (see docs/ncu-format.md).
#pragma once

#include <cstdint>
#include <string_view>

#include "util/status.h"

namespace kda::ncu {

enum class WireType : uint8_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

struct WireField {
  uint32_t number = 0;
  WireType type = WireType::kVarint;
  uint64_t scalar = 0;     // varint value, or the raw little-endian bits of a fixed32/fixed64
  std::string_view bytes;  // payload of a length-delimited field

  double as_double() const;  // fixed64 reinterpreted as IEEE double
  float as_float() const;    // fixed32 reinterpreted as IEEE float
};

// Iterates the fields of one serialized message. Every read is bounds-checked; malformed input
// (truncated varint, length past the end, groups, unknown wire types) is a kBadInput error.
class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}

  // Reads the next field into *field. Returns false at the end of the message.
  Result<bool> next(WireField* field);
  bool at_end() const { return pos_ >= data_.size(); }
  size_t position() const { return pos_; }

 private:
  Result<uint64_t> read_varint();
  std::string_view data_;
  size_t pos_ = 0;
};

// Decodes a little-endian uint32 at data[offset]; the caller checks bounds.
uint32_t load_le32(std::string_view data, size_t offset);

}  // namespace kda::ncu
