#include "build/builder.h"

#include <dlfcn.h>
#include <dlpack/dlpack.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "build/compiler_sandbox.h"
#include "elf/audit.h"
#include "elf/elf_file.h"
#include "util/fs.h"

namespace kda::build {
namespace {

namespace stdfs = std::filesystem;

// A host kernel in the kda ABI: out[i] = (a[i] + b[i]) * KDA_SCALE.
constexpr const char* kAddSource = R"(
#include <dlpack/dlpack.h>
#include <cstdint>
#include "scale.h"
extern "C" int kda_add(const DLTensor* in, int64_t ni, DLTensor* out, int64_t no, void* stream) {
  if (ni != 2 || no != 1) return 1;
  const float* a = static_cast<const float*>(in[0].data);
  const float* b = static_cast<const float*>(in[1].data);
  float* c = static_cast<float*>(out[0].data);
  for (int64_t i = 0; i < in[0].shape[0]; ++i) c[i] = (a[i] + b[i]) * KDA_SCALE;
  return 0;
}
)";

class BuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-build-test");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
    cfg_.cache_root = dir_ / "cache";
    ASSERT_TRUE(fs::ensure_dir(dir_ / "inc").ok());
    ASSERT_TRUE(fs::write_file_atomic(dir_ / "inc" / "scale.h", "#define KDA_SCALE 1.0f\n").ok());
  }
  void TearDown() override {
    std::error_code ec;
    stdfs::remove_all(dir_, ec);
  }

  BuildRequest add_request(const std::string& source = kAddSource) const {
    BuildRequest r;
    r.language = "cpp";
    r.sources = {{"add.cc", source}};
    r.entry_file = "add.cc";
    r.entry_symbol = "kda_add";
    r.include_dirs = {(dir_ / "inc").string()};
    return r;
  }

  BuildResult must_build(const BuildRequest& r) {
    auto b = build_solution(r, cfg_);
    EXPECT_TRUE(b.ok()) << b.status().message();
    return b.ok() ? *b : BuildResult{};
  }

  stdfs::path dir_;
  BuilderConfig cfg_;
};

// dlopens the library and calls kda_add on {1,2,3} + {10,20,30}.
std::vector<float> call_add(const stdfs::path& lib) {
  void* h = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(h, nullptr) << ::dlerror();
  if (h == nullptr) return {};
  using Fn = int (*)(const DLTensor*, int64_t, DLTensor*, int64_t, void*);
  auto fn = reinterpret_cast<Fn>(::dlsym(h, "kda_add"));
  EXPECT_NE(fn, nullptr);
  float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, c[3] = {0, 0, 0};
  int64_t shape[1] = {3};
  auto tensor = [&](float* p) {
    DLTensor t{};
    t.data = p;
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
    return t;
  };
  DLTensor in[2] = {tensor(a), tensor(b)};
  DLTensor out[1] = {tensor(c)};
  EXPECT_EQ(fn(in, 2, out, 1, nullptr), 0);
  ::dlclose(h);
  return {c[0], c[1], c[2]};
}

TEST_F(BuilderTest, CppSolutionBuildsLoadsAndRuns) {
  auto r = must_build(add_request());
  ASSERT_TRUE(r.ok) << r.status << "\n" << r.log;
  EXPECT_EQ(r.status, "ok");
  EXPECT_FALSE(r.cache_hit);
  EXPECT_EQ(r.key.size(), 64u);
  EXPECT_EQ(r.library, cfg_.cache_root / r.key / "lib.so");
  EXPECT_NE(r.log.find("-std=c++20"), std::string::npos);
  EXPECT_EQ(call_add(r.library), (std::vector<float>{11, 22, 33}));
  auto elf = elf::read_elf_file(r.library);
  ASSERT_TRUE(elf.ok());
  EXPECT_TRUE(elf->bind_now);
  EXPECT_TRUE(stdfs::exists(cfg_.cache_root / r.key / "meta.json"));
  EXPECT_TRUE(stdfs::exists(cfg_.cache_root / r.key / "src" / "add.cc"));
}

TEST_F(BuilderTest, SecondBuildIsACacheHitAndFaster) {
  auto t0 = std::chrono::steady_clock::now();
  auto first = must_build(add_request());
  auto t1 = std::chrono::steady_clock::now();
  auto second = must_build(add_request());
  auto t2 = std::chrono::steady_clock::now();
  ASSERT_TRUE(first.ok && second.ok);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.key, first.key);
  EXPECT_EQ(second.library, first.library);
  EXPECT_LT(t2 - t1, t1 - t0);
  EXPECT_EQ(call_add(second.library), (std::vector<float>{11, 22, 33}));
}

TEST_F(BuilderTest, ChangedSourceIsAMiss) {
  auto first = must_build(add_request());
  std::string changed = std::string(kAddSource) + "\n// a comment changes the key\n";
  auto second = must_build(add_request(changed));
  ASSERT_TRUE(second.ok);
  EXPECT_FALSE(second.cache_hit);
  EXPECT_NE(second.key, first.key);
  BuildRequest debug = add_request();
  debug.debug_lineinfo = true;
  EXPECT_NE(build_key(debug, cfg_).value(), first.key);  // flags are in the key too
}

TEST_F(BuilderTest, ChangedIncludedHeaderIsAMiss) {
  auto first = must_build(add_request());
  ASSERT_TRUE(first.ok);
  EXPECT_TRUE(must_build(add_request()).cache_hit);
  ASSERT_TRUE(fs::write_file_atomic(dir_ / "inc" / "scale.h", "#define KDA_SCALE 2.0f\n").ok());
  auto second = must_build(add_request());
  ASSERT_TRUE(second.ok) << second.log;
  EXPECT_FALSE(second.cache_hit);
  EXPECT_EQ(call_add(second.library), (std::vector<float>{22, 44, 66}));
  EXPECT_TRUE(must_build(add_request()).cache_hit);
}

TEST_F(BuilderTest, TamperedCachedLibraryIsAMiss) {
  auto first = must_build(add_request());
  ASSERT_TRUE(first.ok);
  ASSERT_TRUE(fs::write_file_atomic(first.library, "not a library").ok());
  auto second = must_build(add_request());
  ASSERT_TRUE(second.ok);
  EXPECT_FALSE(second.cache_hit);
  EXPECT_EQ(call_add(second.library), (std::vector<float>{11, 22, 33}));
}

TEST_F(BuilderTest, CompileErrorIsAResultWithTheLog) {
  auto r = must_build(add_request("extern \"C\" int kda_add() { return undeclared_thing; }\n"));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.status, "compile error");
  EXPECT_NE(r.log.find("undeclared_thing"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("error"), std::string::npos);
  // Nothing was published.
  EXPECT_FALSE(stdfs::exists(cfg_.cache_root / r.key));
}

TEST_F(BuilderTest, IncludesOutsideTheAllowedDirectoriesFailTheBuild) {
  // A file the candidate must not compile in (think: the task's expected outputs).
  ASSERT_TRUE(fs::write_file_atomic(dir_ / "secret.h", "#define SECRET 42\n").ok());
  // With the compiler sandbox the read itself fails; without it the dependency check catches it.
  EXPECT_FALSE(must_build(add_request("#include \"" + (dir_ / "secret.h").string() +
                                      "\"\nextern \"C\" int kda_add() { return SECRET; }\n"))
                   .ok);
  cfg_.confine_compiler_reads = false;
  auto absolute = must_build(add_request("#include \"" + (dir_ / "secret.h").string() +
                                         "\"\nextern \"C\" int kda_add() { return SECRET; }\n"));
  EXPECT_FALSE(absolute.ok);
  EXPECT_NE(absolute.status.find("outside the allowed include directories"), std::string::npos) << absolute.status;
  EXPECT_NE(absolute.status.find("secret.h"), std::string::npos);
  // The same file reached by climbing out of the staging directory.
  std::string up;
  for (auto it = (cfg_.cache_root).begin(); it != cfg_.cache_root.end(); ++it) up += "../";
  auto relative = must_build(add_request("#include \"" + up + "../" + (dir_ / "secret.h").relative_path().string() +
                                         "\"\nextern \"C\" int kda_add() { return SECRET; }\n"));
  EXPECT_FALSE(relative.ok);
  EXPECT_NE(relative.status.find("outside the allowed include directories"), std::string::npos)
      << relative.status << "\n"
      << relative.log;
  // Headers among the solution's own sources are fine.
  BuildRequest own = add_request("#include \"inc/local.h\"\nextern \"C\" int kda_add() { return LOCAL; }\n");
  own.sources.push_back({"inc/local.h", "#define LOCAL 7\n"});
  auto ok = must_build(own);
  EXPECT_TRUE(ok.ok) << ok.status << "\n" << ok.log;
}

TEST_F(BuilderTest, CompilerCannotReadFilesOutsideItsRoots) {
  if (CompilerSandbox::prepare({}).abi() == 0) GTEST_SKIP() << "no Landlock on this kernel";
  // .incbin is read by the assembler, so the include check cannot see it; the sandbox can.
  ASSERT_TRUE(fs::write_file_atomic(dir_ / "expected.bin", "secret bytes").ok());
  std::string source = "asm(\".section .rodata\\n.incbin \\\"" + (dir_ / "expected.bin").string() +
                       "\\\"\\n.previous\");\nextern \"C\" int kda_add() { return 0; }\n";
  auto confined = must_build(add_request(source));
  EXPECT_FALSE(confined.ok) << confined.log;
  EXPECT_EQ(confined.status, "compile error");
  EXPECT_NE(confined.log.find("build sandbox: landlock"), std::string::npos) << confined.log;
  // The same source builds when the sandbox is off: the test is about the sandbox, not the asm.
  BuilderConfig open = cfg_;
  open.confine_compiler_reads = false;
  auto unconfined = build_solution(add_request(source), open);
  ASSERT_TRUE(unconfined.ok());
  EXPECT_TRUE(unconfined->ok) << unconfined->log;
}

TEST_F(BuilderTest, EntryPointMustBeExported) {
  auto mangled = must_build(add_request("int kda_add(int x) { return x; }\n"));
  EXPECT_FALSE(mangled.ok);
  EXPECT_NE(mangled.status.find("entry point kda_add not exported"), std::string::npos);
  EXPECT_NE(mangled.status.find("extern \"C\""), std::string::npos) << mangled.status;
  auto hidden = must_build(
      add_request("extern \"C\" __attribute__((visibility(\"hidden\"))) int kda_add(int x) { return x; }\n"));
  EXPECT_FALSE(hidden.ok);
  EXPECT_NE(hidden.status.find("not exported"), std::string::npos);
}

TEST_F(BuilderTest, BadRequestsAreRejected) {
  for (std::string bad : {"../x.cc", "/abs.cc", "a//b.cc", "./a.cc", "a/../../b.cc", ""}) {
    BuildRequest r = add_request();
    r.sources.push_back({bad, "int x;"});
    auto b = build_solution(r, cfg_);
    EXPECT_EQ(b.status().kind(), ErrorKind::kBadInput) << bad;
  }
  BuildRequest lang = add_request();
  lang.language = "python";
  EXPECT_EQ(build_solution(lang, cfg_).status().kind(), ErrorKind::kBadInput);
  BuildRequest entry = add_request();
  entry.entry_file = "missing.cc";
  EXPECT_EQ(build_solution(entry, cfg_).status().kind(), ErrorKind::kBadInput);
  BuildRequest arch = add_request();
  arch.cuda_arch = "90a -o /etc/passwd";
  EXPECT_EQ(build_solution(arch, cfg_).status().kind(), ErrorKind::kBadInput);
  EXPECT_TRUE(validate_source_path("include/tile.cuh").ok());
}

TEST_F(BuilderTest, MissingCompilerIsAClearError) {
  BuilderConfig cfg = cfg_;
  cfg.cxx = "kda-no-such-compiler";
  auto r = build_solution(add_request(), cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kNotFound);
  EXPECT_NE(r.status().message().find("KDA_CXX"), std::string::npos);
}

TEST_F(BuilderTest, ConcurrentBuildsOfOneKeyAllSucceed) {
  std::vector<BuildResult> results(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      auto r = build_solution(add_request(), cfg_);
      if (r.ok()) results[i] = *r;
    });
  for (auto& t : threads) t.join();
  for (const auto& r : results) {
    EXPECT_TRUE(r.ok) << r.status;
    EXPECT_EQ(r.library, results[0].library);
  }
  EXPECT_EQ(call_add(results[0].library), (std::vector<float>{11, 22, 33}));
  int entries = 0;
  for (const auto& e : stdfs::directory_iterator(cfg_.cache_root)) {
    ++entries;
    EXPECT_EQ(e.path().filename(), results[0].key) << "leftover " << e.path();
  }
  EXPECT_EQ(entries, 1);
}

TEST_F(BuilderTest, CudaKernelCompilesAndReportsPtxasResources) {
  BuildRequest r;
  r.language = "cuda";
  r.sources = {{"kernel.cu", R"(
#include <dlpack/dlpack.h>
#include <cstdint>
__global__ void add_kernel(const float* a, const float* b, float* c, int64_t n) {
  __shared__ float tile[128];
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? a[i] : 0.f;
  __syncthreads();
  if (i < n) c[i] = tile[threadIdx.x] + b[i];
}
extern "C" int kda_add(const DLTensor* in, int64_t ni, DLTensor* out, int64_t no, void* stream) {
  int64_t n = in[0].shape[0];
  add_kernel<<<(n + 127) / 128, 128, 0, (cudaStream_t)stream>>>(
      (const float*)in[0].data, (const float*)in[1].data, (float*)out[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
)"}};
  r.entry_file = "kernel.cu";
  r.entry_symbol = "kda_add";
  if (!build_key(r, cfg_).ok()) GTEST_SKIP() << "nvcc not available";
  auto b = must_build(r);
  ASSERT_TRUE(b.ok) << b.status << "\n" << b.log;
  EXPECT_NE(b.log.find("-gencode=arch=compute_90a,code=sm_90a"), std::string::npos);
  ASSERT_EQ(b.resources.size(), 1u) << b.log;
  EXPECT_NE(b.resources[0].demangled.find("add_kernel"), std::string::npos);
  EXPECT_GT(b.resources[0].registers, 0);
  EXPECT_EQ(b.resources[0].shared_mem_static, 512);
  EXPECT_EQ(b.resources[0].arch, "sm_90a");
  // -cudart shared: the runtime is an import, not embedded.
  auto elf = elf::read_elf_file(b.library);
  ASSERT_TRUE(elf.ok());
  EXPECT_NE(elf->find_import("__cudaRegisterFatBinary"), nullptr);
  EXPECT_EQ(elf->find_export("__cudaRegisterFatBinary"), nullptr);
  bool needs_cudart = false;
  for (const auto& n : elf->needed) needs_cudart = needs_cudart || n.rfind("libcudart.so", 0) == 0;
  EXPECT_TRUE(needs_cudart);
  EXPECT_TRUE(elf->bind_now);
  EXPECT_TRUE(elf->relro);
  // A cache hit keeps the resources.
  auto again = must_build(r);
  EXPECT_TRUE(again.cache_hit);
  ASSERT_EQ(again.resources.size(), 1u);
  EXPECT_EQ(again.resources[0].registers, b.resources[0].registers);
}

// CUB pulls in NVTX, whose loader imports getenv, dlopen and dlsym; CUDA builds define NVTX_DISABLE,
// so an honest CUB BlockReduce kernel imports none of them and passes the import audit.
TEST_F(BuilderTest, CubKernelBuildsWithoutTheNvtxLoaderImports) {
  BuildRequest r;
  r.language = "cuda";
  r.sources = {{"kernel.cu", R"(#include <cub/cub.cuh>
#include <dlpack/dlpack.h>
__global__ void sum_kernel(const float* x, float* out, int n) {
  using Reduce = cub::BlockReduce<float, 128>;
  __shared__ typename Reduce::TempStorage tmp;
  float v = threadIdx.x < n ? x[threadIdx.x] : 0.f;
  float s = Reduce(tmp).Sum(v);
  if (threadIdx.x == 0) out[0] = s;
}
extern "C" int kda_sum(const DLTensor* in, int64_t ni, DLTensor* out, int64_t no, void* stream) {
  sum_kernel<<<1, 128, 0, (cudaStream_t)stream>>>((const float*)in[0].data, (float*)out[0].data, (int)in[0].shape[0]);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
)"}};
  r.entry_file = "kernel.cu";
  r.entry_symbol = "kda_sum";
  if (!build_key(r, cfg_).ok()) GTEST_SKIP() << "nvcc not available";
  auto b = must_build(r);
  ASSERT_TRUE(b.ok) << b.status << "\n" << b.log;
  EXPECT_NE(b.log.find("-DNVTX_DISABLE"), std::string::npos);
  auto elf = elf::read_elf_file(b.library);
  ASSERT_TRUE(elf.ok());
  for (const char* forbidden : {"getenv", "dlopen", "dlsym"})
    EXPECT_EQ(elf->find_import(forbidden), nullptr) << forbidden;
  elf::AuditReport audit = elf::audit_imports(*elf, elf::ImportPolicy{});
  EXPECT_TRUE(audit.clean()) << audit.summary();
  BuildRequest with_nvtx = r;
  with_nvtx.nvtx = true;  // part of the key: a different library
  EXPECT_NE(*build_key(with_nvtx, cfg_), *build_key(r, cfg_));
}

}  // namespace
}  // namespace kda::build

namespace kda::build {
namespace {

// What `kda eval` shows of a failed build: the error diagnostics, named by the solution's own files.
// binding "torch" against a stand-in torch: headers whose PYBIND11_MODULE defines PyInit_<name>, and
// empty libc10 / libtorch / libtorch_cpu / libtorch_python to link. The build gets torch's flags (C++17,
// TORCH_EXTENSION_NAME, the ABI flag, the libraries), exports the module's PyInit, and a source without
// PYBIND11_MODULE is refused saying what it needs; the torch version is part of the key.
TEST_F(BuilderTest, TorchBindingBuildsAnExtensionModuleAgainstTheGivenTorch) {
  const stdfs::path torch = dir_ / "torch";
  ASSERT_TRUE(fs::ensure_dir(torch / "include" / "torch").ok());
  ASSERT_TRUE(fs::ensure_dir(torch / "lib").ok());
  ASSERT_TRUE(
      fs::write_file_atomic(torch / "include" / "torch" / "extension.h",
                            "#pragma once\n"
                            "#define KDA_CAT(a, b) a##b\n"
                            "#define KDA_INIT(name) KDA_CAT(PyInit_, name)\n"
                            "#define PYBIND11_MODULE(name, m) extern \"C\" __attribute__((visibility(\"default\"))) "
                            "void* KDA_INIT(name)() { return nullptr; } static void kda_module_body(int m)\n")
          .ok());
  ASSERT_TRUE(fs::write_file_atomic(torch / "empty.c", "int kda_torch_stand_in;\n").ok());
  for (const char* l : {"c10", "torch", "torch_cpu", "torch_python"}) {
    const std::string cmd = "c++ -x c -shared -fPIC " + (torch / "empty.c").string() + " -o " +
                            (torch / "lib" / (std::string("lib") + l + ".so")).string();
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  BuildRequest r;
  r.language = "cpp";
  r.binding = "torch";
  r.sources = {{"ext.cc",
                "#include <torch/extension.h>\n"
                "int run(int a) { return a; }\n"
                "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { (void)m; }\n"}};
  r.entry_file = "ext.cc";
  r.entry_symbol = "run";
  EXPECT_FALSE(build_solution(r, cfg_).ok());  // no torch given: a bad request, not a build
  r.torch = TorchExtension{.version = "0.0+stand-in",
                           .include_dirs = {(torch / "include").string()},
                           .library_dirs = {(torch / "lib").string()}};
  const BuildResult b = must_build(r);
  ASSERT_TRUE(b.ok) << b.status << "\n" << b.log;
  EXPECT_EQ(b.entry_export, "run");
  for (const char* flag : {"-std=c++17", "-DTORCH_EXTENSION_NAME=kda_torch_solution", "-D_GLIBCXX_USE_CXX11_ABI=1",
                           "-DTORCH_API_INCLUDE_EXTENSION_H", "-ltorch_python", "-Wl,-rpath,"})
    EXPECT_NE(b.log.find(flag), std::string::npos) << flag << "\n" << b.log;
  EXPECT_EQ(b.log.find("-std=c++20"), std::string::npos) << b.log;
  auto elf = elf::read_elf_file(b.library);
  ASSERT_TRUE(elf.ok());
  EXPECT_NE(elf->find_export("PyInit_kda_torch_solution"), nullptr);

  BuildRequest other = r;
  other.torch->version = "0.1+stand-in";
  EXPECT_NE(*build_key(r, cfg_), *build_key(other, cfg_));

  BuildRequest bare = r;
  bare.sources = {{"ext.cc", "#include <torch/extension.h>\nint run(int a) { return a; }\n"}};
  const BuildResult refused = must_build(bare);
  EXPECT_FALSE(refused.ok);
  EXPECT_NE(refused.status.find("binding torch needs PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)"), std::string::npos)
      << refused.status;
}

TEST(ErrorLines, PicksTheErrorsOfEachToolchainAndStripsTheStagingPrefix) {
  const std::string gcc =
      "src/kernel.cc: In function 'int run(...)':\n"
      "src/kernel.cc:12:5: error: expected ';' before 'return'\n"
      "   12 |     x = 1\n"
      "      |          ^\n"
      "src/util.h:3:1: fatal error: missing.h: No such file or directory\n"
      "compilation terminated.\n[exit 1]\n";
  auto lines = error_lines(gcc);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "kernel.cc:12:5: error: expected ';' before 'return'");
  EXPECT_EQ(lines[1], "util.h:3:1: fatal error: missing.h: No such file or directory");
  const std::string nvcc = "src/kernel.cu(40): error: identifier \"blockDim_\" is undefined\n1 error detected\n";
  EXPECT_EQ(error_lines(nvcc), std::vector<std::string>{"kernel.cu(40): error: identifier \"blockDim_\" is undefined"});
  const std::string ld =
      "/usr/bin/ld: obj/0.o: in function `run':\nkernel.cc:(.text+0x9): undefined reference to `helper()'\n"
      "collect2: error: ld returned 1 exit status\n";
  lines = error_lines(ld);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("undefined reference to `helper()'"), std::string::npos);
  const std::string ptxas =
      "ptxas error   : Entry function 'k' uses too much shared data (0x20000 bytes, 0xc000 max)\n";
  EXPECT_EQ(error_lines(ptxas).size(), 1u);
  // No diagnostic that says error: the last lines, at most max_lines; a word like "errors.h" is not one.
  EXPECT_EQ(error_lines("a\nb\n#include \"errors.h\"\nd\n", 2),
            (std::vector<std::string>{"#include \"errors.h\"", "d"}));
  EXPECT_TRUE(error_lines("").empty());
  // At most max_lines errors.
  std::string many;
  for (int i = 0; i < 9; ++i) many += "src/k.cc:" + std::to_string(i) + ":1: error: e\n";
  EXPECT_EQ(error_lines(many, 3).size(), 3u);
}

}  // namespace
}  // namespace kda::build
