// The embedded CPython that calls python and triton solutions (docs/solutions.md, "Python
// solutions"). It lives in its own library, libkda-python.so beside kda-runner, which kda-runner
// opens (RTLD_GLOBAL, so that extension modules such as numpy's find the interpreter's symbols)
// only for a Python solution: a runner for a compiled solution never maps libpython.
//
// The order is fixed by the sandbox: start() (the interpreter, the array library, kda's glue
// module) runs before it is applied, and read_paths() says what it must leave readable; load(),
// bind() and call() run confined, so the candidate's module-level code already does.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

namespace kda::runner {

class PythonRuntime {
 public:
  virtual ~PythonRuntime() = default;
  // Starts the interpreter (a virtual environment's where $KDA_PYTHON or the first python3 on PATH
  // is one) and imports `glue` (kda_python.py) and the array library of `device` ("cpu": numpy,
  // "cuda": torch, whose CUDA state is created now). Returns "" or what failed. `jit_dir` (a triton
  // solution): the directory its JIT compiler's cache and temporary files go to; Triton's one-time
  // work (its driver helpers, the ptxas version) is done now, before the sandbox.
  virtual std::string start(const std::filesystem::path& glue, const std::string& device,
                            const std::filesystem::path& jit_dir) = 0;
  // The interpreter's directories (prefixes, sys.path, the imported modules' directories).
  virtual std::vector<std::filesystem::path> read_paths() const = 0;
  // With a jit_dir: the programs the JIT compiler may run (real paths), which the sandbox lets it
  // execute; empty otherwise.
  virtual std::vector<std::filesystem::path> exec_paths() const = 0;
  // Imports the solution's entry file and takes `function`; `returns_outputs`: the function returns
  // the outputs (destination_passing_style false) instead of writing the last arguments.
  // `module`: "" for a .py entry file; else `file` is a compiled extension module of that name
  // (binding "torch") and `function` its attribute.
  virtual std::string load(const std::filesystem::path& file, const std::string& function, bool returns_outputs,
                           const std::string& module) = 0;
  // Views of the arena for the next calls, in definition order: 0-d host tensors as Python numbers,
  // host tensors as numpy arrays (inputs read-only), CUDA tensors as torch tensors (DLPack).
  virtual std::string bind(const std::vector<DLTensor>& inputs, const std::vector<DLTensor>& outputs) = 0;
  // One call on `stream` (CUDA: torch's current stream for its duration). False with *error set to
  // the exception's traceback (its last lines, capped) when the function raised.
  virtual bool call(void* stream, std::string* error) = 0;
};

// What libkda-python.so exports: one runtime per process (the interpreter cannot be started twice).
inline constexpr const char* kPythonRuntimeSymbol = "kda_python_runtime";
using PythonRuntimeFn = PythonRuntime* (*)();

}  // namespace kda::runner
