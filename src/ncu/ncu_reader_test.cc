#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ncu/csv.h"
#include "ncu/csv_pages.h"
#include "ncu/load.h"
#include "ncu/metric_units.h"
#include "ncu/report_reader.h"
#include "ncu/test_fixtures.h"
#include "ncu/wire.h"
#include "util/fs.h"

namespace kda::ncu {
namespace {

using testing::fixture;

std::string read(const std::string& name) {
  auto bytes = fs::read_file(fixture(name));
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  return bytes.ok() ? *bytes : std::string();
}

const Report& multi() {
  static const Report r = [] {
    auto rep = read_ncu_rep(fixture("multi.ncu-rep"));
    EXPECT_TRUE(rep.ok()) << rep.status().message();
    return rep.ok() ? *rep : Report{};
  }();
  return r;
}

const Report& saxpy() {
  static const Report r = [] {
    auto rep = read_ncu_rep(fixture("saxpy.ncu-rep"));
    EXPECT_TRUE(rep.ok()) << rep.status().message();
    return rep.ok() ? *rep : Report{};
  }();
  return r;
}

TEST(Wire, DecodesEveryWireType) {
  // field 1 varint 300; field 2 fixed64 1.5; field 3 bytes "hi"; field 4 fixed32 2.0f
  std::string msg = {'\x08', '\xac', '\x02', '\x11', 0,   0,      0, 0, 0, 0,     '\xf8',
                     '\x3f', '\x1a', 2,      'h',    'i', '\x25', 0, 0, 0, '\x40'};
  WireReader r(msg);
  WireField f;
  ASSERT_TRUE(*r.next(&f));
  EXPECT_EQ(f.number, 1u);
  EXPECT_EQ(f.scalar, 300u);
  ASSERT_TRUE(*r.next(&f));
  EXPECT_EQ(f.type, WireType::kFixed64);
  EXPECT_EQ(f.as_double(), 1.5);
  ASSERT_TRUE(*r.next(&f));
  EXPECT_EQ(f.bytes, "hi");
  ASSERT_TRUE(*r.next(&f));
  EXPECT_EQ(f.as_float(), 2.0f);
  EXPECT_FALSE(*r.next(&f));
}

TEST(Wire, RejectsMalformedInput) {
  WireField f;
  for (std::string bad : {std::string("\x08\x80", 2), std::string("\x0a\x05hi", 4), std::string("\x0b", 1),
                          std::string("\x11\x01\x02", 3), std::string("\x00\x01", 2)}) {
    WireReader r(bad);
    auto res = r.next(&f);
    EXPECT_FALSE(res.ok()) << "accepted " << bad.size() << " bytes";
  }
}

TEST(NativeReader, MultiFixtureStructure) {
  const Report& r = multi();
  EXPECT_EQ(r.version, 7);
  ASSERT_EQ(r.kernels.size(), 3u);
  ASSERT_GT(r.string_table.size(), 423u);
  EXPECT_EQ(r.string_table[423], "gpu__time_duration.sum");
  EXPECT_EQ(r.kernels[0].name, "saxpy(int, float, float *, float *)");
  EXPECT_EQ(r.kernels[0].mangled_name, "_Z5saxpyifPfS_");
  EXPECT_EQ(r.kernels[0].function_name, "saxpy");
  EXPECT_EQ(r.kernels[0].grid, (Dim3{65536, 1, 1}));
  EXPECT_EQ(r.kernels[0].block, (Dim3{256, 1, 1}));
  EXPECT_EQ(r.kernels[2].name, "smem(float *)");
  EXPECT_EQ(r.kernels[2].grid, (Dim3{1000, 1, 1}));
  EXPECT_EQ(r.kernels[0].stream_id, 7u);
  EXPECT_EQ(r.kernels[0].process_id, 490u);
  EXPECT_EQ(r.kernels[0].clock_locked, std::optional<bool>(true));
  for (const auto& k : r.kernels) {
    EXPECT_GE(k.metrics.size(), 2246u);
    EXPECT_LE(k.metrics.size(), 2249u);
    EXPECT_EQ(k.rules.size(), 22u);
  }
  EXPECT_EQ(*r.kernels[0].number("gpu__time_duration.sum"), 152032);
  EXPECT_EQ(*r.kernels[1].number("gpu__time_duration.sum"), 151264);
  EXPECT_EQ(*r.kernels[2].number("gpu__time_duration.sum"), 13600);
  const Metric* regs = r.kernels[0].find("launch__registers_per_thread");
  ASSERT_NE(regs, nullptr);
  EXPECT_EQ(regs->value.kind, Value::Kind::kUint64);
  EXPECT_EQ(regs->value.integer, 16u);
  EXPECT_EQ(r.kernels[0].find("gpu__time_duration.sum")->unit, "ns");
  ASSERT_FALSE(r.command_lines.empty());
  EXPECT_NE(r.command_lines[0].find("--set full --import-source yes"), std::string::npos);
  ASSERT_EQ(r.source_files.size(), 1u);
  EXPECT_NE(r.source_files[0].content.find("__global__ void smem"), std::string::npos);
  EXPECT_GT(r.cubin_bytes, 1000u);
}

TEST(NativeReader, InstancedMetricsCarryPcCorrelation) {
  const Metric* m = multi().kernels[2].find("smsp__pcsamp_sample_count");
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->instances.size(), 20u);
  bool found = false;
  for (const auto& inst : m->instances)
    if (inst.correlation.integer == 0x7fee737a2900ull) {
      found = true;
      EXPECT_EQ(inst.value.number, 15);
    }
  EXPECT_TRUE(found);
  const Metric* ops = multi().kernels[2].find("sass__inst_executed_per_opcode");
  ASSERT_NE(ops, nullptr);
  EXPECT_EQ(ops->instances.size(), 17u);
  EXPECT_EQ(ops->instances[0].correlation.kind, Value::Kind::kString);
}

TEST(NativeReader, RuleResultsWithSpeedups) {
  const auto& rules = multi().kernels[2].rules;
  auto find = [&](const std::string& id) -> const RuleResult* {
    for (const auto& r : rules)
      if (r.id == id) return &r;
    return nullptr;
  };
  const RuleResult* smc = find("SharedMemoryConflicts");
  ASSERT_NE(smc, nullptr);
  EXPECT_EQ(smc->section, "MemoryWorkloadAnalysis_Tables");
  ASSERT_EQ(smc->messages.size(), 2u);
  EXPECT_EQ(smc->messages[0].type, MessageType::kOptimization);
  EXPECT_EQ(smc->messages[0].speedup_type, "global");
  EXPECT_NEAR(*smc->messages[0].speedup_pct, 92.58, 0.005);
  EXPECT_NEAR(*smc->messages[1].speedup_pct, 92.52, 0.005);
  const RuleResult* lc = find("LaunchConfiguration");
  ASSERT_NE(lc, nullptr);
  ASSERT_EQ(lc->messages.size(), 2u);
  EXPECT_EQ(lc->messages[1].title, "Tail Effect");
  EXPECT_EQ(*lc->messages[1].speedup_pct, 25.0);
  const RuleResult* pm = find("PMSamplingData");
  ASSERT_NE(pm, nullptr);
  EXPECT_EQ(pm->messages.at(0).type, MessageType::kWarning);
  const RuleResult* cpi = find("CPIStall");
  ASSERT_NE(cpi, nullptr);
  EXPECT_FALSE(cpi->markers.empty());
}

TEST(NativeReader, SaxpyFixture) {
  const Report& r = saxpy();
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_EQ(r.kernels[0].name, "saxpy(int, float, const float *, float *)");
  EXPECT_EQ(*r.kernels[0].number("gpu__time_duration.sum"), 57920);
  EXPECT_EQ(r.kernels[0].clock_locked, std::optional<bool>(false));
  EXPECT_TRUE(r.source_files.empty());
}

// The acceptance test: every metric cell of ncu's base-units raw export equals the natively read
// value rendered the way ncu renders base units (format_base), for every kernel.
TEST(ValueForValue, MultiRawBaseMatchesNativeExactly) {
  auto rows = parse_csv(read("multi_raw_base.csv"));
  ASSERT_TRUE(rows.ok());
  const CsvRow& header = (*rows)[0];
  ASSERT_EQ(rows->size(), 2u + multi().kernels.size());
  size_t compared = 0;
  for (size_t k = 0; k < multi().kernels.size(); ++k) {
    const KernelResult& kernel = multi().kernels[k];
    const CsvRow& row = (*rows)[2 + k];
    EXPECT_EQ(row[4], kernel.name);
    for (size_t c = 11; c < header.size(); ++c) {
      const Metric* m = kernel.find(header[c]);
      ASSERT_NE(m, nullptr) << header[c] << " missing natively in result " << k;
      std::string expected = row[c];
      if (expected == "no data") {
        EXPECT_EQ(m->value.kind, Value::Kind::kNone) << header[c];
        EXPECT_TRUE(m->instances.empty()) << header[c];
      } else {
        EXPECT_EQ(format_base(m->value), expected) << header[c] << " in result " << k;
      }
      ++compared;
    }
  }
  EXPECT_EQ(compared, 3u * 2227u);
}

// Auto-units exports (the only form of the saxpy fixture): the CSV reader converts the printed value
// back to base units; it must equal the native value to the precision ncu printed (half a unit in
// the last printed decimal, times the unit's scale).
void expect_auto_units_match(const Report& native, const std::string& text, size_t expected_cells) {
  auto rows = parse_csv(text);
  ASSERT_TRUE(rows.ok());
  auto parsed = parse_raw_page(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->kernels.size(), native.kernels.size());
  const CsvRow& header = (*rows)[0];
  const CsvRow& units = (*rows)[1];
  size_t compared = 0;
  for (size_t k = 0; k < native.kernels.size(); ++k) {
    const CsvRow& row = (*rows)[2 + k];
    for (size_t c = 11; c < header.size(); ++c) {
      const Metric* nat = native.kernels[k].find(header[c]);
      const Metric* csv = parsed->kernels[k].find(header[c]);
      ASSERT_NE(nat, nullptr) << header[c];
      ASSERT_NE(csv, nullptr) << header[c];
      ++compared;
      const std::string& text_cell = row[c];
      if (text_cell.empty() || text_cell == "no data") {
        // The auto-units export leaves launch__kernel_name empty although the report stores it.
        if (header[c] != "launch__kernel_name") {
          EXPECT_EQ(nat->value.kind, Value::Kind::kNone) << header[c];
        }
        continue;
      }
      if (!csv->value.is_number()) {
        EXPECT_EQ(nat->value.text, csv->value.text) << header[c];
        continue;
      }
      ASSERT_TRUE(nat->value.is_number()) << header[c];
      if (std::isnan(nat->value.number)) {
        EXPECT_TRUE(std::isnan(csv->value.number)) << header[c];
        continue;
      }
      size_t dot = text_cell.find('.');
      int decimals = dot == std::string::npos ? 0 : static_cast<int>(text_cell.size() - dot - 1);
      auto scale = unit_scale(units[c]);
      double factor = scale ? scale->factor : 1.0;
      double tolerance = 0.5 * std::pow(10.0, -decimals) * factor * (1 + 1e-9) + 1e-9 * std::fabs(nat->value.number);
      EXPECT_LE(std::fabs(nat->value.number - csv->value.number), tolerance)
          << header[c] << " result " << k << ": native " << nat->value.number << " csv '" << text_cell << "' "
          << units[c];
      if (scale) {
        EXPECT_EQ(csv->unit, scale->base_unit) << header[c];
      }
    }
  }
  EXPECT_EQ(compared, expected_cells);
}

TEST(ValueForValue, MultiRawAutoUnitsMatchNative) {
  expect_auto_units_match(multi(), read("multi_raw_autounits.csv"), 3u * 2227u);
}
TEST(ValueForValue, SaxpyRawAutoUnitsMatchNative) { expect_auto_units_match(saxpy(), read("saxpy_raw.csv"), 2227u); }

// A report made on the H200 by `kda ncu profile` (the DSA indexer baseline, two kernels, PM sampling and
// imported source) against `ncu --import <rep> --csv --page raw` run on the same machine (run 14).
TEST(ValueForValue, H200IndexerReportMatchesNcusRawExport) {
  const std::string dir = std::string(KDA_SOURCE_DIR) + "/bench/results/h200/profiles_2026-11-30_run14/";
  auto rep = read_ncu_rep(dir + "dsa_indexer_naive.ncu-rep");
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  ASSERT_EQ(rep->kernels.size(), 2u);
  auto csv = fs::read_file(dir + "dsa_indexer_naive.raw.csv");
  ASSERT_TRUE(csv.ok()) << csv.status().message();
  expect_auto_units_match(*rep, *csv, 2u * 2227u);
}

TEST(Units, InferenceAgreesWithBaseExportMostly) {
  auto rows = parse_csv(read("multi_raw_base.csv"));
  ASSERT_TRUE(rows.ok());
  size_t agree = 0, total = 0;
  for (size_t c = 11; c < (*rows)[0].size(); ++c, ++total)
    if (infer_unit((*rows)[0][c]) == (*rows)[1][c]) ++agree;
  EXPECT_GE(agree, 2078u) << "of " << total;
  EXPECT_EQ(infer_unit("gpu__time_duration.sum"), "ns");
  EXPECT_EQ(infer_unit("dram__bytes_read.sum"), "byte");
  EXPECT_EQ(infer_unit("dram__bytes.sum.per_second"), "byte/s");
  EXPECT_EQ(infer_unit("sm__throughput.avg.pct_of_peak_sustained_elapsed"), "%");
  EXPECT_EQ(infer_unit("sm__cycles_elapsed.avg.per_second"), "hz");
}

TEST(Csv, QuotesSeparatorsAndNumbers) {
  auto rows = parse_csv("\"a\",\"b, c\",\"d\"\"e\"\n\"1,234.5\",,x\r\n");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0][1], "b, c");
  EXPECT_EQ((*rows)[0][2], "d\"e");
  EXPECT_EQ((*rows)[1].size(), 3u);
  EXPECT_EQ(*parse_ncu_number((*rows)[1][0]), 1234.5);
  EXPECT_FALSE(parse_ncu_number("no data"));
  EXPECT_FALSE(parse_ncu_number("(256, 1, 1)"));
  EXPECT_FALSE(parse_ncu_number(""));
  EXPECT_TRUE(std::isnan(*parse_ncu_number("nan")));
  EXPECT_FALSE(parse_csv("\"open").ok());
}

TEST(CsvPages, DetectsPages) {
  EXPECT_EQ(detect_csv_page(read("multi_raw_base.csv")), CsvPage::kRaw);
  EXPECT_EQ(detect_csv_page(read("multi_details.csv")), CsvPage::kDetails);
  EXPECT_EQ(detect_csv_page(read("multi_source.csv")), CsvPage::kSource);
  EXPECT_EQ(detect_csv_page(read("saxpy_source.csv")), CsvPage::kSource);
  EXPECT_EQ(detect_csv_page("hello,world\n"), CsvPage::kUnknown);
}

TEST(CsvPages, DetailsPageMapsLabelsAndRules) {
  auto r = parse_details_page(read("multi_details.csv"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->kernels.size(), 3u);
  const KernelResult& smem = r->kernels[2];
  EXPECT_EQ(smem.name, "smem(float *)");
  EXPECT_EQ(*smem.number("gpu__time_duration.sum"), 13600);  // "13.60 us"
  EXPECT_EQ(smem.find("gpu__time_duration.sum")->unit, "ns");
  EXPECT_EQ(*smem.number("launch__occupancy_limit_warps"), 2);
  size_t rule_rows = 0;
  for (const auto& rule : smem.rules) rule_rows += rule.messages.size();
  EXPECT_EQ(rule_rows, 17u);
  bool found = false;
  for (const auto& rule : smem.rules)
    if (rule.id == "SharedMemoryConflicts") {
      found = true;
      ASSERT_EQ(rule.messages.size(), 2u);
      EXPECT_EQ(*rule.messages[0].speedup_pct, 92.58);
      EXPECT_EQ(rule.messages[0].speedup_type, "global");
    }
  EXPECT_TRUE(found);
}

TEST(CsvPages, SourcePageDeduplicatesRepeatedListing) {
  auto r = parse_source_page(read("multi_source.csv"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->kernels.size(), 1u);
  const auto& k = r->kernels[0];
  EXPECT_EQ(k.name, "smem(float *)");
  size_t sass = 0, lines = 0;
  double samples = 0;
  for (const auto& row : k.source) {
    if (row.address != 0) {
      ++sass;
      EXPECT_EQ(row.line, 2);
      samples += row.counters.count("Warp Stall Sampling (All Samples)")
                     ? row.counters.at("Warp Stall Sampling (All Samples)")
                     : 0;
    } else {
      ++lines;
    }
  }
  EXPECT_EQ(sass, 40u);
  EXPECT_EQ(lines, 1u);
  EXPECT_EQ(samples, 1053);  // equals smsp__pcsamp_sample_count of result 2
  auto s = parse_source_page(read("saxpy_source.csv"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kernels[0].source.size(), 32u);
  EXPECT_EQ(s->kernels[0].name, "saxpy(int, float, const float *, float *)");
}

TEST(Load, MergesCsvPagesAndNamesBadFiles) {
  auto r = load_report({fixture("multi_raw_base.csv"), fixture("multi_details.csv"), fixture("multi_source.csv")});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->kernels.size(), 3u);
  size_t native_rules_with_messages = 0;
  for (const auto& rule : multi().kernels[2].rules) native_rules_with_messages += rule.messages.empty() ? 0 : 1;
  EXPECT_EQ(r->kernels[2].rules.size(), native_rules_with_messages);  // details carries only rules with messages
  EXPECT_EQ(r->kernels[2].source.size(), 41u);
  auto missing = load_report(std::filesystem::path("/nonexistent/x.ncu-rep"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/x.ncu-rep"), std::string::npos);
  auto bad = parse_ncu_rep(std::string("NVR\0\2\0\0\0\x08\x06", 10));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("version 6"), std::string::npos);
}

}  // namespace
}  // namespace kda::ncu
