// CUPTI launch attestation: which kernels seen during a candidate's timed calls were not compiled
// from its own sources.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace kda::eval {

// Kernels in `seen` (mangled names reported by CUPTI) that are not in `own` (mangled names ptxas
// reported for the candidate's build), in sorted order.
std::vector<std::string> foreign_kernels(const std::set<std::string>& seen, const std::set<std::string>& own);

}  // namespace kda::eval
