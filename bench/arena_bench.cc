// The evaluator's per-call host work on the shared arena, for one output of the size of the CUDA
// rmsnorm pack's largest (4096 x 8192 bf16, 64 MiB): poisoning it before a call, re-filling the guard
// bands, the input compare of a checked call, and the unwritten-output count after it (count_poisoned,
// against the element-by-element compare with a poisoned copy it replaced). Run: <build>/bench/arena_bench
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
  Fixture(int64_t rows, int64_t cols) : layout(bf16_layout(rows, cols)), arena(make_arena(layout.size)) {}
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

// The unwritten-output count of a checked call over an honest (fully written) 64 MiB bf16 output.
void BM_CountPoisoned(benchmark::State& state) {
  Fixture f(4096, 8192);
  const Slot& y = f.layout.outputs[0];
  kda::tensor::Tensor out(DType::kBFloat16, {4096, 8192});
  for (auto _ : state) benchmark::DoNotOptimize(kda::eval::count_poisoned(y.dtype, 7, out.data(), y.nbytes));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * y.nbytes));
}
BENCHMARK(BM_CountPoisoned)->UseRealTime()->Unit(benchmark::kMicrosecond);

// What the evaluator did before count_poisoned: a poisoned copy of the output, then a 16-bit compare
// per element.
void BM_CountPoisonedByCopy(benchmark::State& state) {
  Fixture f(4096, 8192);
  const Slot& y = f.layout.outputs[0];
  kda::tensor::Tensor out(DType::kBFloat16, {4096, 8192});
  for (auto _ : state) {
    const kda::tensor::Tensor poison = kda::eval::poison_tensor(y, 7);
    const auto* a = reinterpret_cast<const uint16_t*>(poison.data());
    const auto* b = reinterpret_cast<const uint16_t*>(out.data());
    int64_t same = 0;
    for (int64_t i = 0; i < out.numel(); ++i) same += a[i] == b[i];
    benchmark::DoNotOptimize(same);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * y.nbytes));
}
BENCHMARK(BM_CountPoisonedByCopy)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
BENCHMARK_MAIN();
