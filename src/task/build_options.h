// A solution's compile options (docs/solutions.md "Compile options"): the source named build.toml.
#pragma once

#include <string>
#include <vector>

#include "util/status.h"

namespace kda::task {

// A solution's compile options, from the source named kBuildOptionsFile (docs/solutions.md
// "Compile options"): solution.json stays a FlashInfer-Bench Solution, and the options travel with
// the sources (hashed, diffed, copied) like any of them.
inline constexpr const char* kBuildOptionsFile = "build.toml";
struct SolutionBuildOptions {
  std::vector<std::string> defines;       // NAME or NAME=VALUE: -D
  std::vector<std::string> include_dirs;  // directories of the solution's own sources: -I
  std::vector<std::string> flags;         // compiler flags from kAllowedCudaFlags / kAllowedCppFlags
};
// Flags a build.toml may add (anything else is refused: a flag can read files or change what is linked).
inline const std::vector<std::string> kAllowedCudaFlags = {
    "--use_fast_math", "--extended-lambda", "--expt-relaxed-constexpr", "-ftz=true",  "-ftz=false",  "-prec-div=false",
    "-prec-div=true",  "-prec-sqrt=false",  "-prec-sqrt=true",          "-fmad=true", "-fmad=false", "-lineinfo"};
inline const std::vector<std::string> kAllowedCppFlags = {
    "-ffast-math", "-funroll-loops", "-fno-math-errno", "-march=native", "-mavx2", "-mfma", "-mavx512f", "-g"};
// Parses build.toml's text for a solution in `language` ("cuda" | "cpp") whose sources are at
// `source_paths`. Errors name the file, the line and the field.
Result<SolutionBuildOptions> parse_build_options(const std::string& text, const std::string& language,
                                                 const std::vector<std::string>& source_paths);

}  // namespace kda::task
