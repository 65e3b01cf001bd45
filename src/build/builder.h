// Builds a solution's sources into a shared library exporting the kda C ABI entry point:
//   extern "C" int <entry>(const DLTensor* inputs, int64_t num_inputs,
//                          DLTensor* outputs, int64_t num_outputs, void* stream);
//
// Builds are content-addressed and cached under <cache_root>/<key>/ (lib.so, build.log,
// meta.json, src/). The key hashes the language, the sources (path + content), the flags, the
// entry symbol and the compilers' identities (`--version`). The headers a compile actually read
// (from -MD dependency files) are recorded with their hashes; a lookup re-hashes them, so an
// edited system or include-dir header is a miss. Concurrent builds of one key are safe: each
// builds in its own staging directory under the cache root and publishes with rename(2); a
// loser uses the winner's entry.
//
// Includes: a compile may read headers only from the solution's own sources, the system and
// compiler include trees (/usr/include, /usr/lib, /usr/local/include, the CUDA toolkit), DLPack's
// directory and the request's include_dirs. A dependency outside them (`#include "/task/..."`,
// `#include "../../x"`) fails the build, so task files cannot be compiled into a candidate.
//
// Python and Triton solutions (language "python" / "triton") are not compiled: their sources are
// staged under <cache_root>/py-<key>/src/ and `library` is the entry file there, which kda-runner's
// embedded interpreter imports (runner/python_runtime.h).
//
// Compilers: cpp -> $KDA_CXX or `c++`; cuda -> $KDA_NVCC, else the CUDA toolkit nvcc found at
// configure time, else `nvcc` on PATH. Each translation unit is compiled on its own (so each
// gets its own dependency file), then linked with -shared.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <optional>
#include <vector>

#include "build/ptxas.h"
#include "util/status.h"

namespace kda::build {

struct SourceFile {
  std::string path;  // relative, no "..", e.g. "kernel.cu" or "include/tile.cuh"
  std::string content;
};

// The installed PyTorch a `binding: "torch"` solution is built against, as FlashInfer-Bench's torch
// builder builds it (torch.utils.cpp_extension: torch's headers, TORCH_EXTENSION_NAME, its ABI flag,
// its nvcc defines): a Python extension module whose PYBIND11_MODULE defines the entry function.
struct TorchExtension {
  std::string module = "kda_torch_solution";  // TORCH_EXTENSION_NAME: the module's PyInit_<module>
  std::string version;                        // torch.__version__ (part of the cache key)
  std::vector<std::string> include_dirs;      // torch's include_paths() and Python's include directory
  std::vector<std::string> library_dirs;      // torch/lib (libc10, libtorch*, libtorch_python)
  bool cxx11_abi = true;                      // torch._C._GLIBCXX_USE_CXX11_ABI
  std::vector<std::string> nvcc_flags;        // torch.utils.cpp_extension.COMMON_NVCC_FLAGS (cuda)
};

// The libraries a torch extension links (every one; CUDA ones add kTorchCudaLibraries): what its
// import audit allows, at the runpath the build sets to torch's library directory.
inline constexpr const char* kTorchLibraries[] = {"c10", "torch", "torch_cpu", "torch_python"};
inline constexpr const char* kTorchCudaLibraries[] = {"c10_cuda", "torch_cuda"};

struct BuildRequest {
  std::string language;  // "cpp" | "cuda" | "python" | "triton" (staged, not compiled)
  std::vector<SourceFile> sources;
  std::string entry_file;                 // one of sources[].path (FlashInfer-Bench entry_point "file::func")
  std::string entry_symbol;               // the exported C function
  std::string cuda_arch = "90a";          // -gencode=arch=compute_<a>,code=sm_<a>
  std::vector<std::string> include_dirs;  // extra -I (absolute); DLPack's dir is always added
  std::vector<std::string> libraries;     // extra -l<name> the task policy allows (e.g. "cublas")
  // Extra compile flags, appended after kda's own (part of the cache key): a solution's build.toml
  // as eval::parse_build_options validated it (-D, -Isrc/<dir>, allowed flags). Not checked here.
  std::vector<std::string> extra_flags;
  bool debug_lineinfo = false;  // -lineinfo (cuda) / -g (cpp), for Nsight Compute source views
  int opt_level = 3;            // -O<n>, 0..3
  bool nvtx = false;            // cuda: keep NVTX ranges (otherwise -DNVTX_DISABLE; part of the key)
  // FlashInfer-Bench spec.binding: "tvm-ffi" (the library must export __tvm_ffi_<entry_symbol>, what
  // TVM_FFI_DLL_EXPORT_TYPED_FUNC makes) or "" (kda's C ABI <entry_symbol>, or else a tvm-ffi export).
  std::string binding;
  // binding "torch": the torch to build against (eval::find_torch); required then, unused otherwise.
  std::optional<TorchExtension> torch;
};

struct BuildResult {
  bool ok = false;
  // "ok", "compile error", "link error", "entry point X not exported", "compiler timed out", ...
  std::string status;
  std::filesystem::path library;       // <cache_root>/<key>/lib.so when ok
  std::vector<std::string> compilers;  // each compiler's version line (nvcc's release, g++ (...) 12.2.0)
  std::string entry_export;            // the symbol to call: entry_symbol, or __tvm_ffi_<entry_symbol> (tvm-ffi)
  std::string log;                     // compiler commands and output (capped)
  bool cache_hit = false;
  std::string key;
  std::vector<KernelResources> resources;  // cuda: one per kernel (entry function)
  double compile_seconds = 0;              // of the original build (0 for a hit is not reported)
};

struct BuilderConfig {
  std::filesystem::path cache_root;  // empty: fs::user_cache_dir("KDA_CACHE_DIR") / "build"
  std::string cxx;                   // empty: $KDA_CXX or "c++"
  std::string nvcc;                  // empty: $KDA_NVCC, the configure-time nvcc, or "nvcc"
  double compile_timeout_seconds = 900;
  size_t log_cap = 256 * 1024;
  // Runs in each compiler process before exec (e.g. a Landlock ruleset prepared in advance so the
  // compiler cannot read task files through `#include` or `.incbin`). Same rules as
  // proc::ChildOptions::pre_exec: async-signal-safe, return 0 or an errno value.
  std::function<int()> compiler_pre_exec;
  // Confine compiler reads with Landlock (see compiler_sandbox.h) where the kernel has it.
  // KDA_BUILD_SANDBOX=0 in the environment turns it off (e.g. a toolchain in an unusual place).
  bool confine_compiler_reads = true;
};

// Builds (or finds in the cache) the library. A compile/link error or a missing entry export is
// a BuildResult with ok=false and the log; errors are bad requests (kBadInput: invalid paths,
// unknown language), a missing compiler (kNotFound) or cache I/O failures (kIo).
Result<BuildResult> build_solution(const BuildRequest& request, const BuilderConfig& config = {});

// The cache key alone (runs `<compiler> --version` once per process). Same inputs, same key.
Result<std::string> build_key(const BuildRequest& request, const BuilderConfig& config = {});

// The lines of a compiler or linker log that say what went wrong, at most max_lines: the diagnostics
// naming an error (gcc/clang `file:line:col: error:`, nvcc `file(line): error`, `fatal error`,
// ptxas and linker errors, `undefined reference`), the solution's own `src/` prefix removed so they
// name the solution's files; without any, the log's last non-blank lines.
std::vector<std::string> error_lines(const std::string& log, size_t max_lines = 5);

// Checks a source path: relative, non-empty components, no "." or "..", no backslashes or NULs.
Status validate_source_path(const std::string& path);

}  // namespace kda::build
