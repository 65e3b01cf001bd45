// Per-kernel resource use from `ptxas -v` (nvcc -Xptxas -v) output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kda::build {

// A C++ symbol as source spells it ("k2(float*)"); the name itself where it is not mangled.
std::string demangle(const std::string& name);

struct KernelResources {
  std::string name;       // mangled, as ptxas prints it
  std::string demangled;  // readable name (same as name if it is not a C++ mangled name)
  std::string arch;       // "sm_90a"
  int registers = 0;
  int barriers = 0;
  int64_t shared_mem_static = 0;  // bytes, "N bytes smem"
  int64_t spill_stores = 0;       // bytes
  int64_t spill_loads = 0;        // bytes
  int64_t stack = 0;              // bytes of stack frame
};

// Parses ptxas's informational lines. Only entry functions (kernels) are returned, in the order
// ptxas compiled them; device functions' properties are skipped. Unknown lines are ignored.
std::vector<KernelResources> parse_ptxas_log(std::string_view log);

void to_json(nlohmann::json& j, const KernelResources& k);
void from_json(const nlohmann::json& j, KernelResources& k);

}  // namespace kda::build
