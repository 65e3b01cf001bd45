// The evaluator's per-call host work on the shared arena, for one output of the size of the CUDA
// rmsnorm pack's largest (4096 x 8192 bf16, 64 MiB): poisoning it before a call, re-filling the guard
// bands, and the input compare of a checked call. Run: <build>/bench/arena_bench
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "eval/arena.h"
#include "tensor/tensor.h"

namespace {

using kda::eval::ArenaLayout;
using kda::eval::SharedArena;
using kda::eval::Slot;
using kda::tensor::DType;

ArenaLayout bf16_layout(int64_t rows, int64_t cols) {
  Slot in{"x", DType::kBFloat16, {rows, cols}, false};
  in.nbytes = static_cast<uint64_t>(rows * cols * 2);
  Slot out = in;
  out.name = "y";
  return kda::eval::plan_layout({in}, {out});
}

SharedArena make_arena(uint64_t size) {
  auto a = SharedArena::create(size, "arena-bench");
  if (!a.ok()) std::abort();
  return std::move(*a);
}

struct Fixture {
  ArenaLayout layout;
  SharedArena arena;
  Fixture(int64_t rows, int64_t cols)
      : layout(bf16_layout(rows, cols)), arena(make_arena(layout.size)) {}
};

void BM_PoisonOutput(benchmark::State& state) {
  Fixture f(state.range(0), 8192);
  uint64_t seed = 1;
  for (auto _ : state) {
    f.arena.poison(f.layout.outputs[0], seed++);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.layout.outputs[0].nbytes));
}
BENCHMARK(BM_PoisonOutput)->Arg(4096)->Arg(16)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_FillGuards(benchmark::State& state) {
  Fixture f(4096, 8192);
  uint64_t seed = 1;
  for (auto _ : state) f.arena.fill_guards(f.layout, seed++);
}
BENCHMARK(BM_FillGuards)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_InputEquals(benchmark::State& state) {
  Fixture f(4096, 8192);
  kda::tensor::Tensor x(DType::kBFloat16, {4096, 8192});
  f.arena.write(f.layout.inputs[0], x);
  for (auto _ : state) benchmark::DoNotOptimize(f.arena.equals(f.layout.inputs[0], x));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.layout.inputs[0].nbytes));
}
BENCHMARK(BM_InputEquals)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
BENCHMARK_MAIN();
