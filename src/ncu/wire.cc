#include "ncu/wire.h"

#include <cstring>
#include <string>

namespace kda::ncu {

double WireField::as_double() const {
  double d;
  std::memcpy(&d, &scalar, sizeof d);
  return d;
}

float WireField::as_float() const {
  uint32_t bits = static_cast<uint32_t>(scalar);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint32_t load_le32(std::string_view data, size_t offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data() + offset);
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

Result<uint64_t> WireReader::read_varint() {
  uint64_t value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos_ >= data_.size()) return Status::bad_input("truncated varint at byte " + std::to_string(pos_));
    auto byte = static_cast<unsigned char>(data_[pos_++]);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return value;
  }
  return Status::bad_input("varint longer than 10 bytes at byte " + std::to_string(pos_));
}

Result<bool> WireReader::next(WireField* field) {
  if (at_end()) return false;
  size_t start = pos_;
  KDA_ASSIGN_OR_RETURN(uint64_t tag, read_varint());
  uint64_t number = tag >> 3;
  if (number == 0 || number > 0x1fffffff)
    return Status::bad_input("invalid field number at byte " + std::to_string(start));
  field->number = static_cast<uint32_t>(number);
  field->bytes = {};
  field->scalar = 0;
  switch (tag & 7) {
    case 0: {
      field->type = WireType::kVarint;
      KDA_ASSIGN_OR_RETURN(field->scalar, read_varint());
      return true;
    }
    case 1:
    case 5: {
      size_t n = (tag & 7) == 1 ? 8 : 4;
      if (data_.size() - pos_ < n)
        return Status::bad_input("truncated fixed-width field at byte " + std::to_string(start));
      uint64_t v = 0;
      for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
      pos_ += n;
      field->type = n == 8 ? WireType::kFixed64 : WireType::kFixed32;
      field->scalar = v;
      return true;
    }
    case 2: {
      KDA_ASSIGN_OR_RETURN(uint64_t len, read_varint());
      if (len > data_.size() - pos_)
        return Status::bad_input("length-delimited field overruns its message at byte " + std::to_string(start));
      field->type = WireType::kLengthDelimited;
      field->bytes = data_.substr(pos_, static_cast<size_t>(len));
      pos_ += static_cast<size_t>(len);
      return true;
    }
    default:
      return Status::bad_input("unsupported wire type " + std::to_string(tag & 7) + " at byte " +
                               std::to_string(start));
  }
}

}  // namespace kda::ncu
