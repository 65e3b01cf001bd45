// libkda-python.so: the embedded CPython of python_runtime.h. Its only kda dependency is that
// header; everything Python-side is kda_python.py.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "eval/protocol.h"
#include "runner/python_runtime.h"

namespace kda::runner {
namespace {

namespace stdfs = std::filesystem;

constexpr size_t kMaxErrorBytes = 4096;

// A new reference, or nullptr with the exception set; released by the destructor.
class Ref {
 public:
  explicit Ref(PyObject* p = nullptr) : p_(p) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  Ref(Ref&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  Ref& operator=(Ref&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Ref() { Py_XDECREF(p_); }
  PyObject* get() const { return p_; }
  PyObject* release() {
    PyObject* p = p_;
    p_ = nullptr;
    return p;
  }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  PyObject* p_;
};

// The pending exception as its traceback text (the last kMaxErrorBytes), cleared.
std::string take_exception() {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  if (type == nullptr) return "unknown Python error";
  PyErr_NormalizeException(&type, &value, &tb);
  Ref t(type), v(value), b(tb);
  std::string text;
  Ref mod(PyImport_ImportModule("traceback"));
  Ref lines(
      mod ? PyObject_CallMethod(mod.get(), "format_exception", "OOO", type, value ? value : Py_None, tb ? tb : Py_None)
          : nullptr);
  if (lines && PyList_Check(lines.get())) {
    for (Py_ssize_t i = 0; i < PyList_Size(lines.get()); ++i) {
      const char* s = PyUnicode_AsUTF8(PyList_GetItem(lines.get(), i));
      if (s != nullptr) text += s;
    }
  }
  PyErr_Clear();
  if (text.empty()) {
    Ref s(value != nullptr ? PyObject_Str(value) : nullptr);
    const char* c = s ? PyUnicode_AsUTF8(s.get()) : nullptr;
    text = c != nullptr ? c : "Python error";
    PyErr_Clear();
  }
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (text.size() > kMaxErrorBytes) text = "..." + text.substr(text.size() - kMaxErrorBytes);
  return text;
}

// The interpreter to embed: $KDA_PYTHON, which the evaluator sets (eval::python_interpreter: a
// virtual environment's python3 found on kda's own PATH), else "" (libpython's own prefix).
std::string program_name() {
  const char* p = std::getenv("KDA_PYTHON");
  return p != nullptr ? std::string(p) : std::string();
}

// numpy's name for a DLPack dtype; nullptr where numpy has none (bfloat16, fp8).
const char* numpy_dtype(DLDataType d) {
  if (d.lanes != 1) return nullptr;
  switch (d.code) {
    case kDLFloat: return d.bits == 16 ? "float16" : d.bits == 32 ? "float32" : d.bits == 64 ? "float64" : nullptr;
    case kDLInt:
      return d.bits == 8 ? "int8" : d.bits == 16 ? "int16" : d.bits == 32 ? "int32" : d.bits == 64 ? "int64" : nullptr;
    case kDLUInt:
      return d.bits == 8    ? "uint8"
             : d.bits == 16 ? "uint16"
             : d.bits == 32 ? "uint32"
             : d.bits == 64 ? "uint64"
                            : nullptr;
    case 6 /* kDLBool, DLPack 1.0 */: return d.bits == 8 ? "bool" : nullptr;
    default: return nullptr;
  }
}

int64_t element_count(const DLTensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

// The struct module's format of a 0-d host tensor's dtype (read at each call: a scalar input may
// change between input sets while the layout stays), or nullptr.
const char* scalar_format(DLDataType d) {
  if (d.lanes != 1) return nullptr;
  if (d.code == kDLFloat) return d.bits == 32 ? "=f" : d.bits == 64 ? "=d" : nullptr;
  if (d.code == kDLInt)
    return d.bits == 8 ? "=b" : d.bits == 16 ? "=h" : d.bits == 32 ? "=i" : d.bits == 64 ? "=q" : nullptr;
  if (d.code == kDLUInt)
    return d.bits == 8 ? "=B" : d.bits == 16 ? "=H" : d.bits == 32 ? "=I" : d.bits == 64 ? "=Q" : nullptr;
  if (d.code == 6 /* kDLBool, DLPack 1.0 */) return d.bits == 8 ? "=?" : nullptr;
  return nullptr;
}

void delete_managed(DLManagedTensor* m) { delete m; }

// A DLPack capsule ("dltensor") viewing `t`; its DLManagedTensor is freed by whoever consumes it,
// or by the capsule when nobody did.
PyObject* dlpack_capsule(const DLTensor& t) {
  auto* m = new DLManagedTensor{};
  m->dl_tensor = t;
  m->deleter = delete_managed;
  return PyCapsule_New(m, "dltensor", [](PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, "dltensor") == 0) return;  // consumed: renamed "used_dltensor"
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
  });
}

// _kda_guard: the C side of kda_python.py's audit hook. report(category, what) records a refusal
// where Python cannot take it back; the runtime turns the load or call into an error naming it.
std::vector<std::string>& refusals() {
  static std::vector<std::string> r;
  return r;
}

PyObject* guard_report(PyObject*, PyObject* args) {
  const char *category = nullptr, *what = nullptr;
  if (PyArg_ParseTuple(args, "ss", &category, &what) == 0) return nullptr;
  refusals().push_back(std::string(category) + ": " + what);
  Py_RETURN_NONE;
}

PyMethodDef kGuardMethods[] = {{"report", guard_report, METH_VARARGS, "records a refused operation"},
                               {nullptr, nullptr, 0, nullptr}};
PyModuleDef kGuardModule = {PyModuleDef_HEAD_INIT, "_kda_guard", nullptr, -1, kGuardMethods};
PyObject* guard_init() { return PyModule_Create(&kGuardModule); }

// The first refusal since the last look, as the runner's error (eval::kSandboxRefused), or "".
std::string take_refusal() {
  if (refusals().empty()) return {};
  std::string e = std::string(eval::kSandboxRefused) + refusals().front();
  if (refusals().size() > 1) e += " (and " + std::to_string(refusals().size() - 1) + " more)";
  refusals().clear();
  return e;
}

// A Python list of str as paths (other items skipped).
std::vector<stdfs::path> strings(PyObject* list) {
  std::vector<stdfs::path> out;
  for (Py_ssize_t i = 0; PyList_Check(list) && i < PyList_Size(list); ++i) {
    const char* s = PyUnicode_AsUTF8(PyList_GetItem(list, i));
    if (s != nullptr) out.emplace_back(s);
  }
  PyErr_Clear();
  return out;
}

class EmbeddedPython final : public PythonRuntime {
 public:
  std::string start(const stdfs::path& glue, const std::string& device, const stdfs::path& jit_dir) override {
    device_ = device;
    if (PyImport_AppendInittab("_kda_guard", guard_init) != 0) return "the _kda_guard module could not be added";
    // One thread for the numerical libraries' pools: the evaluator counts a call's new threads.
    for (const char* var : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"}) ::setenv(var, "1", 0);
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;  // the runner's signals stay the runner's
    config.parse_argv = 0;
    config.write_bytecode = 0;
    const std::string program = program_name();
    PyStatus st =
        program.empty() ? PyStatus_Ok() : PyConfig_SetBytesString(&config, &config.program_name, program.c_str());
    if (!PyStatus_Exception(st)) st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st))
      return std::string("the Python interpreter did not start: ") + (st.err_msg != nullptr ? st.err_msg : "?");
    PyObject* sys_path = PySys_GetObject("path");  // borrowed
    Ref dir(PyUnicode_FromString(glue.parent_path().c_str()));
    if (sys_path == nullptr || !dir || PyList_Insert(sys_path, 0, dir.get()) != 0) return take_exception();
    glue_ = Ref(PyImport_ImportModule(glue.stem().c_str()));
    if (!glue_) return "kda's Python glue " + glue.string() + ": " + take_exception();
    Ref paths(PyObject_CallMethod(glue_.get(), "setup", "ss", device.c_str(), jit_dir.c_str()));
    if (!paths) return (device == "cuda" ? "importing torch: " : "importing numpy: ") + take_exception();
    read_paths_ = strings(paths.get());
    Ref tools(PyObject_CallMethod(glue_.get(), "jit_tools", nullptr));
    if (!tools) return "the JIT's programs: " + take_exception();
    exec_paths_ = strings(tools.get());
    call_ = Ref(PyObject_GetAttrString(glue_.get(), "call"));
    if (!call_) return take_exception();
    return {};
  }

  std::vector<stdfs::path> read_paths() const override { return read_paths_; }
  std::vector<stdfs::path> exec_paths() const override { return exec_paths_; }

  std::string load(const stdfs::path& file, const std::string& function, bool returns_outputs,
                   const std::string& module) override {
    Ref roots(PyList_New(0));
    if (!roots) return take_exception();
    for (const auto& p : read_paths_) {
      Ref s(PyUnicode_FromString(p.c_str()));
      if (!s || PyList_Append(roots.get(), s.get()) != 0) return take_exception();
    }
    Ref r(PyObject_CallMethod(glue_.get(), "load", "ssiOs", file.c_str(), function.c_str(), returns_outputs ? 1 : 0,
                              roots.get(), module.c_str()));
    std::string refused = take_refusal();  // before the traceback is formatted: its file reads are kda's
    std::string error = r ? std::string() : take_exception();
    refusals().clear();
    return refused.empty() ? error : refused;
  }

  std::string bind(const std::vector<DLTensor>& inputs, const std::vector<DLTensor>& outputs) override {
    Ref in(PyList_New(0)), out(PyList_New(0));
    if (!in || !out) return take_exception();
    for (const DLTensor& t : inputs)
      if (std::string e = append_view(in.get(), t, false); !e.empty()) return e;
    for (const DLTensor& t : outputs)
      if (std::string e = append_view(out.get(), t, true); !e.empty()) return e;
    Ref r(PyObject_CallMethod(glue_.get(), "bind", "OO", in.get(), out.get()));
    return r ? std::string() : take_exception();
  }

  bool call(void* stream, std::string* error) override {
    Ref r(
        PyObject_CallFunction(call_.get(), "K", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(stream))));
    std::string refused = take_refusal();  // even when the solution caught the exception
    std::string raised = r ? std::string() : take_exception();
    refusals().clear();  // what formatting the traceback read is kda's, not the solution's
    if (!refused.empty()) raised = refused;
    if (raised.empty()) return true;
    *error = std::move(raised);
    return false;
  }

 private:
  // Appends ("scalar", memoryview, struct format), ("host", memoryview, dtype, shape) or ("dlpack",
  // capsule) for `t`.
  std::string append_view(PyObject* list, const DLTensor& t, bool writable) {
    Ref item;
    if (t.ndim == 0 && t.device.device_type == kDLCPU && !writable) {
      const char* format = scalar_format(t.dtype);
      if (format == nullptr)
        return "a scalar input of an unsupported dtype (code " + std::to_string(t.dtype.code) + ")";
      Ref memory(
          PyMemoryView_FromMemory(static_cast<char*>(t.data) + t.byte_offset, (t.dtype.bits + 7) / 8, PyBUF_READ));
      if (!memory) return take_exception();
      item = Ref(Py_BuildValue("(sOs)", "scalar", memory.get(), format));
    } else if (t.device.device_type == kDLCPU) {
      const char* dtype = numpy_dtype(t.dtype);
      if (dtype == nullptr)
        return "a host tensor of DLPack dtype code " + std::to_string(t.dtype.code) + " with " +
               std::to_string(t.dtype.bits) + " bits has no numpy dtype";
      const int64_t bytes = element_count(t) * ((t.dtype.bits + 7) / 8);
      Ref memory(PyMemoryView_FromMemory(static_cast<char*>(t.data) + t.byte_offset, bytes,
                                         writable ? PyBUF_WRITE : PyBUF_READ));
      Ref shape(PyTuple_New(t.ndim));
      if (!memory || !shape) return take_exception();
      for (int i = 0; i < t.ndim; ++i) PyTuple_SET_ITEM(shape.get(), i, PyLong_FromLongLong(t.shape[i]));
      item = Ref(Py_BuildValue("(sOsO)", "host", memory.get(), dtype, shape.get()));
    } else {
      Ref capsule(dlpack_capsule(t));
      if (!capsule) return take_exception();
      item = Ref(Py_BuildValue("(sO)", "dlpack", capsule.get()));
    }
    if (!item || PyList_Append(list, item.get()) != 0) return take_exception();
    return {};
  }

  std::string device_;
  Ref glue_;
  Ref call_;
  std::vector<stdfs::path> read_paths_;
  std::vector<stdfs::path> exec_paths_;
};

}  // namespace
}  // namespace kda::runner

extern "C" __attribute__((visibility("default"))) kda::runner::PythonRuntime* kda_python_runtime() {
  static kda::runner::EmbeddedPython* runtime = new kda::runner::EmbeddedPython();  // never torn down
  return runtime;
}
