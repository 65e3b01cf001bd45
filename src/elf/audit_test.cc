#include "elf/audit.h"

#include <cstdlib>

#include <gtest/gtest.h>

#include "proc/subprocess.h"
#include "util/fs.h"

namespace kda::elf {
namespace {

namespace stdfs = std::filesystem;

// A temporary directory removed when the test program exits.
struct TempDir {
  explicit TempDir(const char* prefix) : path(*fs::make_temp_dir(stdfs::temp_directory_path(), prefix)) {}
  ~TempDir() {
    std::error_code ec;
    stdfs::remove_all(path, ec);
  }
  stdfs::path path;
};

const stdfs::path& work_dir() {
  static const TempDir temp("kda-audit-test");
  return temp.path;
}

// Compiles C++ into lib<name>.so (undefined symbols allowed: they stand for CUDA/library imports).
ElfInfo compile(const std::string& name, const std::string& source, std::vector<std::string> extra = {},
                const std::string& compiler = "c++", const std::string& ext = ".cc") {
  stdfs::path src = work_dir() / (name + ext);
  stdfs::path so = work_dir() / ("lib" + name + ".so");
  EXPECT_TRUE(fs::write_file_atomic(src, source).ok());
  proc::RunOptions o;
  o.argv = {compiler, "-shared", "-o", so.string(), src.string()};
  if (compiler == "c++") o.argv.insert(o.argv.begin() + 1, {"-fPIC", "-O1", "-std=c++20"});
  o.argv.insert(o.argv.end(), extra.begin(), extra.end());
  auto r = proc::run(o);
  EXPECT_TRUE(r.ok() && r->exit.success()) << name << ": " << (r.ok() ? r->stderr_text : r.status().message());
  auto info = read_elf_file(so);
  EXPECT_TRUE(info.ok()) << info.status().message();
  return info.ok() ? *info : ElfInfo{};
}

std::string categories(const AuditReport& r) {
  std::string s;
  for (const auto& f : r.findings) s += f.category + ":" + f.symbol + " ";
  return s;
}

struct Case {
  const char* name;
  const char* source;
  const char* category;
  const char* symbol;
};

// One tiny library per forbidden behaviour, each expected to be flagged for its category.
const Case kCases[] = {
    {"pthread",
     "#include <pthread.h>\nstatic void* f(void*) { return nullptr; }\n"
     "extern \"C\" int entry() { pthread_t t; return pthread_create(&t, nullptr, f, nullptr); }",
     "threads", "pthread_create"},
    {"stdthread", "#include <thread>\nextern \"C\" int entry() { std::thread([] {}).detach(); return 0; }", "threads",
     "_ZNSt6thread15_M_start_thread"},
    {"dlopen", "#include <dlfcn.h>\nextern \"C\" void* entry() { return dlopen(\"libcublas.so\", RTLD_NOW); }",
     "dynamic_loading", "dlopen"},
    {"dlsym", "#include <dlfcn.h>\nextern \"C\" void* entry() { return dlsym(RTLD_DEFAULT, \"x\"); }",
     "dynamic_loading", "dlsym"},
    {"phdr", "#include <link.h>\nextern \"C\" int entry() { return dl_iterate_phdr(nullptr, nullptr); }",
     "dynamic_loading", "dl_iterate_phdr"},
    {"fopen", "#include <cstdio>\nextern \"C\" void* entry() { return fopen(\"/task/expected.bin\", \"rb\"); }",
     "file_io", "fopen"},
    {"open", "#include <fcntl.h>\nextern \"C\" int entry() { return open(\"/etc/passwd\", O_RDONLY); }", "file_io",
     "open"},
    {"syscall",
     "#include <unistd.h>\n#include <sys/syscall.h>\nextern \"C\" long entry() { return syscall(SYS_getpid); }",
     "raw_syscall", "syscall"},
    {"mprotect",
     "#include <sys/mman.h>\nextern \"C\" int entry(void* p) { return mprotect(p, 4096, PROT_READ | PROT_WRITE | "
     "PROT_EXEC); }",
     "executable_memory", "mprotect"},
    {"ptrace",
     "#include <sys/ptrace.h>\nextern \"C\" long entry() { return ptrace(PTRACE_TRACEME, 0, nullptr, nullptr); }",
     "process_inspection", "ptrace"},
    {"vmread",
     "#include <sys/uio.h>\nextern \"C\" long entry() { return process_vm_readv(1, nullptr, 0, nullptr, 0, 0); }",
     "process_inspection", "process_vm_readv"},
    {"fork", "#include <unistd.h>\nextern \"C\" int entry() { return fork(); }", "process_spawn", "fork"},
    {"system", "#include <cstdlib>\nextern \"C\" int entry() { return system(\"true\"); }", "process_spawn", "system"},
    {"execv", "#include <unistd.h>\nextern \"C\" int entry() { return execv(\"/bin/true\", nullptr); }",
     "process_spawn", "execv"},
    {"socket", "#include <sys/socket.h>\nextern \"C\" int entry() { return socket(AF_INET, SOCK_STREAM, 0); }",
     "network", "socket"},
    {"fdwrite", "#include <unistd.h>\nextern \"C\" long entry() { return write(3, \"forged\", 6); }", "fd_io", "write"},
    {"sigaction",
     "#include <csignal>\nextern \"C\" int entry() { struct sigaction sa{}; return sigaction(SIGSEGV, &sa, nullptr); }",
     "signals", "sigaction"},
    {"prctl", "#include <sys/prctl.h>\nextern \"C\" int entry() { return prctl(PR_SET_DUMPABLE, 1); }",
     "process_control", "prctl"},
    {"getenv", "#include <cstdlib>\nextern \"C\" const char* entry() { return getenv(\"KDA_SEED\"); }", "environment",
     "getenv"},
    {"memcmp",
     "#include <cstddef>\nextern \"C\" int memcmp(const void*, const void*, size_t) { return 0; }\n"
     "extern \"C\" int bcmp(const void*, const void*, size_t) { return 0; }\nextern \"C\" int entry() { return 0; }",
     "interposition", "memcmp"},
    {"clockgettime",
     "#include <ctime>\nextern \"C\" int clock_gettime(clockid_t, struct timespec* t) { t->tv_sec = 0; return 0; }\n"
     "extern \"C\" int entry() { return 0; }",
     "interposition", "clock_gettime"},
    // CUDA runtime/driver and library imports, declared by hand so that no CUDA is needed here.
    {"stream",
     "extern \"C\" int cudaStreamCreateWithFlags(void**, unsigned);\n"
     "extern \"C\" int entry() { void* s; return cudaStreamCreateWithFlags(&s, 1); }",
     "streams", "cudaStreamCreateWithFlags"},
    {"custream",
     "extern \"C\" int cuStreamCreate(void**, unsigned);\nextern \"C\" int entry() { void* s; return "
     "cuStreamCreate(&s, 0); }",
     "streams", "cuStreamCreate"},
    {"event",
     "extern \"C\" int cudaEventRecord(void*, void*);\nextern \"C\" int entry(void* e) { return cudaEventRecord(e, "
     "nullptr); }",
     "events", "cudaEventRecord"},
    {"graph",
     "extern \"C\" int cudaGraphLaunch(void*, void*);\nextern \"C\" int entry(void* g) { return cudaGraphLaunch(g, "
     "nullptr); }",
     "graphs", "cudaGraphLaunch"},
    {"capture",
     "extern \"C\" int cudaStreamBeginCapture(void*, int);\nextern \"C\" int entry(void* s) { return "
     "cudaStreamBeginCapture(s, 0); }",
     "graphs", "cudaStreamBeginCapture"},
    {"l2",
     "extern \"C\" int cudaDeviceSetLimit(int, unsigned long);\nextern \"C\" int entry() { return "
     "cudaDeviceSetLimit(6, 1 << 20); }",
     "l2_persistence", "cudaDeviceSetLimit"},
    {"streamattr",
     "extern \"C\" int cudaStreamSetAttribute(void*, int, const void*);\n"
     "extern \"C\" int entry(void* s) { return cudaStreamSetAttribute(s, 1, nullptr); }",
     "l2_persistence", "cudaStreamSetAttribute"},
    {"hostfn",
     "extern \"C\" int cudaLaunchHostFunc(void*, void (*)(void*), void*);\n"
     "extern \"C\" int entry() { return cudaLaunchHostFunc(nullptr, nullptr, nullptr); }",
     "host_callbacks", "cudaLaunchHostFunc"},
    {"procaddr",
     "extern \"C\" int cuGetProcAddress_v2(const char*, void**, int, unsigned long long, void*);\n"
     "extern \"C\" int entry() { void* f; return cuGetProcAddress_v2(\"cuLaunch\", &f, 12000, 0, nullptr); }",
     "driver_entry_point", "cuGetProcAddress_v2"},
    {"exporttable",
     "extern \"C\" int cudaGetExportTable(const void**, const void*);\n"
     "extern \"C\" int entry() { const void* t; return cudaGetExportTable(&t, nullptr); }",
     "driver_entry_point", "cudaGetExportTable"},
    {"cupti",
     "extern \"C\" int cuptiSubscribe(void*, void*, void*);\nextern \"C\" int entry() { return cuptiSubscribe(nullptr, "
     "nullptr, nullptr); }",
     "cupti", "cuptiSubscribe"},
    {"cublas",
     "extern \"C\" int cublasSgemm_v2(void*, int, int, int, int, int);\n"
     "extern \"C\" int entry() { return cublasSgemm_v2(nullptr, 0, 0, 1, 1, 1); }",
     "kernel_library", "cublasSgemm_v2"},
    {"nvrtc",
     "extern \"C\" int nvrtcCompileProgram(void*, int, const char**);\n"
     "extern \"C\" int entry() { return nvrtcCompileProgram(nullptr, 0, nullptr); }",
     "runtime_compilation", "nvrtcCompileProgram"},
    {"modload",
     "extern \"C\" int cuModuleLoadData(void**, const void*);\nextern \"C\" int entry() { void* m; return "
     "cuModuleLoadData(&m, nullptr); }",
     "runtime_compilation", "cuModuleLoadData"},
    // A runtime symbol defined inside the library: a static cudart (or an interposer).
    {"staticrt",
     "extern \"C\" int cudaLaunchKernel(const void*, int, int, void**, unsigned long, void*) { return 0; }\n"
     "extern \"C\" int entry() { return 0; }",
     "static_cudart", "cudaLaunchKernel"},
};

TEST(Audit, EachForbiddenBehaviourIsFlaggedForItsCategory) {
  for (const auto& c : kCases) {
    ElfInfo info = compile(c.name, c.source);
    AuditReport r = audit_imports(info, ImportPolicy{});
    bool found = false;
    for (const auto& f : r.findings) {
      if (f.category == c.category && f.symbol.rfind(c.symbol, 0) == 0) found = true;
    }
    EXPECT_TRUE(found) << c.name << ": expected " << c.category << ":" << c.symbol << ", got " << categories(r);
  }
}

// cudaGetDriverEntryPoint is no import finding: kda-runner interposes it and allows only the
// tensor-map encoders (CUTLASS/CuTe's TMA path), refusing the rest at run time (T1's cuStreamCreate).
TEST(Audit, DriverEntryPointIsLeftToTheRunnersInterposer) {
  ElfInfo info = compile("entrypoint",
                         "extern \"C\" int cudaGetDriverEntryPoint(const char*, void**, unsigned long long, void*);\n"
                         "extern \"C\" int entry() { void* f; return "
                         "cudaGetDriverEntryPoint(\"cuTensorMapEncodeTiled\", &f, 0, nullptr); }");
  AuditReport r = audit_imports(info, ImportPolicy{});
  EXPECT_FALSE(r.has("driver_entry_point")) << categories(r);
}

TEST(Audit, CleanHostKernelHasNoFindings) {
  ElfInfo info = compile("clean", R"(
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>
extern "C" int cuda_rmsnorm(const float* x, float* y, long n) {
  std::vector<float> tmp(x, x + n);
  if (n < 0) throw std::runtime_error("bad n");
  double ss = 0;
  for (long i = 0; i < n; ++i) ss += tmp[i] * tmp[i];
  float inv = 1.0f / std::sqrt(static_cast<float>(ss / n) + 1e-6f);
  for (long i = 0; i < n; ++i) y[i] = tmp[i] * inv;
  void* scratch = std::malloc(64);
  std::memset(scratch, 0, 64);
  std::free(scratch);
  std::fprintf(stderr, "n=%ld\n", n);
  std::printf("%f\n", y[0]);
  std::puts("done");
  return 0;
}
)",
                         {"-Wl,-z,relro,-z,now"});
  AuditReport r = audit_imports(info, ImportPolicy{});
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_EQ(r.summary(), "");
}

TEST(Audit, PolicySwitchesLiftTheirCategories) {
  ElfInfo streams = compile("pstream", R"(
extern "C" int cudaStreamCreate(void**);
extern "C" int cudaEventRecord(void*, void*);
extern "C" int cudaStreamWaitEvent(void*, void*, unsigned);
extern "C" int entry() { void* s; cudaStreamCreate(&s); cudaEventRecord(nullptr, s); return cudaStreamWaitEvent(nullptr, nullptr, 0); }
)");
  EXPECT_TRUE(audit_imports(streams, {}).has("streams"));
  EXPECT_TRUE(audit_imports(streams, {}).has("events"));
  ImportPolicy allow_streams;
  allow_streams.allow_streams = true;
  EXPECT_TRUE(audit_imports(streams, allow_streams).clean()) << audit_imports(streams, allow_streams).summary();

  ElfInfo threads =
      compile("pthread2", "#include <thread>\nextern \"C\" int entry() { std::thread t([] {}); t.join(); return 0; }");
  ImportPolicy allow_threads;
  allow_threads.allow_threads = true;
  EXPECT_TRUE(audit_imports(threads, {}).has("threads"));
  EXPECT_FALSE(audit_imports(threads, allow_threads).has("threads"));

  ElfInfo graphs = compile("pgraph",
                           "extern \"C\" int cudaGraphLaunch(void*, void*);\nextern \"C\" int entry() { return "
                           "cudaGraphLaunch(nullptr, nullptr); }");
  ImportPolicy allow_graphs;
  allow_graphs.allow_graphs = true;
  EXPECT_TRUE(audit_imports(graphs, allow_graphs).clean());

  ElfInfo blas = compile("pblas", R"(
extern "C" int cublasSgemm_v2(void*);
extern "C" int cublasLtMatmul(void*);
extern "C" int entry() { return cublasSgemm_v2(nullptr) + cublasLtMatmul(nullptr); }
)");
  ImportPolicy allow_blas;
  allow_blas.allowed_libraries = {"cuBLAS"};
  EXPECT_EQ(audit_imports(blas, {}).findings.size(), 2u);
  EXPECT_TRUE(audit_imports(blas, allow_blas).clean()) << audit_imports(blas, allow_blas).summary();
  ImportPolicy allow_other;
  allow_other.allowed_libraries = {"cudnn"};
  EXPECT_TRUE(audit_imports(blas, allow_other).has("kernel_library"));
}

TEST(Audit, NeededLibrariesAreChecked) {
  // A stand-in third-party library, then a candidate linked against it.
  compile("kdafoo", "extern \"C\" int kda_foo() { return 1; }");
  ElfInfo info = compile("usesfoo", "extern \"C\" int kda_foo();\nextern \"C\" int entry() { return kda_foo(); }",
                         {"-L" + work_dir().string(), "-lkdafoo"});
  AuditReport r = audit_imports(info, {});
  EXPECT_TRUE(r.has("unexpected_library")) << r.summary();
  ImportPolicy allow;
  allow.allowed_libraries = {"kdafoo"};
  EXPECT_TRUE(audit_imports(info, allow).clean()) << audit_imports(info, allow).summary();

  ElfInfo omp = compile("omp",
                        "extern \"C\" int entry(float* x) {\n#pragma omp parallel for\n"
                        "for (int i = 0; i < 64; ++i) x[i] *= 2;\nreturn 0; }",
                        {"-fopenmp"});
  AuditReport ro = audit_imports(omp, {});
  EXPECT_TRUE(ro.has("threads")) << ro.summary();
  ImportPolicy allow_threads;
  allow_threads.allow_threads = true;
  EXPECT_TRUE(audit_imports(omp, allow_threads).clean()) << audit_imports(omp, allow_threads).summary();
}

TEST(Audit, FindingsFollowTheCategoryOrder) {
  ElfInfo info;
  info.imports = {{"read"}, {"open"}, {"socket"}, {"dlopen"}};
  AuditReport r = audit_imports(info, {});
  ASSERT_EQ(r.findings.size(), 4u) << r.summary();
  EXPECT_EQ(r.summary(), "dynamic_loading: dlopen; file_io: open; fd_io: read; network: socket");
}

TEST(Audit, SyntheticLoaderProperties) {
  ElfInfo info;
  info.has_dynamic = true;
  info.exec_stack = true;
  info.text_relocations = true;
  info.needed = {"libcudnn.so.9", "libcupti.so.13", "libc.so.6", "libcudart.so.13"};
  info.rpath = {"$ORIGIN/../evil"};
  AuditReport r = audit_imports(info, {});
  EXPECT_TRUE(r.has("executable_memory"));
  EXPECT_TRUE(r.has("kernel_library"));
  EXPECT_TRUE(r.has("cupti"));
  EXPECT_TRUE(r.has("dynamic_loading"));
  EXPECT_EQ(r.findings.size(), 5u) << r.summary();
}

TEST(Audit, NvccBuiltKernelIsClean) {
  std::string nvcc;
  if (const char* e = std::getenv("KDA_NVCC")) nvcc = e;
  if (nvcc.empty() && proc::find_program("nvcc").ok()) nvcc = "nvcc";
  if (nvcc.empty() && stdfs::exists("/usr/local/cuda/bin/nvcc")) nvcc = "/usr/local/cuda/bin/nvcc";
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not available";
  ElfInfo info =
      compile("cudaclean", R"(
#include <cstdint>
__global__ void scale(float* x, int64_t n) { int64_t i = blockIdx.x * 256 + threadIdx.x; if (i < n) x[i] *= 2; }
extern "C" int kda_scale(float* x, int64_t n, void* stream) {
  cudaFuncSetAttribute(scale, cudaFuncAttributeMaxDynamicSharedMemorySize, 0);
  scale<<<(n + 255) / 256, 256, 0, (cudaStream_t)stream>>>(x, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
)",
              {"-Xcompiler", "-fPIC", "-cudart", "shared", "-gencode=arch=compute_90a,code=sm_90a"}, nvcc, ".cu");
  AuditReport r = audit_imports(info, {});
  EXPECT_TRUE(r.clean()) << r.summary();
}

TEST(Audit, EveryCategoryIsDocumented) {
  auto doc = fs::read_file(stdfs::path(KDA_SOURCE_DIR) / "docs" / "integrity-gates.md");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  for (const auto& c : audit_categories())
    EXPECT_NE(doc->find("`" + c.id + "`"), std::string::npos) << c.id << " missing from docs/integrity-gates.md";
}

}  // namespace
}  // namespace kda::elf
