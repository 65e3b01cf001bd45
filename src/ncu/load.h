// One entry point for every input kind: a .ncu-rep (sniffed by its magic) or one or more CSV pages
// of the same report (merged: raw + details + source).
#pragma once

#include <filesystem>
#include <vector>

#include "ncu/report.h"
#include "util/status.h"

namespace kda::ncu {

// Loads one or more inputs. Errors are kBadInput / kNotFound and name the offending file.
Result<Report> load_report(const std::vector<std::filesystem::path>& inputs);
Result<Report> load_report(const std::filesystem::path& input);

}  // namespace kda::ncu
