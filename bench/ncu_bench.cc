// Native .ncu-rep parse + analysis against the CSV route (ncu's raw + details + source pages of the
// same report), on the fixture reports. Results: bench/results/ncu_parse.md.
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include "ncu/analyze.h"
#include "ncu/csv_pages.h"
#include "ncu/report_reader.h"
#include "util/fs.h"

namespace {

std::string fixture(const char* name) {
  auto bytes = kda::fs::read_file(std::string(KDA_SOURCE_DIR) + "/src/ncu/testdata/" + name);
  return bytes.ok() ? *bytes : std::string();
}

const std::string& bytes(const char* name) {
  static std::map<std::string, std::string> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, fixture(name)).first;
  return it->second;
}

void native_parse(benchmark::State& state, const char* file, bool with_analysis) {
  const std::string& data = bytes(file);
  size_t metrics = 0;
  for (auto _ : state) {
    auto report = kda::ncu::parse_ncu_rep(data);
    if (!report.ok()) {
      state.SkipWithError(report.status().message().c_str());
      return;
    }
    metrics = 0;
    for (const auto& k : report->kernels) metrics += k.metrics.size();
    if (with_analysis) benchmark::DoNotOptimize(kda::ncu::analyze(*report));
    benchmark::DoNotOptimize(report);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * data.size()));
  state.counters["metrics"] = static_cast<double>(metrics);
}

void csv_route(benchmark::State& state, bool with_analysis) {
  const std::string& raw = bytes("multi_raw_base.csv");
  const std::string& details = bytes("multi_details.csv");
  const std::string& source = bytes("multi_source.csv");
  for (auto _ : state) {
    auto report = kda::ncu::parse_csv_page(raw);
    if (!report.ok()) {
      state.SkipWithError(report.status().message().c_str());
      return;
    }
    kda::ncu::merge_report(*report, *kda::ncu::parse_csv_page(details));
    kda::ncu::merge_report(*report, *kda::ncu::parse_csv_page(source));
    if (with_analysis) benchmark::DoNotOptimize(kda::ncu::analyze(*report));
    benchmark::DoNotOptimize(report);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (raw.size() + details.size() + source.size())));
}

void BM_NativeParse_Multi(benchmark::State& s) { native_parse(s, "multi.ncu-rep", false); }
void BM_NativeParseAnalyze_Multi(benchmark::State& s) { native_parse(s, "multi.ncu-rep", true); }
void BM_NativeParse_Saxpy(benchmark::State& s) { native_parse(s, "saxpy.ncu-rep", false); }
void BM_CsvParse_Multi(benchmark::State& s) { csv_route(s, false); }
void BM_CsvParseAnalyze_Multi(benchmark::State& s) { csv_route(s, true); }

BENCHMARK(BM_NativeParse_Multi)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NativeParseAnalyze_Multi)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NativeParse_Saxpy)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CsvParse_Multi)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CsvParseAnalyze_Multi)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
