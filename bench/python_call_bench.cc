// What kda-runner adds to one call of a Python solution on the host backend, against the same
// work behind kda's C ABI. Measures PythonRuntime::call (runner/python_runtime.h: the glue's call(),
// the entry function's frame, the argument list, the audit hook's per-event check) on
//   * an entry function that does nothing (the pure overhead per call), and
//   * a numpy RMSNorm on 1 x 128 and 64 x 4096 float32 rows (overhead beside real numpy work),
// and a C function pointer call doing the same RMSNorm (the C ABI's cost is the call itself).
// Run: build/bench/python_call_bench (libkda-python.so is opened from the build directory).
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <dlpack/dlpack.h>

#include "runner/python_runtime.h"

namespace {

namespace stdfs = std::filesystem;
using kda::runner::PythonRuntime;

PythonRuntime* runtime() {
  static PythonRuntime* rt = [] {
    const stdfs::path dir = KDA_BINARY_DIR;
    void* h = ::dlopen((dir / "libkda-python.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (h == nullptr) return static_cast<PythonRuntime*>(nullptr);
    auto make = reinterpret_cast<kda::runner::PythonRuntimeFn>(::dlsym(h, kda::runner::kPythonRuntimeSymbol));
    PythonRuntime* r = make != nullptr ? make() : nullptr;
    if (r == nullptr || !r->start(dir / "kda_python.py", "cpu", {}).empty())
      return static_cast<PythonRuntime*>(nullptr);
    return r;
  }();
  return rt;
}

struct Buffers {
  int64_t rows, cols;
  std::vector<float> x, w, y, inv;
  float eps = 1e-6f;
  std::vector<int64_t> xs, ws, is;
  std::vector<DLTensor> in, out;
  Buffers(int64_t r, int64_t c)
      : rows(r), cols(c), x(r * c, 0.5f), w(c, 1.0f), y(r * c), inv(r), xs{r, c}, ws{c}, is{r} {
    const DLDataType f32{kDLFloat, 32, 1};
    const DLDevice cpu{kDLCPU, 0};
    in = {{x.data(), cpu, 2, f32, xs.data(), nullptr, 0},
          {w.data(), cpu, 1, f32, ws.data(), nullptr, 0},
          {&eps, cpu, 0, f32, nullptr, nullptr, 0}};
    out = {{y.data(), cpu, 2, f32, xs.data(), nullptr, 0}, {inv.data(), cpu, 1, f32, is.data(), nullptr, 0}};
  }
};

// The same RMSNorm as the numpy solution, behind the C ABI's signature.
extern "C" int c_rmsnorm(const DLTensor* in, int64_t, DLTensor* out, int64_t, void*) {
  const int64_t rows = in[0].shape[0], cols = in[0].shape[1];
  const auto* x = static_cast<const float*>(in[0].data);
  const auto* w = static_cast<const float*>(in[1].data);
  const float eps = *static_cast<const float*>(in[2].data);
  auto* y = static_cast<float*>(out[0].data);
  auto* inv = static_cast<float*>(out[1].data);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(x[r * cols + c]) * x[r * cols + c];
    inv[r] = static_cast<float>(1.0 / std::sqrt(s / static_cast<double>(cols) + eps));
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = x[r * cols + c] * inv[r] * w[c];
  }
  return 0;
}
using Entry = int (*)(const DLTensor*, int64_t, DLTensor*, int64_t, void*);
Entry volatile c_entry = c_rmsnorm;

stdfs::path write_module(const std::string& name, const std::string& text) {
  const stdfs::path dir = stdfs::temp_directory_path() / "kda_python_call_bench";
  stdfs::create_directories(dir);
  std::ofstream(dir / (name + ".py")) << text;
  return dir / (name + ".py");
}

void python_call(benchmark::State& state, const char* body, int64_t rows, int64_t cols) {
  PythonRuntime* rt = runtime();
  if (rt == nullptr) {
    state.SkipWithError("libkda-python.so did not load or start (built without libpython?)");
    return;
  }
  static int n = 0;
  const std::string name = "bench_mod_" + std::to_string(n++);
  const auto file =
      write_module(name, std::string("import numpy as np\n\ndef run(x, weight, eps, y, inv_rms):\n") + body);
  if (std::string e = rt->load(file, "run", false, ""); !e.empty()) {
    state.SkipWithError(e.c_str());
    return;
  }
  Buffers b(rows, cols);
  if (std::string e = rt->bind(b.in, b.out); !e.empty()) {
    state.SkipWithError(e.c_str());
    return;
  }
  std::string error;
  for (auto _ : state)
    if (!rt->call(nullptr, &error)) state.SkipWithError(error.c_str());
}

constexpr const char* kNothing = "    pass\n";
constexpr const char* kNumpyRmsnorm =
    "    mean_square = np.einsum('ij,ij->i', x, x, dtype=np.float64) / x.shape[1]\n"
    "    inv_rms[:] = 1.0 / np.sqrt(mean_square + eps)\n"
    "    np.multiply(x, inv_rms[:, None], out=y)\n"
    "    y *= weight\n";

void BM_PythonCallNothing(benchmark::State& s) { python_call(s, kNothing, 1, 128); }
void BM_PythonNumpyRmsnorm_1x128(benchmark::State& s) { python_call(s, kNumpyRmsnorm, 1, 128); }
void BM_PythonNumpyRmsnorm_64x4096(benchmark::State& s) { python_call(s, kNumpyRmsnorm, 64, 4096); }

void c_call(benchmark::State& state, int64_t rows, int64_t cols) {
  Buffers b(rows, cols);
  for (auto _ : state) benchmark::DoNotOptimize(c_entry(b.in.data(), 3, b.out.data(), 2, nullptr));
}
void BM_CAbiRmsnorm_1x128(benchmark::State& s) { c_call(s, 1, 128); }
void BM_CAbiRmsnorm_64x4096(benchmark::State& s) { c_call(s, 64, 4096); }

BENCHMARK(BM_PythonCallNothing);
BENCHMARK(BM_PythonNumpyRmsnorm_1x128);
BENCHMARK(BM_CAbiRmsnorm_1x128);
BENCHMARK(BM_PythonNumpyRmsnorm_64x4096);
BENCHMARK(BM_CAbiRmsnorm_64x4096);

}  // namespace

BENCHMARK_MAIN();
