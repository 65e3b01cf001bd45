// The torch oracle: a definition's FlashInfer-Bench Python `reference` (the "reference" field of
// definition.json, Python source defining run(...)) served as kda's reference runner.
//
// src/runner/torch_oracle.py (installed beside kda-runner) speaks the runner protocol of
// eval/protocol.h under a Python interpreter that can import torch: kLoad takes the definition's
// path instead of a library, kCall runs run(...) on the arena's inputs (copied to the device) and
// writes its outputs into the output slots. It runs trusted reference code only: never sandboxed.
#pragma once

#include <filesystem>
#include <string>

#include "build/builder.h"
#include "eval/runner_client.h"
#include "util/status.h"

namespace kda::eval {

inline constexpr const char* kTorchOracleScript = "torch_oracle.py";

// The interpreter the oracle runs under, before probing: $KDA_PYTHON when set (a path or a name
// looked up on PATH), else python3 on the evaluator's PATH (not canonicalised, so a virtual
// environment's python keeps its site-packages), else /usr/bin/python3.
Result<std::filesystem::path> torch_oracle_python();

// What `python -c "import sys; print(sys.executable); import torch; ..."` said in the runner's
// environment (cached for the process; 60 s deadline).
struct TorchProbe {
  std::filesystem::path python;      // the interpreter asked (torch_oracle_python())
  std::filesystem::path executable;  // its sys.executable ("" when it did not start)
  bool importable = false;
  std::string detail;  // "torch 2.11.0+cu130 (cuda 13.0, cuda available)" or why not
};
const TorchProbe& torch_probe();

// True when torch imports under the oracle's interpreter (torch_probe().importable).
bool torch_importable();

// The installed torch a `binding: "torch"` solution builds against, asked of the oracle's
// interpreter once per process (torch.utils.cpp_extension's include and library paths, ABI flag and
// nvcc defines); kNotFound naming the interpreter and what failed where it has no torch.
Result<build::TorchExtension> find_torch_extension();

// Options that start the oracle as the reference runner: the interpreter as the wrapper (the
// probe's sys.executable when it ran, so shims are bypassed), runner_binary =
// <dir of runner_binary>/torch_oracle.py, role reference, sandbox off, the given backend
// ("host" or "cuda"), PYTHONPATH/PYENV_VERSION forwarded from the evaluator's environment.
// kNotFound when the script or an interpreter is missing; kBadInput for another backend.
Result<RunnerOptions> torch_oracle_runner_options(const std::filesystem::path& runner_binary,
                                                  const std::string& backend);

// Loads `definition` (a definition.json path) into a started oracle: RunnerClient::load with the
// definition as the library (the oracle takes "definition" or "library"), symbol "run".
CallOutcome load_torch_reference(RunnerClient& oracle, const std::filesystem::path& definition, double timeout_s);

// torch_oracle_runner_options + RunnerClient::start + load_torch_reference in one: a running oracle
// with `definition` loaded, or an error saying why not (kNotFound: no script or interpreter;
// kFailed: the load failed, e.g. "torch is not importable: ...", with the oracle's stderr tail).
Result<RunnerClient> start_torch_reference(const std::filesystem::path& runner_binary, const std::string& backend,
                                           const std::filesystem::path& definition, double timeout_s);

}  // namespace kda::eval
