// FlashInfer-Bench Solution (spec, sources) as a JSON file or a solution directory, its checks and its
// content hash.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "task/json_reader.h"
#include "util/diagnostics.h"
#include "util/status.h"

namespace kda::task {

struct SourceFile {
  std::string path;  // relative, no "..", unique within the solution
  std::string content;
  bool operator==(const SourceFile&) const = default;
};

struct SolutionSpec {
  std::string language;  // python | triton | cpp | cuda | tilelang
  std::vector<std::string> target_hardware;
  std::string entry_point;  // "file::function"
  std::vector<std::string> dependencies;
  bool destination_passing_style = true;
  std::optional<std::string> binding;  // "tvm-ffi" | "torch" | null (= tvm-ffi for cpp/cuda)

  std::string entry_file() const;      // part before "::"
  std::string entry_function() const;  // part after "::"
  bool operator==(const SolutionSpec&) const = default;
};

struct Solution {
  std::string name;
  std::string definition;
  std::string author;
  SolutionSpec spec;
  std::vector<SourceFile> sources;
  std::string description;

  const SourceFile* source(const std::string& path) const;
  nlohmann::json to_json() const;  // sources always inline
  bool operator==(const Solution&) const = default;
};

// Parses and checks a Solution. With `source_dir`, a source without "content" is read from
// source_dir/path (the solution-directory form); otherwise "content" is required.
std::optional<Solution> solution_from_json(const ojson& j, const std::string& file, Diagnostics& diags,
                                           const std::filesystem::path* source_dir = nullptr);

// A solution directory (solution.json + sources beside it) or a Solution JSON file (sources without content
// are read beside it too).
std::optional<Solution> load_solution(const std::filesystem::path& path, Diagnostics& diags);
Result<Solution> load_solution(const std::filesystem::path& path);

// Files kda reads only as sources (build.toml) that lie beside the solution at `path` (a directory
// or its solution.json) without being among its sources, so nothing reads them: the names, sorted.
// `kda task validate` and `kda eval` warn with them.
std::vector<std::string> unlisted_option_files(const Solution& solution, const std::filesystem::path& path);
std::string unlisted_option_warning(const std::string& name);  // what to do about one of them

// Content hash (hex sha256): definition, language, entry point, binding, dependencies,
// destination_passing_style and the (path, content) pairs sorted by path. Not the name, author or text.
std::string solution_hash(const Solution& s);

// What FlashInfer-Bench's own Solution schema (flashinfer_bench.data.Solution: SourceFile, BuildSpec)
// would refuse in `j`, one line each with its JSON pointer; empty when it would load. FIB requires every
// source's `content`, which kda's directory form leaves out (`kda solution export` inlines it), a
// language of its enum (python, triton, cpp, cuda, tilelang), a non-empty target_hardware list,
// entry_point "<file>::<function>" naming one of the sources, relative source paths without "..",
// and a binding of tvm-ffi or torch where one is given.
std::vector<std::string> fib_solution_errors(const nlohmann::json& j);

// Why this version of kda cannot evaluate a solution that is valid FlashInfer-Bench, or nullopt:
// a language it does not build (python, triton, ...), the torch binding, or tvm-ffi without
// destination passing. `kda task validate` warns with it; the evaluator answers COMPILE_ERROR.
std::optional<std::string> not_evaluable_reason(const Solution& solution);

}  // namespace kda::task
