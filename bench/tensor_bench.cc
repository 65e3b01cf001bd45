// Generation throughput of fill_random (bytes of output per second), single- and multi-threaded, with and
// without the CPU's FMA unit. Run: <build>/bench/tensor_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include "tensor/generate.h"

namespace {

using kda::tensor::DType;

void BM_FillRandom(benchmark::State& state, DType dtype, int threads, bool fma) {
  kda::tensor::Tensor t(dtype, {state.range(0)});
  uint64_t seed = 1;
  for (auto _ : state) {
    kda::tensor::fill_random(t, seed++, 0, kda::tensor::FillOptions{.threads = threads, .use_fma_unit = fma});
    benchmark::DoNotOptimize(t.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * t.nbytes());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * t.numel());
}

BENCHMARK_CAPTURE(BM_FillRandom, float32_1thread, DType::kFloat32, 1, true)->Arg(1 << 22)->UseRealTime();
BENCHMARK_CAPTURE(BM_FillRandom, float32_1thread_nofma, DType::kFloat32, 1, false)->Arg(1 << 22)->UseRealTime();
BENCHMARK_CAPTURE(BM_FillRandom, float32_all_threads, DType::kFloat32, 0, true)->Arg(1 << 24)->UseRealTime();
BENCHMARK_CAPTURE(BM_FillRandom, fp8_e4m3_1thread, DType::kFloat8E4M3FN, 1, true)->Arg(1 << 22)->UseRealTime();
BENCHMARK_CAPTURE(BM_FillRandom, fp8_e4m3_all_threads, DType::kFloat8E4M3FN, 0, true)->Arg(1 << 24)->UseRealTime();
BENCHMARK_CAPTURE(BM_FillRandom, int32_1thread, DType::kInt32, 1, true)->Arg(1 << 22)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
