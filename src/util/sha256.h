// SHA-256 (OpenSSL EVP) with an incremental interface, hex output.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "util/status.h"

namespace kda {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  Sha256& update(std::string_view bytes);
  Sha256& update(const void* data, size_t size);
  // Length-prefixed update, so that ("ab","c") and ("a","bc") hash differently.
  Sha256& update_field(std::string_view bytes);
  std::array<uint8_t, 32> digest();
  std::string hex_digest();

 private:
  void* ctx_;  // EVP_MD_CTX*
};

std::string sha256_hex(std::string_view bytes);
Result<std::string> sha256_file_hex(const std::filesystem::path& path);

}  // namespace kda
