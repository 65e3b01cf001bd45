// Wall-clock time as the files kda writes record it.
#pragma once

#include <chrono>

namespace kda::util {

// Seconds since the Unix epoch (system clock, fractional): task records, queue entries, timestamps.
inline double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace kda::util
