// One entry point for every input kind: a .ncu-rep (sniffed by its magic) or one or more CSV pages
// of the same report (merged: raw + details + source).
#pragma once

#include <filesystem>
#include <vector>

#include "ncu/report.h"
#include "util/status.h"

namespace kda::ncu {

struct LoadOptions {
  // SASS text for a native report's source rows from nvdisasm (native_source.h); the rows keep
  // their lines without it. `nvdisasm` empty: find_nvdisasm().
  bool sass = true;
  std::filesystem::path nvdisasm;
  double nvdisasm_timeout_s = 60;
};

// Loads one or more inputs. Errors are kBadInput / kNotFound and name the offending file.
Result<Report> load_report(const std::vector<std::filesystem::path>& inputs);
Result<Report> load_report(const std::filesystem::path& input);
Result<Report> load_report(const std::vector<std::filesystem::path>& inputs, const LoadOptions& options);

}  // namespace kda::ncu
