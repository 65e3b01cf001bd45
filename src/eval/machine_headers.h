// Header libraries the machine provides to solutions that include them without carrying them
// (CUTLASS/CuTe, as FlashInfer-Bench's environment does): where they are, found once per process.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "task/solution.h"
#include "util/status.h"

namespace kda::eval {

// One machine-level header library, as data: the variable that names its checkout, the header that
// marks its include directory, the include prefixes a source that uses it writes, the include
// directories a checkout holds, and where an installed Python package ships a copy.
struct MachineHeaderLibrary {
  std::string name;                           // "cutlass"
  std::string variable;                       // "KDA_CUTLASS_DIR": a checkout or its include directory
  std::string marker;                         // "cutlass/cutlass.h", relative to an include directory
  std::vector<std::string> include_prefixes;  // "cutlass/", "cute/": what `#include <...>` names
  std::vector<std::string> dependencies;      // spec.dependencies naming it: "cutlass", "cute"
  std::vector<std::string> checkout_dirs;     // "include", "tools/util/include" (those present are used)
  std::string python_package;                 // "flashinfer": a package shipping a copy ...
  std::string package_dir;                    // ... at <package>/data/cutlass (a checkout's layout)
  std::string version_header;                 // "cutlass/version.h"
  std::vector<std::string> version_macros;    // CUTLASS_MAJOR, CUTLASS_MINOR, CUTLASS_PATCH
};

inline const std::vector<MachineHeaderLibrary> kMachineHeaderLibraries = {
    {.name = "cutlass",
     .variable = "KDA_CUTLASS_DIR",
     .marker = "cutlass/cutlass.h",
     .include_prefixes = {"cutlass/", "cute/"},
     .dependencies = {"cutlass", "cute"},
     .checkout_dirs = {"include", "tools/util/include"},
     .python_package = "flashinfer",
     .package_dir = "data/cutlass",
     .version_header = "cutlass/version.h",
     .version_macros = {"CUTLASS_MAJOR", "CUTLASS_MINOR", "CUTLASS_PATCH"}},
};

// Where a library was found: its include directories (absolute; the compiler sandbox reads them),
// the directory it came from, how ("KDA_CUTLASS_DIR" or "python package flashinfer") and its version
// ("3.9.2", or "" when its version header does not say).
struct MachineHeaders {
  std::string name;
  std::vector<std::string> include_dirs;
  std::string dir, source, version;
  nlohmann::json to_json() const;
};

// Whether a solution uses `lib`: its spec.dependencies name it, or a source includes one of its
// prefixes (`#include <cutlass/...>` or `#include "cute/..."`).
bool solution_uses(const task::Solution& solution, const MachineHeaderLibrary& lib);

// Finds `lib` on this machine: its variable when set (an error, naming the variable, when that
// directory holds no marker), else the Python package's copy (looked up with the solutions'
// interpreter, without importing the package), else nullopt. Remembered per process.
Result<std::optional<MachineHeaders>> find_machine_headers(const MachineHeaderLibrary& lib);

// Reads `lib`'s version from an include directory ("" when the header or its macros are missing).
std::string machine_headers_version(const MachineHeaderLibrary& lib, const std::string& include_dir);

}  // namespace kda::eval
