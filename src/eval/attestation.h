// CUPTI launch attestation: which kernels seen during a candidate's timed calls were not compiled
// from its own sources.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "task/solution.h"

namespace kda::eval {

// Kernels in `seen` (mangled names reported by CUPTI) that are not in `own` (mangled names ptxas
// reported for the candidate's build), in sorted order.
std::vector<std::string> foreign_kernels(const std::set<std::string>& seen, const std::set<std::string>& own);

// The functions a Python solution's sources decorate with a JIT (`@triton.jit`, `@jit`, with or
// without arguments, under any other decorators such as `@triton.autotune`): the names Triton gives
// the kernels it compiles from them. Read from the text, nothing imported or run.
std::set<std::string> jit_kernel_names(const std::vector<task::SourceFile>& sources);

// What kernels a Python solution may launch besides its own JIT's, by language (data, below).
struct PythonKernelRule {
  std::string language;
  // Prefixes of mangled names (torch's own ATen kernels, `_ZN2at6native`) and substrings of them
  // (torch's copy and fill kernels) that are allowed.
  std::vector<std::string> allowed_prefixes, allowed_substrings;
  std::string why;  // what the rule allows, for the gate's note and the failure
};

// python: torch's ATen kernels (the solution is torch code), never another library's (cuBLAS behind
// torch.matmul, cuDNN, FlashAttention from a package) unless the task policy allows libraries.
// triton: its own @triton.jit kernels and torch's copy and fill kernels (outputs copied in, a
// .contiguous()); torch doing the work (its reductions, elementwise math, matmul) is foreign.
inline const std::vector<PythonKernelRule> kPythonKernelRules = {
    {.language = "python",
     .allowed_prefixes = {"_ZN2at6native"},
     .why = "a python solution may launch its own @jit kernels and torch's ATen kernels, no other library's"},
    {.language = "triton",
     .allowed_substrings = {"direct_copy_kernel", "_copy_kernel_cuda", "FillFunctor"},
     .why = "a triton solution may launch its own @triton.jit kernels and torch's copy and fill kernels"},
};

// binding "torch" (a compiled solution called through torch tensors): the kernels its own sources
// compile (the build's ptxas record) and torch's copy and fill kernels (outputs it returns copied in,
// tensors it allocates zeroed); torch doing the work (at::matmul's cuBLAS, its reductions) is foreign.
inline const PythonKernelRule kTorchBindingRule = {
    .language = "binding torch",
    .allowed_substrings = {"direct_copy_kernel", "_copy_kernel_cuda", "FillFunctor"},
    .why = "a torch-binding solution may launch the kernels its sources compile and torch's copy and fill kernels"};

// The rule of `language` (a Python language of kPythonKernelRules), or nullptr.
const PythonKernelRule* python_kernel_rule(const std::string& language);

// Kernels in `seen` that a Python solution of `language` may not launch: neither a kernel its JIT
// compiled from one of `jit_names` (the name itself, or Triton 2's `name_<signature>`) nor one its
// rule allows. An unknown language allows only its own JIT kernels.
std::vector<std::string> foreign_python_kernels(const std::set<std::string>& seen,
                                                const std::set<std::string>& jit_names, const std::string& language);
// The same under `rule` (nullptr: only the JIT's kernels), e.g. kTorchBindingRule.
std::vector<std::string> foreign_python_kernels(const std::set<std::string>& seen,
                                                const std::set<std::string>& jit_names, const PythonKernelRule* rule);

}  // namespace kda::eval
