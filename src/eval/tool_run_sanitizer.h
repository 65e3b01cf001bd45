// Reading compute-sanitizer's output: the error count of its summary line and the first error
// reports as evidence (for `kda sanitize`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kda::eval {

struct SanitizerSummary {
  bool found = false;  // a summary line was seen (the tool ran to its end)
  int64_t errors = 0;  // "ERROR SUMMARY: N errors" (summed over processes)
  // The first reports, each its headline ("Invalid __global__ write of size 2 bytes") followed by
  // its detail lines ("at kernel()+0x90 in k.cu:12", "Address ... is out of bounds"), host
  // backtrace frames left out.
  std::vector<std::vector<std::string>> reports;
};

// Parses the "========= "-prefixed lines of compute-sanitizer's output (memcheck, racecheck,
// initcheck, synccheck). Keeps at most `max_reports` reports of at most `max_details` lines.
SanitizerSummary parse_sanitizer_log(const std::string& log, size_t max_reports = 5, size_t max_details = 6);

}  // namespace kda::eval
