// What kda tune's generated dispatcher (tune/generate.h) adds to one call: the dispatcher of a toy
// tunable whose three configurations return at once is built like kda tune builds one (ten routes
// over two var axes, the nearest rule for shapes no route matches) and timed per call on
//   * a shape inside the last route (the route table walked, then the memo of the last shape),
//   * a shape no route matches, repeated (the memo: one compare of the axes),
//   * two shapes no route matches, alternating (every call misses the memo: the nearest-route search),
// against a direct call of one configuration's entry (what a call costs with no dispatcher).
// Run: build/bench/dispatch_bench (compiles the dispatcher with the host compiler first, ~1 s).
#include <dlfcn.h>

#include <cstdio>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <dlpack/dlpack.h>

#include "eval/solution_build.h"
#include "tune/generate.h"

namespace {

using Entry = int (*)(const DLTensor*, int64_t, DLTensor*, int64_t, void*);

constexpr const char* kKernel = R"(#include <dlpack/dlpack.h>
#include <stdint.h>
extern "C" __attribute__((visibility("default"))) int run(const DLTensor* in, int64_t ni, DLTensor* out, int64_t no,
                                                          void* stream) {
  (void)in; (void)ni; (void)out; (void)no; (void)stream;
  return ID;
}
)";

kda::task::Definition toy_def() {
  kda::task::Definition d;
  d.name = "toy";
  d.axes = {{"n", kda::task::AxisSpec::Kind::kVar, 0, ""}, {"m", kda::task::AxisSpec::Kind::kVar, 0, ""}};
  d.inputs = {{"x", std::vector<std::string>{"n", "m"}, kda::tensor::DType::kFloat32, ""}};
  d.outputs = {{"y", std::vector<std::string>{"n", "m"}, kda::tensor::DType::kFloat32, ""}};
  return d;
}

// The dispatcher's entry and one configuration's entry, from one build (nullptr on failure).
struct Built {
  Entry dispatch = nullptr;
  Entry config = nullptr;
};

Built build() {
  kda::task::Solution s;
  s.name = "toy_tunable";
  s.definition = "toy";
  s.author = "bench";
  s.spec.language = "cpp";
  s.spec.target_hardware = {"cpu"};
  s.spec.entry_point = "kernel.cc::run";
  s.sources = {{"kernel.cc", kKernel}};
  auto t = kda::tune::parse_tunables("[parameters.ID]\nvalues = [1, 2, 3]\n", "tunables.toml", toy_def(),
                                     "kernel.cc::run", {"kernel.cc"});
  if (!t.ok()) return {};
  auto cs = kda::tune::enumerate_configs(*t);
  if (!cs.ok()) return {};
  // Ten routes, as many as the host RMSNorm pack's dispatcher has: n in [2^k, 2^(k+1)), m in [128, 256) << k.
  std::vector<kda::tune::Route> routes;
  for (int k = 0; k < 10; ++k)
    routes.push_back(
        {"r" + std::to_string(k),
         {{"n", {int64_t{1} << k, (int64_t{2} << k) - 1}}, {"m", {int64_t{128} << k, (int64_t{256} << k) - 1}}},
         static_cast<size_t>(k % 2)});
  kda::tune::Unmatched nearest;
  nearest.rule = kda::tune::Unmatched::Rule::kNearest;
  auto d = kda::tune::dispatcher_solution(s, toy_def(), *t, *cs, routes, 2, nullptr, nearest);
  if (!d.ok()) return {};
  auto lib = kda::eval::build_solution(*d, {});
  if (!lib.ok() || !lib->ok) return {};
  void* h = ::dlopen(lib->library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return {};
  Built b;
  b.dispatch = reinterpret_cast<Entry>(::dlsym(h, "run"));
  b.config = reinterpret_cast<Entry>(::dlsym(h, "kda_tune_c0_run"));
  return b;
}

const Built& built() {
  static const Built b = build();
  return b;
}

struct Call {
  int64_t xs[2], ys[2];
  DLTensor in[1] = {}, out[1] = {};
  Call(int64_t n, int64_t m) : xs{n, m}, ys{n, m} {
    in[0].ndim = 2;
    in[0].shape = xs;
    out[0].ndim = 2;
    out[0].shape = ys;
  }
  int operator()(Entry e) { return e(in, 1, out, 1, nullptr); }
};

void BM_DirectConfigCall(benchmark::State& state) {
  if (built().config == nullptr) return state.SkipWithError("the dispatcher did not build");
  Call c(1, 1);
  for (auto _ : state) benchmark::DoNotOptimize(c(built().config));
}
BENCHMARK(BM_DirectConfigCall);

void BM_MatchedLastRoute(benchmark::State& state) {
  if (built().dispatch == nullptr) return state.SkipWithError("the dispatcher did not build");
  Call c(600, 100000);  // inside r9, the last route
  for (auto _ : state) benchmark::DoNotOptimize(c(built().dispatch));
}
BENCHMARK(BM_MatchedLastRoute);

void BM_UnmatchedRepeated(benchmark::State& state) {
  if (built().dispatch == nullptr) return state.SkipWithError("the dispatcher did not build");
  Call c(1, 1);  // no route: the nearest rule, then the memo
  for (auto _ : state) benchmark::DoNotOptimize(c(built().dispatch));
}
BENCHMARK(BM_UnmatchedRepeated);

void BM_UnmatchedAlternating(benchmark::State& state) {
  if (built().dispatch == nullptr) return state.SkipWithError("the dispatcher did not build");
  Call a(1, 1), b(3, 1);  // two unmatched shapes: every call misses the memo
  for (auto _ : state) {
    benchmark::DoNotOptimize(a(built().dispatch));
    benchmark::DoNotOptimize(b(built().dispatch));
  }
  state.SetItemsProcessed(state.iterations() * 2);
}
BENCHMARK(BM_UnmatchedAlternating);

}  // namespace

BENCHMARK_MAIN();
