#include "task/scaffold.h"

#include <set>

#include <fmt/format.h>

namespace kda::task {

namespace {

using tensor::DType;

struct CType {
  const char* cpp;   // element type a host (C++) solution uses
  const char* cuda;  // element type a CUDA solution uses
  const char* note;  // what the bits are, where the C type does not say it
};

CType c_type(DType t) {
  switch (t) {
    case DType::kFloat32: return {"float", "float", ""};
    case DType::kFloat16: return {"uint16_t", "__half", "IEEE half bits"};
    case DType::kBFloat16: return {"uint16_t", "__nv_bfloat16", "bfloat16 bits"};
    case DType::kFloat8E4M3FN: return {"uint8_t", "__nv_fp8_e4m3", "fp8 e4m3fn bits"};
    case DType::kFloat8E5M2: return {"uint8_t", "__nv_fp8_e5m2", "fp8 e5m2 bits"};
    case DType::kFloat4E2M1: return {"uint8_t", "uint8_t", "two fp4 e2m1 per byte, low nibble first"};
    case DType::kInt64: return {"int64_t", "int64_t", ""};
    case DType::kInt32: return {"int32_t", "int32_t", ""};
    case DType::kInt16: return {"int16_t", "int16_t", ""};
    case DType::kInt8: return {"int8_t", "int8_t", ""};
    case DType::kUInt8: return {"uint8_t", "uint8_t", ""};
    case DType::kBool: return {"bool", "bool", "one byte each"};
  }
  return {"uint8_t", "uint8_t", ""};
}

// DLPack's name for a type code (DLPack 1.0's fp8/fp4 codes have none in Debian's 0.6 header).
std::string code_name(int code) {
  switch (code) {
    case kDLInt: return "kDLInt";
    case kDLUInt: return "kDLUInt";
    case kDLFloat: return "kDLFloat";
    case kDLBfloat: return "kDLBfloat";
    default: return std::to_string(code);
  }
}

std::string identifier(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "t_" + s;
  return s;
}

std::string shape_text(const TensorSpec& t) {
  if (t.is_scalar()) return "scalar (a 0-d tensor in host memory)";
  std::string s;
  for (const auto& a : *t.shape) s += (s.empty() ? "" : ", ") + a;
  return "[" + s + "]";
}

// One DLTensor argument: where it lives in the call and what the definition says it is.
struct Arg {
  const TensorSpec* spec;
  std::string array;  // "inputs" | "outputs"
  int index;
};

// The definition's tensor arguments: inputs, then outputs.
std::vector<Arg> arguments(const Definition& d) {
  std::vector<Arg> args;
  for (size_t i = 0; i < d.inputs.size(); ++i) args.push_back({&d.inputs[i], "inputs", static_cast<int>(i)});
  for (size_t i = 0; i < d.outputs.size(); ++i) args.push_back({&d.outputs[i], "outputs", static_cast<int>(i)});
  return args;
}

// One dimension of a tensor argument and what a scaffold does with it: kRead, the first use of a
// variable axis (the axis is read from it); kSame, a later use (checked against the axis read); kConst,
// a constant axis (checked against its value). Every scaffold language reads and checks the same way.
struct AxisUse {
  enum Kind { kRead, kSame, kConst } kind;
  const Arg* arg;
  size_t dim;
  std::string axis;
  int64_t value = 0;  // kConst
};

std::vector<AxisUse> axis_uses(const Definition& d, const std::vector<Arg>& args) {
  std::vector<AxisUse> out;
  std::set<std::string> read;
  for (const Arg& a : args) {
    if (a.spec->is_scalar()) continue;
    for (size_t k = 0; k < a.spec->shape->size(); ++k) {
      const std::string& axis = (*a.spec->shape)[k];
      const AxisSpec* spec = d.axis(axis);
      if (spec != nullptr && spec->kind == AxisSpec::Kind::kConst)
        out.push_back({AxisUse::kConst, &a, k, axis, spec->value});
      else
        out.push_back({read.insert(axis).second ? AxisUse::kRead : AxisUse::kSame, &a, k, axis});
    }
  }
  return out;
}

std::string source(const TaskPack& pack, const std::string& language, const std::string& entry) {
  const Definition& d = pack.definition;
  const bool cuda = language == "cuda";
  const std::vector<Arg> args = arguments(d);

  std::string s = fmt::format(
      "// A kda solution of {}\n// ({}), scaffolded by `kda solution init`: it builds, loads and checks its "
      "arguments;\n"
      "// computing the outputs is yours (search for \"Compute\"). The ABI is docs/solutions.md.\n",
      d.name, d.op_type.empty() ? "no op type" : d.op_type);
  s += "//\n// Arguments, in the definition's order:\n";
  for (const Arg& a : args)
    s += fmt::format("//   {}[{}] {}: {} {}{}\n", a.array, a.index, a.spec->name, tensor::dtype_name(a.spec->dtype),
                     shape_text(*a.spec), a.spec->description.empty() ? "" : " - " + a.spec->description);
  s += "#include <dlpack/dlpack.h>\n#include <stdint.h>\n";
  if (cuda) s += "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n#include <cuda_fp8.h>\n#include <cuda_runtime.h>\n";
  s += fmt::format(R"(
namespace {{

// The entry point's return values: 0 is success; kda eval reports any other as a RUNTIME_ERROR
// ("entry point returned N").
constexpr int kBadArity = 1, kBadTensor = 2, kBadShape = 3, kNotImplemented = {};

// dtype code and bits (DLPack; fp8/fp4 use DLPack 1.0's codes), rank, and where the data lives.
bool is(const DLTensor& t, int code, int bits, int ndim, DLDeviceType device) {{
  return t.dtype.code == code && t.dtype.bits == bits && t.dtype.lanes == 1 && t.ndim == ndim &&
         t.device.device_type == device;
}}

// The first element: data plus byte_offset (kda passes views whose offset need not be 0).
template <class T>
T* data_of(const DLTensor& t) {{
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}}

)",
                   kScaffoldNotImplemented);
  if (cuda)
    s += "// Your kernels go here (tasks/*/baselines/ and solutions/ have examples for the built-in packs).\n\n";
  s += "}  // namespace\n\n";
  s += fmt::format(
      "extern \"C\" int {}(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs,\n"
      "                     void* stream) {{\n",
      entry);
  s += fmt::format("  if (num_inputs != {} || num_outputs != {}) return kBadArity;\n", d.inputs.size(),
                   d.outputs.size());
  for (const Arg& a : args) {
    const DLDataType dl = tensor::to_dlpack(a.spec->dtype);
    const bool host = a.spec->is_scalar() || !cuda;
    s += fmt::format(
        "  if (!is({}[{}], {}, {}, {}, {})) return kBadTensor;  // {}{}\n", a.array, a.index, code_name(dl.code),
        dl.bits, a.spec->is_scalar() ? 0 : a.spec->shape->size(), host ? "kDLCPU" : "kDLCUDA", a.spec->name,
        code_name(dl.code) == std::to_string(dl.code) ? fmt::format(" ({})", tensor::dtype_name(a.spec->dtype)) : "");
  }
  // Axes: each variable axis read from the first tensor that has it; every other use checked.
  std::set<std::string> read;
  std::string checks;
  s += "  // Axes, from the shapes:\n";
  for (const AxisUse& u : axis_uses(d, args)) {
    const std::string at = fmt::format("{}[{}].shape[{}]", u.arg->array, u.arg->index, u.dim);
    if (u.kind == AxisUse::kConst) {
      checks += fmt::format("  if ({} != {}) return kBadShape;  // {} is constant\n", at, u.value, u.axis);
    } else if (u.kind == AxisUse::kRead) {
      read.insert(u.axis);
      s += fmt::format("  const int64_t {} = {};\n", identifier(u.axis), at);
    } else {
      checks += fmt::format("  if ({} != {}) return kBadShape;\n", at, identifier(u.axis));
    }
  }
  s += checks;
  s += "  // Typed views of the data:\n";
  for (const Arg& a : args) {
    const CType t = c_type(a.spec->dtype);
    const bool in = a.array == "inputs";
    const std::string type = cuda && !a.spec->is_scalar() ? t.cuda : t.cpp;
    // The note says what the bits are where the C type is a stand-in (uint16_t for bfloat16 ...).
    const bool stand_in = type.find("int") != std::string::npos && tensor::is_float(a.spec->dtype);
    s += fmt::format("  {}{}* {} = data_of<{}{}>({}[{}]);{}\n", in ? "const " : "", type, identifier(a.spec->name),
                     in ? "const " : "", type, a.array, a.index,
                     stand_in || a.spec->dtype == DType::kBool ? std::string("  // ") + t.note : "");
  }
  if (cuda) s += "  cudaStream_t s = static_cast<cudaStream_t>(stream);  // launch on this stream only\n";
  s += "  // Compute: write every element of every output";
  s += cuda ? " (launch on `s`; kda synchronises and times the stream).\n" : ".\n";
  s += "  // Until then this solution says so instead of returning garbage:\n";
  std::vector<std::string> names;
  for (const auto& axis : read) names.push_back(identifier(axis));
  for (const Arg& a : args) names.push_back(identifier(a.spec->name));
  names.push_back(cuda ? "s" : "stream");
  std::string line = " ";
  for (const auto& n : names) {
    if (line.size() + n.size() + 8 > 100) s += line + "\n", line = " ";
    line += " (void)" + n + ";";
  }
  s += line + "\n";
  s += "  return kNotImplemented;\n}\n";
  return s;
}

// A Python or Triton solution (docs/solutions.md, "Python and Triton solutions"): run() takes the
// definition's inputs then outputs (destination passing), reads the axes from the shapes with every
// other use checked, and raises NotImplementedError at the place where the outputs are computed.
std::string python_source(const TaskPack& pack, const std::string& language) {
  const Definition& d = pack.definition;
  const bool cuda = pack.backend == Backend::kCuda;
  const bool triton = language == "triton";
  const std::vector<Arg> args = arguments(d);
  std::string s = fmt::format(
      "\"\"\"A kda solution of {} ({}), scaffolded by `kda solution init`.\n\n"
      "It loads and checks its arguments; computing the outputs is yours (search for \"Compute\").\n"
      "kda calls run() with the definition's inputs, then its outputs: each tensor a view of kda's own\n"
      "buffers ({}),\neach scalar input a Python number. Write the outputs in place.\n"
      "See docs/solutions.md, \"Python and Triton solutions\".\n\nArguments, in the definition's order:\n",
      d.name, d.op_type.empty() ? "no op type" : d.op_type,
      cuda ? "torch tensors on the GPU; run() is called on kda's stream,\nwhich torch and Triton launches use"
           : "numpy arrays; the inputs are read-only");
  for (const Arg& a : args)
    s += fmt::format("  {} {}: {} {}{}\n", a.array == "inputs" ? "input " : "output", a.spec->name,
                     tensor::dtype_name(a.spec->dtype), a.spec->is_scalar() ? "scalar" : shape_text(*a.spec),
                     a.spec->description.empty() ? "" : " - " + a.spec->description);
  s += "\"\"\"\n\n";
  if (triton)
    s += "import torch\nimport triton\nimport triton.language as tl\n\n\n"
         "@triton.jit\ndef _kernel(n, BLOCK: tl.constexpr):\n"
         "    # Compute: one program's share of the outputs (add the tensors' pointers to the signature).\n"
         "    pid = tl.program_id(0)\n";
  else
    s += cuda ? "import torch\n" : "import numpy as np\n";
  std::vector<std::string> names;
  for (const Arg& a : args) names.push_back(identifier(a.spec->name));
  std::string params;
  for (const auto& n : names) params += (params.empty() ? "" : ", ") + n;
  s += fmt::format("\n\ndef run({}):\n", params);
  // Axes: each variable axis read from the first tensor that has it; every other use checked.
  std::string checks;
  s += "    # Axes, from the shapes:\n";
  for (const AxisUse& u : axis_uses(d, args)) {
    const std::string at = fmt::format("{}.shape[{}]", identifier(u.arg->spec->name), u.dim);
    if (u.kind == AxisUse::kConst)
      checks += fmt::format("    assert {} == {}, f\"{}: {{{}}}, the constant axis {} is {}\"\n", at, u.value, at, at,
                            u.axis, u.value);
    else if (u.kind == AxisUse::kRead)
      s += fmt::format("    {} = {}\n", identifier(u.axis), at);
    else
      checks += fmt::format("    assert {} == {}, f\"{}: {{{}}}, expected {} = {{{}}}\"\n", at, identifier(u.axis), at,
                            at, u.axis, identifier(u.axis));
  }
  s += checks;
  if (triton)
    s += "    # Compute: launch _kernel over a grid, e.g.\n"
         "    #   _kernel[(triton.cdiv(n, 1024),)](n, BLOCK=1024)\n";
  else
    s += cuda
             ? "    # Compute: write every element of every output with torch operations (y.copy_(...), out=...).\n"
             : "    # Compute: write every element of every output in place (y[...] = ..., np.multiply(..., out=y)).\n";
  s += fmt::format("    raise NotImplementedError(\"{}: the computation is not written yet (kda solution init)\")\n",
                   d.name);
  return s;
}

}  // namespace

Result<Solution> scaffold_solution(const TaskPack& pack, const ScaffoldOptions& options) {
  const bool cuda_pack = pack.backend == Backend::kCuda;
  const std::string language = options.language.empty() ? (cuda_pack ? "cuda" : "cpp") : options.language;
  const bool python = language == "python" || language == "triton";
  if (language != "cpp" && language != "cuda" && !python)
    return Status::bad_input("--language: kda scaffolds cpp, cuda, python or triton solutions, not '" + language + "'");
  if (language == "triton" && !cuda_pack)
    return Status::bad_input(
        fmt::format("--language triton: {} is a host pack; Triton runs on a GPU (use python: "
                    "numpy on the host)",
                    pack.root.string()));
  if (!python && cuda_pack != (language == "cuda"))
    return Status::bad_input(fmt::format("--language {}: {} is a {} pack; its solutions are {}", language,
                                         pack.root.string(), cuda_pack ? "CUDA" : "host",
                                         cuda_pack ? "cuda, python or triton" : "cpp or python"));
  Solution s;
  s.name = options.name.empty() ? pack.definition.name + "_" + language + "_draft" : options.name;
  s.definition = pack.definition.name;
  s.author = options.author;
  s.spec.language = language;
  s.spec.target_hardware = {cuda_pack ? "H200" : "cpu"};
  const std::string file = python ? "kernel.py" : cuda_pack ? "kernel.cu" : "kernel.cc";
  s.spec.entry_point = file + "::run";
  s.spec.destination_passing_style = true;
  if (python)
    s.spec.dependencies = language == "triton" ? std::vector<std::string>{"torch", "triton"}
                          : cuda_pack          ? std::vector<std::string>{"torch"}
                                               : std::vector<std::string>{"numpy"};
  s.sources.push_back({file, python ? python_source(pack, language) : source(pack, language, "run")});
  s.description = "Scaffolded by kda solution init: " +
                  std::string(python ? "loads and checks its arguments" : "builds and checks its arguments") +
                  "; the computation is still to be written.";
  return s;
}

}  // namespace kda::task
