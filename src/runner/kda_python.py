"""kda-runner's Python side: loads a python or triton solution and calls it on views of kda's arena.

The embedded interpreter (python_runtime.cc) imports this module before the sandbox is applied,
calls setup() to import the array library of the backend (numpy on the host, torch on CUDA), then,
confined, load() once, bind() per layout and call() per call. Nothing here copies an input: the
views it builds are the arena's own memory (the host's inputs read-only), so every check the
evaluator makes on the arena (guards, poison, re-checks, digests) sees what the solution did.
"""

import importlib.machinery
import importlib.util
import os
import shutil
import struct
import sys

_state = {}

# What a candidate's Python may not do, by audit event (PEP 578): the category each belongs to, as
# the import audit names them for compiled solutions (docs/integrity-gates.md). The hook is added
# before the candidate's module runs and cannot be removed; a refused event raises in the candidate
# and is reported to kda-runner through _kda_guard (C), which turns the load or call into a
# sandbox verdict even when the candidate catches the exception.
_REFUSED_EVENTS = {
    "subprocess.Popen": "process_spawn",
    "os.system": "process_spawn",
    "os.exec": "process_spawn",
    "os.posix_spawn": "process_spawn",
    "os.spawn": "process_spawn",
    "os.fork": "process_spawn",
    "os.forkpty": "process_spawn",
    "os.kill": "process_spawn",
    "socket.connect": "network",
    "socket.bind": "network",
    "socket.getaddrinfo": "network",
    "ctypes.dlopen": "dynamic_loading",
    "ctypes.dlsym": "dynamic_loading",
    "ctypes.cdata": "raw_memory",
    "ctypes.string_at": "raw_memory",
    "ctypes.wstring_at": "raw_memory",
    "mmap.__new__": "raw_memory",
    "os.putenv": "environment",
    "os.unsetenv": "environment",
}

# Environment variables a candidate still sees: the runner's own minimal environment, less anything
# that could carry a secret (runner_client.cc gives runners PATH, LANG and a few loader variables).
# A JIT-compiling solution (triton) also keeps what _jit_environment sets.
_KEPT_ENVIRONMENT = ("PATH", "LANG")

# System libraries a JIT-compiling solution's runtime may load through ctypes by name (Triton reads the
# GPU's clocks through NVML at a launch), with the symbols it may look up there: prefixes of read-only
# queries, never a setter (nvmlDeviceSet*, which could pin clocks under the timing).
_JIT_SYSTEM_LIBRARIES = {
    "libnvidia-ml.so.1": ("nvmlInit", "nvmlShutdown", "nvmlErrorString", "nvmlDeviceGet", "nvmlSystemGet"),
}

# The programs a JIT compiler may run, by name on PATH (Triton's C compiler for its launchers, and
# what gcc itself runs); Triton's own ptxas and friends are added from its package (_jit_tools).
_JIT_PROGRAMS = ("cc", "gcc", "clang", "as", "ld")


def _jit_environment(jit_dir):
    """Where a JIT compiler keeps its files: Triton's cache, home and temporary files, all under the
    solution's own JIT directory (the one place its sandbox may write)."""
    tmp = os.path.join(jit_dir, "tmp")
    os.makedirs(tmp, exist_ok=True)
    return {
        "TRITON_CACHE_DIR": os.path.join(jit_dir, "triton"),
        "TRITON_HOME": jit_dir,
        "HOME": jit_dir,
        "TMPDIR": tmp,
    }


def _jit_tools():
    """The real paths of the programs a JIT-compiling solution may start: _JIT_PROGRAMS found on
    PATH, and the binaries Triton ships for its backend (ptxas, cuobjdump, nvdisasm)."""
    tools = set()
    for name in _JIT_PROGRAMS:
        found = shutil.which(name)
        if found:
            tools.add(os.path.realpath(found))
    try:
        import triton

        bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
        if os.path.isdir(bindir):
            tools.update(os.path.realpath(os.path.join(bindir, f)) for f in os.listdir(bindir))
    except ImportError:
        pass
    return sorted(tools)


def _jit_libraries():
    """The directories whose shared objects a JIT-compiling solution may load through ctypes besides
    its JIT directory: Triton's own package (its backend's helper libraries)."""
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.origin:
        return []
    return [os.path.dirname(spec.origin)]


def _prime_triton():
    """Triton's one-time work, done by kda before the sandbox so that no candidate call pays for it:
    its driver's C helpers built (or read from the cache) and the ptxas version its cache keys
    include (a subprocess, remembered in-process). A Triton without these names is left to do them
    at the first call, confined."""
    try:
        from triton.runtime import driver

        driver.active.utils  # noqa: B018 (the attribute builds or loads the helpers)
    except Exception:  # noqa: BLE001 (no triton, or another layout: the solution's import says so)
        return
    try:
        from triton.backends.nvidia import compiler

        compiler.get_ptxas_version()
    except Exception:  # noqa: BLE001
        pass


def _install_guard(allowed_roots, jit=None):
    """Refuses the events above, and every open() for writing or of a file outside `allowed_roots`
    (the interpreter's directories and the solution's own). With `jit` ({"dir", "tools",
    "libraries"}), files under jit["dir"] may also be written, subprocess.Popen may start the
    programs in jit["tools"] (their real paths), and ctypes may load (and look symbols up in) the
    shared objects under jit["dir"] or jit["libraries"] (the launchers and helpers the JIT compiler
    builds there), nothing else."""
    import _kda_guard

    report = _kda_guard.report
    roots = tuple(os.path.join(os.path.realpath(r), "") for r in allowed_roots)
    writable = (os.path.join(os.path.realpath(jit["dir"]), ""),) if jit else ()
    loadable = writable + tuple(os.path.join(os.path.realpath(d), "") for d in (jit or {}).get("libraries", ()))
    tools = frozenset(jit["tools"]) if jit else frozenset()
    loaded = set()  # the real paths of the shared objects ctypes was let load
    realpath = os.path.realpath
    which = shutil.which
    isinstance_ = isinstance

    def refuse(category, what):
        report(category, what)
        raise PermissionError(f"kda sandbox: {category}: {what} is not allowed in a solution")

    def jit_library(name):
        if not loadable or not isinstance_(name, (str, bytes)):
            return None
        name = os.fsdecode(name)
        if name in _JIT_SYSTEM_LIBRARIES:
            return name
        full = realpath(name)
        return full if (full + os.sep).startswith(loadable) else None

    def jit_symbol(library, symbol):
        allowed = _JIT_SYSTEM_LIBRARIES.get(library)
        if allowed is None:
            return True  # a library the JIT built: any of its symbols
        return isinstance_(symbol, str) and symbol.startswith(allowed)

    def allowed_program(args):
        executable, argv = args[0], args[1]
        if executable is None:
            executable = argv if isinstance_(argv, (str, bytes)) else (argv[0] if argv else None)
        if executable is None:
            return False
        name = os.fsdecode(executable)
        found = name if os.sep in name else which(name)
        return found is not None and realpath(found) in tools

    def hook(event, args):
        if event == "subprocess.Popen" and tools and allowed_program(args):
            return
        if event == "os.posix_spawn" and tools and realpath(os.fsdecode(args[0])) in tools:
            return
        if event == "ctypes.dlopen":
            full = jit_library(args[0])
            if full is not None:
                loaded.add(full)
                return
        if event == "ctypes.dlsym" and loaded:
            library = jit_library(getattr(args[0], "_name", None))
            if library in loaded and jit_symbol(library, args[1]):
                return
        category = _REFUSED_EVENTS.get(event)
        if category is not None:
            shown = f"{event}{tuple(a if isinstance_(a, (str, bytes, int)) else getattr(a, '_name', a) for a in args)!r}"[:200] if event.startswith("ctypes.dl") and args else event
            refuse(category, shown)
        if event == "open":
            path, mode, flags = args[0], args[1], args[2]
            full = realpath(os.fsdecode(path)) if isinstance_(path, (str, bytes)) else None
            if full is not None and writable and ((full + os.sep).startswith(writable) or full == os.devnull):
                return  # the JIT directory, and /dev/null (subprocess.DEVNULL for the JIT's compilers)
            if isinstance_(mode, str) and any(c in mode for c in "wax+"):
                refuse("file_io", f"open({path!r}, {mode!r})")
            if isinstance_(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND):
                refuse("file_io", f"os.open({path!r}) for writing")
            if full is not None and not any((full + os.sep).startswith(r) for r in roots):
                refuse("file_io", f"open({full!r})")

    sys.addaudithook(hook)


def setup(device, jit_dir=""):
    """Imports what calls need and says which directories the sandbox must leave readable. With
    `jit_dir` (a triton solution), Triton's files go there and its one-time work is done now."""
    sys.dont_write_bytecode = True
    _state["device"] = device
    if jit_dir:
        env = _jit_environment(jit_dir)
        os.environ.update(env)
        _state["jit"] = {"dir": jit_dir, "environment": env, "tools": _jit_tools(), "libraries": _jit_libraries()}
    if device == "cuda":
        import torch

        torch.cuda.init()
        # torch's own lazy state (the caching allocator, its threads) is created now, before the
        # first measured call, so that no call starts a thread the evaluator would count.
        torch.zeros(1, device="cuda").add_(1)
        torch.cuda.synchronize()
        _state["torch"] = torch
        if jit_dir:
            _prime_triton()
    else:
        import numpy

        _state["numpy"] = numpy
    # kda's own directory (the build or install directory, where this file lies) served only this
    # import: it leaves sys.path and is not among the directories a solution may read.
    own = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != own]
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots.update(p for p in sys.path if p)
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path:
            roots.add(os.path.dirname(path))
    roots.discard(own)
    return sorted(r for r in roots if os.path.isdir(r))


def jit_tools():
    """The programs the sandbox must let a JIT-compiling solution run (empty for any other)."""
    return list(_state["jit"]["tools"]) if "jit" in _state else []


def load(path, function, returns_outputs, read_roots, module=""):
    """Imports the solution's entry file as a module (its directory first on sys.path, so that the
    solution's other files import by name) and takes its entry function. With `module` (binding
    "torch"), `path` is a compiled extension module of that name (its PyInit_<module>), imported the
    same way; its entry function is the attribute PYBIND11_MODULE defined. Before the candidate's
    code runs: the environment is cut to _KEPT_ENVIRONMENT and the audit hook is installed."""
    directory = os.path.dirname(path)
    jit = _state.get("jit")
    kept = _KEPT_ENVIRONMENT + (tuple(jit["environment"]) if jit else ())
    for name in list(os.environ):
        if name not in kept:
            del os.environ[name]
    _install_guard(list(read_roots) + [directory] + ([jit["dir"]] if jit else []), jit)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    name = module or "kda_solution_" + os.path.splitext(os.path.basename(path))[0]
    loader = importlib.machinery.ExtensionFileLoader(name, path) if module else None  # None: by the suffix
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    fn = getattr(module, function, None)
    if fn is None:
        raise AttributeError(f"{os.path.basename(path)} defines no '{function}'")
    if not callable(fn):
        raise TypeError(f"{os.path.basename(path)}::{function} is not callable")
    _state["fn"] = fn
    _state["returns_outputs"] = bool(returns_outputs)


def _host_view(memory, dtype, shape):
    np = _state["numpy"]
    return np.frombuffer(memory, dtype=np.dtype(dtype)).reshape(shape)


def bind(inputs, outputs):
    """Each item is ("scalar", memoryview, struct format), ("host", memoryview, dtype, shape) or
    ("dlpack", capsule). Builds the tensor arguments once per layout; scalars are read at each call
    (an input set may change them while the layout stays)."""

    def view(item):
        kind = item[0]
        if kind == "scalar":
            return None
        if kind == "host":
            return _host_view(item[1], item[2], item[3])
        return _state["torch"].utils.dlpack.from_dlpack(item[1])

    _state["args"] = [view(i) for i in inputs]
    _state["scalars"] = [(k, i[1], i[2]) for k, i in enumerate(inputs) if i[0] == "scalar"]
    _state["outs"] = [view(o) for o in outputs]
    _state["stream"] = None


def _arguments():
    args = list(_state["args"])
    for k, memory, fmt in _state["scalars"]:
        args[k] = struct.unpack(fmt, memory)[0]
    return args


def _stream(pointer):
    torch = _state["torch"]
    s = _state.get("stream")
    if s is None or s.cuda_stream != pointer:
        s = torch.cuda.ExternalStream(pointer) if pointer else torch.cuda.default_stream()
        _state["stream"] = s
    return s


def _store(results):
    """Non-destination-passing: what the function returned goes into the output slots, checked."""
    outs = _state["outs"]
    if not isinstance(results, (tuple, list)):
        results = (results,)
    if len(results) != len(outs):
        raise ValueError(f"the function returned {len(results)} value(s); the definition has {len(outs)} output(s)")
    for k, (out, value) in enumerate(zip(outs, results)):
        shape = tuple(getattr(value, "shape", ()))
        if shape != tuple(out.shape):
            raise ValueError(f"output {k}: the function returned shape {shape}, the definition's is {tuple(out.shape)}")
        if _state["device"] == "cuda":
            out.copy_(value)
        else:
            _state["numpy"].copyto(out, value, casting="same_kind")


def call(stream):
    fn = _state["fn"]
    args = _arguments()
    if _state["device"] == "cuda":
        with _state["torch"].cuda.stream(_stream(stream)):
            results = fn(*args) if _state["returns_outputs"] else fn(*args, *_state["outs"])
            if _state["returns_outputs"]:
                _store(results)
        return
    if _state["returns_outputs"]:
        _store(fn(*args))
    else:
        fn(*args, *_state["outs"])
