// Secrets from the kernel's random source: bearer tokens, instance and task ids.
#pragma once

#include <cstddef>
#include <string>

namespace kda::util {

// `bytes` random bytes from getrandom(2), as lowercase hex (2 characters a byte).
std::string random_hex(size_t bytes);

}  // namespace kda::util
