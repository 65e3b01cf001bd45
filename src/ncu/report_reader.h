// Native reader of Nsight Compute .ncu-rep files (container version 7): the framing and the
// protobuf messages are decoded by field number with our own wire decoder (wire.h); no NVIDIA
// schema or library is used. The field map is documented in docs/ncu-format.md.
#pragma once

#include <filesystem>
#include <string_view>

#include "ncu/report.h"
#include "util/status.h"

namespace kda::ncu {

inline constexpr int kSupportedReportVersion = 7;

// True when the bytes start with the .ncu-rep magic "NVR\0".
bool looks_like_ncu_rep(std::string_view bytes);

// Decodes a whole report held in memory. Malformed or unsupported input is a kBadInput error
// that says what and where (byte offsets); never crashes on hostile bytes.
Result<Report> parse_ncu_rep(std::string_view bytes);

// Reads and decodes a report file; errors name the file.
Result<Report> read_ncu_rep(const std::filesystem::path& path);

}  // namespace kda::ncu
