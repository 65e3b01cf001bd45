#include "elf/audit.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

namespace kda::elf {

namespace {

enum class Match { kExact, kPrefix };

struct Rule {
  const char* category;
  Match match;
  const char* pattern;
};

// Imports (undefined dynamic symbols) that a kernel has no business calling. Library families
// (cuBLAS, cuDNN, ...) are matched separately so that a policy can allow them.
constexpr Rule kImportRules[] = {
    // Work outside the harness stream escapes the timing window (T1).
    {"streams", Match::kPrefix, "cudaStreamCreate"},
    {"streams", Match::kPrefix, "cuStreamCreate"},
    // Events can re-record or disable the harness's timing events (T4).
    {"events", Match::kPrefix, "cudaEvent"},
    {"events", Match::kPrefix, "cuEvent"},
    {"events", Match::kExact, "cudaStreamWaitEvent"},
    {"events", Match::kPrefix, "cuStreamWaitEvent"},
    // Threads finish work after the call returns (T2).
    {"threads", Match::kExact, "pthread_create"},
    {"threads", Match::kExact, "clone"},
    {"threads", Match::kExact, "__clone"},
    {"threads", Match::kExact, "clone3"},
    {"threads", Match::kExact, "thrd_create"},
    {"threads", Match::kPrefix, "_ZNSt6thread15_M_start_thread"},
    {"threads", Match::kPrefix, "GOMP_"},
    {"threads", Match::kPrefix, "omp_"},
    {"threads", Match::kPrefix, "__kmpc_"},
    // Loading code or looking up symbols at run time hides what the binary calls (S2, S13).
    {"dynamic_loading", Match::kExact, "dlopen"},
    {"dynamic_loading", Match::kExact, "dlmopen"},
    {"dynamic_loading", Match::kExact, "dlsym"},
    {"dynamic_loading", Match::kExact, "dlvsym"},
    {"dynamic_loading", Match::kExact, "dlinfo"},
    {"dynamic_loading", Match::kExact, "dladdr"},
    {"dynamic_loading", Match::kExact, "dladdr1"},
    {"dynamic_loading", Match::kExact, "dl_iterate_phdr"},
    // Runtime compilation and module loading bring in kernels the audit never saw (S2).
    {"runtime_compilation", Match::kPrefix, "nvrtc"},
    {"runtime_compilation", Match::kPrefix, "nvJitLink"},
    {"runtime_compilation", Match::kPrefix, "cuModuleLoad"},
    {"runtime_compilation", Match::kPrefix, "cuLibraryLoad"},
    {"runtime_compilation", Match::kPrefix, "cudaLibraryLoad"},
    {"runtime_compilation", Match::kPrefix, "cuLinkCreate"},
    // Any system call, unfiltered by name.
    {"raw_syscall", Match::kExact, "syscall"},
    // Writable or newly executable code: GOT/text patching, JIT (T3).
    {"executable_memory", Match::kExact, "mprotect"},
    {"executable_memory", Match::kExact, "pkey_mprotect"},
    {"executable_memory", Match::kExact, "mmap"},
    {"executable_memory", Match::kExact, "mmap64"},
    {"executable_memory", Match::kExact, "mremap"},
    {"executable_memory", Match::kExact, "memfd_create"},
    // Reading or writing another process, or the harness's own memory by another route (S13, T3).
    {"process_inspection", Match::kExact, "ptrace"},
    {"process_inspection", Match::kExact, "process_vm_readv"},
    {"process_inspection", Match::kExact, "process_vm_writev"},
    // New processes escape every per-process gate.
    {"process_spawn", Match::kExact, "fork"},
    {"process_spawn", Match::kExact, "_Fork"},
    {"process_spawn", Match::kExact, "vfork"},
    {"process_spawn", Match::kPrefix, "exec"},
    {"process_spawn", Match::kExact, "fexecve"},
    {"process_spawn", Match::kPrefix, "posix_spawn"},
    {"process_spawn", Match::kExact, "system"},
    {"process_spawn", Match::kExact, "popen"},
    {"process_spawn", Match::kExact, "daemon"},
    // Changing how the process is run or confined.
    {"process_control", Match::kExact, "prctl"},
    {"process_control", Match::kExact, "setrlimit"},
    {"process_control", Match::kExact, "prlimit"},
    {"process_control", Match::kExact, "prlimit64"},
    {"process_control", Match::kExact, "unshare"},
    {"process_control", Match::kExact, "setns"},
    {"process_control", Match::kExact, "personality"},
    {"process_control", Match::kExact, "chroot"},
    {"process_control", Match::kExact, "mount"},
    {"process_control", Match::kExact, "sched_setaffinity"},
    {"process_control", Match::kExact, "sched_setscheduler"},
    {"process_control", Match::kExact, "setpriority"},
    {"process_control", Match::kExact, "pthread_setaffinity_np"},
    // Signal handlers can swallow crashes; signals and timers can hit the harness.
    {"signals", Match::kExact, "signal"},
    {"signals", Match::kExact, "sigaction"},
    {"signals", Match::kExact, "__sysv_signal"},
    {"signals", Match::kExact, "sysv_signal"},
    {"signals", Match::kExact, "bsd_signal"},
    {"signals", Match::kExact, "kill"},
    {"signals", Match::kExact, "tgkill"},
    {"signals", Match::kExact, "tkill"},
    {"signals", Match::kExact, "sigqueue"},
    {"signals", Match::kExact, "alarm"},
    {"signals", Match::kExact, "setitimer"},
    {"signals", Match::kExact, "timer_create"},
    {"signals", Match::kExact, "siglongjmp"},
    {"signals", Match::kExact, "longjmp"},
    {"signals", Match::kExact, "_longjmp"},
    // Files: reading expected outputs or task files, leaving state behind (S13, S12).
    {"file_io", Match::kExact, "open"},
    {"file_io", Match::kExact, "open64"},
    {"file_io", Match::kExact, "openat"},
    {"file_io", Match::kExact, "openat64"},
    {"file_io", Match::kExact, "__open_2"},
    {"file_io", Match::kExact, "__open64_2"},
    {"file_io", Match::kExact, "__openat_2"},
    {"file_io", Match::kExact, "creat"},
    {"file_io", Match::kExact, "creat64"},
    {"file_io", Match::kExact, "fopen"},
    {"file_io", Match::kExact, "fopen64"},
    {"file_io", Match::kExact, "freopen"},
    {"file_io", Match::kExact, "freopen64"},
    {"file_io", Match::kExact, "fdopen"},
    {"file_io", Match::kExact, "opendir"},
    {"file_io", Match::kExact, "fdopendir"},
    {"file_io", Match::kExact, "scandir"},
    {"file_io", Match::kExact, "stat"},
    {"file_io", Match::kExact, "stat64"},
    {"file_io", Match::kExact, "lstat"},
    {"file_io", Match::kExact, "lstat64"},
    {"file_io", Match::kExact, "fstatat"},
    {"file_io", Match::kExact, "fstatat64"},
    {"file_io", Match::kExact, "statx"},
    {"file_io", Match::kExact, "__xstat"},
    {"file_io", Match::kExact, "__xstat64"},
    {"file_io", Match::kExact, "__lxstat"},
    {"file_io", Match::kExact, "__lxstat64"},
    {"file_io", Match::kExact, "access"},
    {"file_io", Match::kExact, "faccessat"},
    {"file_io", Match::kExact, "readlink"},
    {"file_io", Match::kExact, "readlinkat"},
    {"file_io", Match::kExact, "realpath"},
    {"file_io", Match::kExact, "unlink"},
    {"file_io", Match::kExact, "unlinkat"},
    {"file_io", Match::kExact, "rename"},
    {"file_io", Match::kExact, "renameat"},
    {"file_io", Match::kExact, "renameat2"},
    {"file_io", Match::kExact, "mkdir"},
    {"file_io", Match::kExact, "mkdirat"},
    {"file_io", Match::kExact, "rmdir"},
    {"file_io", Match::kExact, "truncate"},
    {"file_io", Match::kExact, "symlink"},
    {"file_io", Match::kExact, "link"},
    {"file_io", Match::kExact, "mkfifo"},
    {"file_io", Match::kExact, "mknod"},
    {"file_io", Match::kExact, "chmod"},
    {"file_io", Match::kExact, "chown"},
    {"file_io", Match::kExact, "mkstemp"},
    {"file_io", Match::kExact, "tmpfile"},
    {"file_io", Match::kPrefix, "_ZNSt13basic_filebuf"},
    {"file_io", Match::kPrefix, "_ZNSt14basic_ofstream"},
    {"file_io", Match::kPrefix, "_ZNSt14basic_ifstream"},
    {"file_io", Match::kPrefix, "_ZNSt13basic_fstream"},
    // Raw descriptor I/O can forge records on the harness's pipes (T3, kernelbot cheat-fd).
    {"fd_io", Match::kExact, "write"},
    {"fd_io", Match::kExact, "pwrite"},
    {"fd_io", Match::kExact, "pwrite64"},
    {"fd_io", Match::kExact, "writev"},
    {"fd_io", Match::kExact, "pwritev"},
    {"fd_io", Match::kExact, "read"},
    {"fd_io", Match::kExact, "pread"},
    {"fd_io", Match::kExact, "pread64"},
    {"fd_io", Match::kExact, "readv"},
    {"fd_io", Match::kExact, "dup"},
    {"fd_io", Match::kExact, "dup2"},
    {"fd_io", Match::kExact, "dup3"},
    {"fd_io", Match::kExact, "sendfile"},
    {"fd_io", Match::kExact, "splice"},
    {"fd_io", Match::kExact, "vmsplice"},
    {"fd_io", Match::kExact, "tee"},
    {"fd_io", Match::kExact, "ioctl"},
    // The environment: the harness never passes secrets there; reading it is probing (X4).
    {"environment", Match::kExact, "getenv"},
    {"environment", Match::kExact, "secure_getenv"},
    {"environment", Match::kExact, "__libc_secure_getenv"},
    {"environment", Match::kExact, "environ"},
    {"environment", Match::kExact, "__environ"},
    {"environment", Match::kExact, "_environ"},
    {"environment", Match::kExact, "setenv"},
    {"environment", Match::kExact, "putenv"},
    {"environment", Match::kExact, "unsetenv"},
    {"environment", Match::kExact, "clearenv"},
    // Sockets.
    {"network", Match::kExact, "socket"},
    {"network", Match::kExact, "socketpair"},
    {"network", Match::kExact, "connect"},
    {"network", Match::kExact, "bind"},
    {"network", Match::kExact, "listen"},
    {"network", Match::kExact, "accept"},
    {"network", Match::kExact, "accept4"},
    {"network", Match::kExact, "send"},
    {"network", Match::kExact, "sendto"},
    {"network", Match::kExact, "sendmsg"},
    {"network", Match::kExact, "sendmmsg"},
    {"network", Match::kExact, "recv"},
    {"network", Match::kExact, "recvfrom"},
    {"network", Match::kExact, "recvmsg"},
    {"network", Match::kExact, "getaddrinfo"},
    {"network", Match::kExact, "gethostbyname"},
    // The profiler the harness uses for attestation; the candidate must not touch it.
    {"cupti", Match::kPrefix, "cupti"},
    // CUDA graphs and stream capture (policy: graphs).
    {"graphs", Match::kPrefix, "cudaGraph"},
    {"graphs", Match::kPrefix, "cuGraph"},
    {"graphs", Match::kPrefix, "cudaStreamBeginCapture"},
    {"graphs", Match::kPrefix, "cuStreamBeginCapture"},
    {"graphs", Match::kPrefix, "cudaStreamEndCapture"},
    {"graphs", Match::kPrefix, "cuStreamEndCapture"},
    // L2 persistence and device limits survive the cold-cache flush (T5).
    {"l2_persistence", Match::kExact, "cudaCtxResetPersistingL2Cache"},
    {"l2_persistence", Match::kExact, "cuCtxResetPersistingL2Cache"},
    {"l2_persistence", Match::kExact, "cudaDeviceSetLimit"},
    {"l2_persistence", Match::kPrefix, "cuCtxSetLimit"},
    {"l2_persistence", Match::kExact, "cudaStreamSetAttribute"},
    {"l2_persistence", Match::kPrefix, "cuStreamSetAttribute"},
    // Host callbacks run after the call returns (S11).
    {"host_callbacks", Match::kExact, "cudaLaunchHostFunc"},
    {"host_callbacks", Match::kPrefix, "cuLaunchHostFunc"},
    {"host_callbacks", Match::kExact, "cudaStreamAddCallback"},
    {"host_callbacks", Match::kPrefix, "cuStreamAddCallback"},
    // Driver entry points give any driver function without an import (S2, T1).
    // cudaGetDriverEntryPoint* is not here: kda-runner defines it, hands out only the tensor-map
    // encoders and reports every other lookup at run time (src/runner/entry_point_guard.h).
    // cuGetProcAddress would be the driver's own, which nothing interposes.
    {"driver_entry_point", Match::kPrefix, "cuGetProcAddress"},
    // The runtime's other ways to driver functions, which the runner does not interpose.
    {"driver_entry_point", Match::kExact, "__cudaGetProcAddress"},
    {"driver_entry_point", Match::kExact, "cudaGetExportTable"},
};

// Kernel library families: symbol prefix, DT_NEEDED base name, and the policy name allowing it.
struct LibraryFamily {
  const char* symbol_prefix;
  const char* soname_prefix;
  const char* policy_name;
};
constexpr LibraryFamily kLibraryFamilies[] = {
    {"cublasLt", "libcublasLt.so", "cublas"}, {"cublas", "libcublas.so", "cublas"},
    {"cudnn", "libcudnn", "cudnn"},           {"nccl", "libnccl.so", "nccl"},
    {"cufft", "libcufft", "cufft"},           {"curand", "libcurand.so", "curand"},
    {"cusparse", "libcusparse", "cusparse"},  {"cusolver", "libcusolver", "cusolver"},
    {"cutensor", "libcutensor", "cutensor"},
};

// Libraries any candidate may need: the C/C++ runtimes, the CUDA runtime and driver.
constexpr const char* kBaseLibraries[] = {
    "libc.so",    "libm.so",       "libstdc++.so", "libgcc_s.so", "libcudart.so",
    "libcuda.so", "libpthread.so", "librt.so",     "ld-linux",    "linux-vdso.so",
};

// Threading runtimes (DT_NEEDED) covered by the threads switch.
constexpr const char* kThreadLibraries[] = {"libgomp.so", "libiomp5.so", "libomp.so", "libtbb.so"};

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// "libfoo.so.1.2" -> "foo".
std::string base_name(const std::string& soname) {
  std::string s = soname;
  if (starts_with(s, "lib")) s = s.substr(3);
  auto dot = s.find(".so");
  if (dot != std::string::npos) s = s.substr(0, dot);
  return s;
}

bool category_allowed(const std::string& category, const ImportPolicy& p) {
  if (category == "streams" || category == "events") return p.allow_streams;
  if (category == "threads") return p.allow_threads;
  if (category == "graphs") return p.allow_graphs;
  if (category == "runtime_compilation") {
    return std::find(p.allowed_libraries.begin(), p.allowed_libraries.end(), "nvrtc") != p.allowed_libraries.end();
  }
  return false;
}

bool library_allowed(const std::string& policy_name, const ImportPolicy& p) {
  for (const auto& a : p.allowed_libraries)
    if (lower(a) == lower(policy_name)) return true;
  return false;
}

const std::map<std::string, std::string>& reasons() {
  static const std::map<std::string, std::string> m = [] {
    std::map<std::string, std::string> r;
    for (const auto& c : audit_categories()) r[c.id] = c.description;
    return r;
  }();
  return m;
}

// Names the C and math libraries export (read from the libc this process runs with), so that a
// candidate defining one of them is caught whatever the name. A short built-in list backs it up.
const std::set<std::string>& c_library_names() {
  static const std::set<std::string> names = [] {
    std::set<std::string> out = {"memcmp", "bcmp",   "memcpy", "memmove", "memset",  "strcmp",        "strncmp",
                                 "strlen", "malloc", "free",   "calloc",  "realloc", "clock_gettime", "gettimeofday",
                                 "time",   "clock",  "rand",   "abort",   "exit",    "_exit",         "getenv",
                                 "sqrt",   "sqrtf",  "exp",    "expf",    "log",     "logf",          "pthread_create",
                                 "dlopen", "dlsym",  "qsort"};
    Dl_info dl{};
    if (::dladdr(reinterpret_cast<void*>(&std::memcmp), &dl) == 0 || dl.dli_fname == nullptr) return out;
    std::filesystem::path libc(dl.dli_fname);
    for (const auto& lib : {libc, libc.parent_path() / "libm.so.6"}) {
      auto info = read_elf_file(lib);
      if (!info.ok()) continue;
      for (const auto& e : info->exports)
        if (e.type == SymbolType::kFunc || e.type == SymbolType::kIfunc || e.type == SymbolType::kObject)
          out.insert(e.name);
    }
    return out;
  }();
  return names;
}

}  // namespace

bool AuditReport::has(const std::string& category) const {
  return std::any_of(findings.begin(), findings.end(), [&](const auto& f) { return f.category == category; });
}

std::string AuditReport::summary() const {
  std::string out;
  for (const auto& f : findings) {
    if (!out.empty()) out += "; ";
    out += f.category + ": " + f.symbol;
  }
  return out;
}

const std::vector<AuditCategory>& audit_categories() {
  static const std::vector<AuditCategory> k = {
      {"streams", "creates CUDA streams: work outside the harness stream escapes the timing window", "allow_streams"},
      {"events", "uses CUDA events: can re-record or disable the harness's timing events", "allow_streams"},
      {"threads", "starts host threads: work can finish after the call returns", "allow_threads"},
      {"dynamic_loading", "loads code or looks up symbols at run time, hiding what it calls", ""},
      {"runtime_compilation", "compiles or loads GPU modules at run time: kernels the audit never saw",
       "allowed_libraries: nvrtc"},
      {"raw_syscall", "makes raw system calls (syscall), bypassing every name-based check", ""},
      {"executable_memory",
       "maps or re-protects memory (or needs an executable stack / text relocations): code patching", ""},
      {"process_inspection", "reads or writes other processes' memory (ptrace, process_vm_*)", ""},
      {"process_spawn", "starts processes (fork, exec*, posix_spawn, system, popen)", ""},
      {"process_control", "changes process limits, namespaces, scheduling or affinity", ""},
      {"signals", "installs signal handlers, sends signals or arms timers (can hide crashes or hit the harness)", ""},
      {"file_io", "opens, inspects or changes files (could read expected outputs or leave state)", ""},
      {"fd_io", "raw descriptor I/O (write, read, dup...): could forge records on the harness's pipes", ""},
      {"network", "uses sockets", ""},
      {"environment", "reads or changes environment variables (the harness never passes anything there)", ""},
      {"cupti", "uses CUPTI, the profiler the harness attests launches with", ""},
      {"kernel_library", "calls a kernel library (cuBLAS, cuDNN, NCCL, ...) the task does not allow",
       "allowed_libraries"},
      {"unexpected_library", "needs a shared library outside the C/C++/CUDA runtimes and the task's allowlist",
       "allowed_libraries"},
      {"graphs", "uses CUDA graphs or stream capture", "allow_graphs"},
      {"l2_persistence", "sets L2 persistence, device limits or stream attributes that survive the cold-cache flush",
       ""},
      {"host_callbacks", "enqueues host callbacks that run after the call returns", ""},
      {"driver_entry_point",
       "fetches driver functions by name (cuGetProcAddress; cudaGetDriverEntryPoint for anything but "
       "the tensor-map encoders, refused and reported at run time)",
       ""},
      {"static_cudart", "exports CUDA runtime/driver API symbols: a static runtime embedded or an interposer", ""},
      {"interposition", "exports a function or object the C or math library also defines (memcmp, clock_gettime...)",
       ""},
  };
  return k;
}

AuditReport audit_imports(const ElfInfo& info, const ImportPolicy& policy) {
  AuditReport report;
  auto add = [&](const std::string& symbol, const std::string& category, const std::string& detail = "") {
    std::string reason = reasons().at(category);
    if (!detail.empty()) reason += " (" + detail + ")";
    report.findings.push_back({symbol, category, reason});
  };

  // Libraries the loader will pull in.
  for (const auto& lib : info.needed) {
    bool known = false;
    for (const auto& fam : kLibraryFamilies) {
      if (starts_with(lib, fam.soname_prefix)) {
        known = true;
        if (!library_allowed(fam.policy_name, policy)) add(lib, "kernel_library", "DT_NEEDED " + lib);
        break;
      }
    }
    if (known) continue;
    for (const char* t : kThreadLibraries) {
      if (starts_with(lib, t)) {
        known = true;
        if (!policy.allow_threads && !library_allowed(base_name(lib), policy)) add(lib, "threads", "DT_NEEDED " + lib);
        break;
      }
    }
    if (known) continue;
    if (starts_with(lib, "libnvrtc") || starts_with(lib, "libnvJitLink")) {
      if (!category_allowed("runtime_compilation", policy)) add(lib, "runtime_compilation", "DT_NEEDED " + lib);
      continue;
    }
    if (starts_with(lib, "libcupti")) {
      add(lib, "cupti", "DT_NEEDED " + lib);
      continue;
    }
    if (starts_with(lib, "libdl.so")) continue;  // its functions are flagged by name
    bool base = std::any_of(std::begin(kBaseLibraries), std::end(kBaseLibraries),
                            [&](const char* b) { return starts_with(lib, b); });
    if (!base && !library_allowed(base_name(lib), policy)) add(lib, "unexpected_library", "DT_NEEDED " + lib);
  }
  for (const auto& path : info.rpath)
    if (std::find(policy.allowed_runpaths.begin(), policy.allowed_runpaths.end(), path) ==
        policy.allowed_runpaths.end())
      add(path, "dynamic_loading", "DT_RUNPATH/DT_RPATH " + path);

  // Imports.
  for (const auto& sym : info.imports) {
    const std::string& name = sym.name;
    bool flagged = false;
    for (const auto& fam : kLibraryFamilies) {
      if (starts_with(name, fam.symbol_prefix)) {
        if (!library_allowed(fam.policy_name, policy)) add(name, "kernel_library");
        flagged = true;
        break;
      }
    }
    if (flagged) continue;
    for (const auto& rule : kImportRules) {
      bool hit = rule.match == Match::kExact ? name == rule.pattern : starts_with(name, rule.pattern);
      if (!hit) continue;
      if (!category_allowed(rule.category, policy)) add(name, rule.category);
      break;
    }
  }

  // Exports that belong to the CUDA runtime or driver: an embedded static cudart or an interposer.
  for (const auto& sym : info.exports) {
    const std::string& n = sym.name;
    bool runtime = (n.size() > 4 && starts_with(n, "cuda") && std::isupper(static_cast<unsigned char>(n[4]))) ||
                   starts_with(n, "__cuda");
    bool driver = n.size() > 2 && starts_with(n, "cu") && std::isupper(static_cast<unsigned char>(n[2]));
    bool profiler = starts_with(n, "cupti");
    if (runtime || driver || profiler) add(n, "static_cudart", "defines " + n);
  }

  // Exports that shadow the C library: interposition on code that resolves through the candidate.
  for (const auto& sym : info.exports) {
    bool code_or_data =
        sym.type == SymbolType::kFunc || sym.type == SymbolType::kIfunc || sym.type == SymbolType::kObject;
    if (code_or_data && c_library_names().count(sym.name)) add(sym.name, "interposition", "defines " + sym.name);
  }

  // Loader-level properties of the candidate that weaken the runner.
  if (info.has_dynamic && info.exec_stack) add("PT_GNU_STACK", "executable_memory", "requests an executable stack");
  if (info.text_relocations) add("DT_TEXTREL", "executable_memory", "text relocations make code pages writable");

  // Report order: the category table's order (the first finding is the headline), then symbol.
  std::map<std::string, size_t> rank;
  for (size_t i = 0; i < audit_categories().size(); ++i) rank[audit_categories()[i].id] = i;
  std::stable_sort(report.findings.begin(), report.findings.end(), [&](const auto& a, const auto& b) {
    return std::tie(rank[a.category], a.symbol) < std::tie(rank[b.category], b.symbol);
  });
  return report;
}

}  // namespace kda::elf
