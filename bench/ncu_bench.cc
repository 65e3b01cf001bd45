// Native .ncu-rep parse + analysis against the CSV route (ncu's raw + details + source pages of the
// same report), on the fixture reports. Results: bench/results/ncu_parse.md.
#include <benchmark/benchmark.h>

#include <map>
#include <vector>
#include <string>

#include "ncu/analyze.h"
#include "ncu/csv_pages.h"
#include "ncu/report_reader.h"
#include "ncu/wire.h"
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

// A large report made from the fixture: its last two result blocks (saxpy #2 and smem, each a
// complete block with its own header) repeated `copies` times after the original blocks.
std::string synthesize_large(const std::string& rep, int copies) {
  std::vector<std::pair<size_t, size_t>> blocks;  // (offset, length) of each framed block
  size_t pos = 8 + kda::ncu::load_le32(rep, 4);
  while (pos + 4 <= rep.size()) {
    uint32_t n = kda::ncu::load_le32(rep, pos);
    kda::ncu::WireReader r(std::string_view(rep).substr(pos + 4, n));
    kda::ncu::WireField f;
    uint64_t payload = 0;
    while (true) {
      auto more = r.next(&f);
      if (!more.ok() || !*more) break;
      if (f.number == 5 && f.type == kda::ncu::WireType::kVarint) payload = f.scalar;
    }
    blocks.emplace_back(pos, 4 + n + payload);
    pos += 4 + n + payload;
  }
  std::string out = rep;
  for (int i = 0; i < copies; ++i)
    for (size_t b = blocks.size() - 2; b < blocks.size(); ++b) out.append(rep, blocks[b].first, blocks[b].second);
  return out;
}

const std::string& large() {
  static const std::string data = synthesize_large(bytes("multi.ncu-rep"), 100);
  return data;
}

void native_parse_data(benchmark::State& state, const std::string& data, bool with_analysis);

void native_parse(benchmark::State& state, const char* file, bool with_analysis) {
  native_parse_data(state, bytes(file), with_analysis);
}

void native_parse_data(benchmark::State& state, const std::string& data, bool with_analysis) {
  size_t metrics = 0, kernels = 0;
  for (auto _ : state) {
    auto report = kda::ncu::parse_ncu_rep(data);
    if (!report.ok()) {
      state.SkipWithError(report.status().message().c_str());
      return;
    }
    metrics = 0;
    kernels = report->kernels.size();
    for (const auto& k : report->kernels) metrics += k.metrics.size();
    if (with_analysis) benchmark::DoNotOptimize(kda::ncu::analyze(*report));
    benchmark::DoNotOptimize(report);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * data.size()));
  state.counters["metrics"] = static_cast<double>(metrics);
  state.counters["kernels"] = static_cast<double>(kernels);
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
void BM_NativeParseAnalyze_Large(benchmark::State& s) { native_parse_data(s, large(), true); }
void BM_CsvParse_Multi(benchmark::State& s) { csv_route(s, false); }
void BM_CsvParseAnalyze_Multi(benchmark::State& s) { csv_route(s, true); }

BENCHMARK(BM_NativeParse_Multi)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NativeParseAnalyze_Multi)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NativeParse_Saxpy)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NativeParseAnalyze_Large)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CsvParse_Multi)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CsvParseAnalyze_Multi)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
