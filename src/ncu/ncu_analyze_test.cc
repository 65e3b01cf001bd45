#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ncu/analyze.h"
#include "ncu/load.h"
#include "ncu/report_reader.h"
#include "ncu/test_fixtures.h"

namespace kda::ncu {
namespace {

using testing::fixture;

const Report& multi() {
  static const Report r = [] {
    auto rep = read_ncu_rep(fixture("multi.ncu-rep"));
    EXPECT_TRUE(rep.ok()) << rep.status().message();
    return rep.ok() ? *rep : Report{};
  }();
  return r;
}

const Analysis& multi_analysis() {
  static const Analysis a = [] {
    auto res = analyze(multi());
    EXPECT_TRUE(res.ok()) << res.status().message();
    return res.ok() ? *res : Analysis{};
  }();
  return a;
}

bool has_wiki(const Priority& p, const std::string& id) {
  return std::find(p.wiki.begin(), p.wiki.end(), id) != p.wiki.end();
}

const Evidence* find_evidence(const Priority& p, const std::string& metric) {
  for (const auto& e : p.evidence)
    if (e.metric == metric) return &e;
  return nullptr;
}

TEST(Analyze, StridedSaxpyTopPriorityIsCoalescing) {
  ASSERT_EQ(multi_analysis().kernels.size(), 3u);
  const KernelAnalysis& k = multi_analysis().kernels[0];
  ASSERT_FALSE(k.priorities.empty());
  const Priority& top = k.priorities[0];
  EXPECT_EQ(top.id, "global-coalescing");
  EXPECT_NEAR(top.expected_gain_pct, 72.86,
              0.01);  // MemoryCacheAccessPattern, global, folded with UncoalescedGlobalAccess
  EXPECT_NE(top.gain_basis.find("UncoalescedGlobalAccess"), std::string::npos);
  EXPECT_TRUE(has_wiki(top, "diagnosis/memory-bound-uncoalesced"));
  EXPECT_TRUE(has_wiki(k.priorities[1], "diagnosis/long-scoreboard-stalls"));
  const Evidence* bps = find_evidence(top, "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio");
  ASSERT_NE(bps, nullptr);
  EXPECT_NEAR(bps->value, 7.11, 0.01);
  EXPECT_NEAR(*k.memory.sectors_per_request_ld, 18.0, 1e-9);
  EXPECT_FALSE(top.source_evidence.empty());  // the load PC with excessive sectors
  EXPECT_EQ(k.roofline.bound, "memory");
  EXPECT_EQ(k.roofline.peak_source, "report");
  EXPECT_NEAR(k.roofline.fraction_of_roof, 0.91, 0.02);
  EXPECT_EQ(k.occupancy.limiters, std::vector<std::string>{"warps"});
  EXPECT_NEAR(k.occupancy.waves_per_sm, 62.06, 0.01);
  ASSERT_FALSE(k.stalls.empty());
  EXPECT_EQ(k.stalls[0].reason, "long_scoreboard");
  ASSERT_FALSE(k.hotspots.empty());
  EXPECT_EQ(k.hotspots[0].top_stall, "long_scoreboard");
  EXPECT_TRUE(k.timeline.present);
  EXPECT_EQ(k.timeline.shape, "steady");
  EXPECT_GT(k.timeline.samples, 90u);
  // The L2-compression rule misfires on plain cudaMalloc buffers: kept, flagged, never a priority.
  auto l2 = std::find_if(k.rules.begin(), k.rules.end(),
                         [](const RuleFinding& r) { return r.rule_id == "MemoryL2Compression"; });
  ASSERT_NE(l2, k.rules.end());
  EXPECT_TRUE(l2->noisy);
  for (const auto& p : k.priorities) EXPECT_NE(p.id, "l2-compression");
}

TEST(Analyze, SmemTopPriorityIsBankConflictsWithSourceLines) {
  auto r = load_report({fixture("multi.ncu-rep"), fixture("multi_source.csv")});
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto a = analyze(*r, {.kernel_regex = "^smem"});
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->kernels.size(), 1u);
  const KernelAnalysis& k = a->kernels[0];
  ASSERT_FALSE(k.priorities.empty());
  EXPECT_LE(k.priorities.size(), 5u);
  const Priority& top = k.priorities[0];
  EXPECT_EQ(top.id, "shared-bank-conflicts");
  EXPECT_EQ(top.effort, "low");
  EXPECT_TRUE(has_wiki(top, "diagnosis/bank-conflicts"));
  EXPECT_NEAR(top.expected_gain_pct, 92.58, 0.01);  // max of the overlapping estimates, not their sum
  ASSERT_NE(find_evidence(top, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"), nullptr);
  EXPECT_EQ(find_evidence(top, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum")->value, 988890);
  // Per-PC excessive wavefronts joined to the CUDA line (and its text) from the source page and grouped
  // by line: the LDS and the STS of line 2 are one finding, with the metric's whole total.
  ASSERT_EQ(top.source_evidence.size(), 1u) << ::testing::PrintToString(top.source_evidence);
  const std::string& line2 = top.source_evidence[0];
  EXPECT_NE(line2.find("line 2 `__global__ void smem"), std::string::npos) << line2;
  EXPECT_NE(line2.find("2 instructions (e.g. STS"), std::string::npos) << line2;
  const Metric* excessive = nullptr;
  for (const auto& kr : r->kernels)
    if (kr.name.starts_with("smem")) excessive = kr.find("derived__memory_l1_wavefronts_shared_excessive");
  ASSERT_NE(excessive, nullptr);
  EXPECT_NE(line2.find(fmt::format("{:.0f} excessive shared wavefronts", excessive->value.number)), std::string::npos)
      << line2;
  ASSERT_FALSE(k.hotspots.empty());
  EXPECT_EQ(k.hotspots[0].line, 2);
  EXPECT_FALSE(k.hotspots[0].sass.empty());
  EXPECT_NE(k.hotspots[0].source.find("__global__ void smem"), std::string::npos);
  EXPECT_EQ(k.stalls[0].reason, "short_scoreboard");
  // Rules: de-duplicated (SharedMemoryConflicts folds UncoalescedSharedAccess), ranked by global estimate.
  ASSERT_FALSE(k.rules.empty());
  EXPECT_EQ(k.rules[0].group, "shared-bank-conflicts");
  EXPECT_EQ(k.rules[0].also, std::vector<std::string>{"UncoalescedSharedAccess"});
  EXPECT_EQ(k.rules[1].group, "tail-effect");
  std::vector<std::string> ids;
  for (const auto& p : k.priorities) ids.push_back(p.id);
  EXPECT_NE(std::find(ids.begin(), ids.end(), "tail-effect"), ids.end());
  for (size_t i = 1; i < k.priorities.size(); ++i)
    EXPECT_GE(k.priorities[i - 1].expected_gain_pct, k.priorities[i].expected_gain_pct);
}

TEST(Analyze, PlainSaxpyIsMemoryBoundWithoutCoalescingIssue) {
  auto rep = read_ncu_rep(fixture("saxpy.ncu-rep"));
  ASSERT_TRUE(rep.ok());
  auto a = analyze(*rep);
  ASSERT_TRUE(a.ok());
  const KernelAnalysis& k = a->kernels[0];
  EXPECT_NEAR(*k.memory.bytes_per_sector_ld, 32, 1e-9);
  EXPECT_NEAR(*k.memory.sectors_per_request_ld, 4, 1e-9);
  for (const auto& p : k.priorities) EXPECT_NE(p.id, "global-coalescing");
  std::vector<std::string> ids;
  for (const auto& p : k.priorities) ids.push_back(p.id);
  EXPECT_NE(std::find(ids.begin(), ids.end(), "dram-bandwidth"), ids.end());
  EXPECT_EQ(k.roofline.bound, "memory");
  EXPECT_NEAR(k.occupancy.achieved_pct, 74.03, 0.01);
}

TEST(Analyze, JsonCarriesHeadlineMetricsInBaseUnits) {
  nlohmann::json j = to_json(multi_analysis());
  ASSERT_EQ(j["kernels"].size(), 3u);
  EXPECT_EQ(j["kernels"][0]["metrics"]["gpu__time_duration.sum"], 152032.0);
  EXPECT_EQ(j["kernels"][2]["metrics"]["gpu__time_duration.sum"], 13600.0);
  EXPECT_NEAR(j["kernels"][0]["metrics"]["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"].get<double>(), 91.40,
              0.005);
  EXPECT_NEAR(j["kernels"][0]["metrics"]["sm__cycles_elapsed.avg.per_second"].get<double>(), 1506788044.62, 0.01);
  for (const auto& k : j["kernels"]) {
    ASSERT_LE(k["priorities"].size(), 5u);
    for (const auto& p : k["priorities"]) {
      EXPECT_TRUE(p.contains("expected_gain_pct"));
      EXPECT_TRUE(p.contains("effort"));
      EXPECT_FALSE(p["evidence"].empty()) << p["id"];
    }
  }
  EXPECT_EQ(j["kernels"][0]["priorities"][0]["id"], "global-coalescing");
}

TEST(Analyze, MarkdownNamesKernelsAndPriorities) {
  std::string md = to_markdown(multi_analysis());
  EXPECT_NE(md.find("## Kernel 2: `smem(float *)`"), std::string::npos);
  EXPECT_NE(md.find("Shared-memory bank conflicts"), std::string::npos);
  EXPECT_NE(md.find("Uncoalesced global loads"), std::string::npos);
  EXPECT_NE(md.find("known to misfire"), std::string::npos);
}

TEST(Analyze, CsvRouteAgreesWithNativeOnTopPriority) {
  auto r = load_report({fixture("multi_raw_base.csv"), fixture("multi_details.csv")});
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto a = analyze(*r);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->kernels.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_FALSE(a->kernels[i].priorities.empty());
    EXPECT_EQ(a->kernels[i].priorities[0].id, multi_analysis().kernels[i].priorities[0].id) << i;
    EXPECT_NEAR(a->kernels[i].priorities[0].expected_gain_pct,
                multi_analysis().kernels[i].priorities[0].expected_gain_pct, 0.005);
  }
}

TEST(Analyze, KernelFilterErrors) {
  auto bad = analyze(multi(), {.kernel_regex = "("});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().kind(), ErrorKind::kBadInput);
  auto none = analyze(multi(), {.kernel_regex = "gemm"});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("gemm"), std::string::npos);
  auto two = analyze(multi(), {.kernel_regex = "saxpy"});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->kernels.size(), 2u);
}

TEST(Analyze, WikiIdsAreListed) {
  const auto& ids = wiki_page_ids();
  for (const auto& k : multi_analysis().kernels)
    for (const auto& p : k.priorities)
      for (const auto& w : p.wiki) EXPECT_NE(std::find(ids.begin(), ids.end(), w), ids.end()) << w;
}

}  // namespace
}  // namespace kda::ncu

namespace kda::ncu {
namespace {

Metric number_metric(const std::string& name, double v) {
  Metric m;
  m.name = name;
  m.value = Value::of_double(v);
  return m;
}

// A synthetic tensor-core kernel (no GPU report of one in the fixtures): the FP32 roof must not
// call it memory-bound, and a busy tensor pipe gives the tensor-pipe-roof priority.
TEST(Analyze, TensorCoreKernelIsComputeBound) {
  Report r;
  KernelResult k;
  k.name = "gemm_wgmma";
  k.metrics = {number_metric("gpu__time_duration.sum", 1e6),
               number_metric("sm__throughput.avg.pct_of_peak_sustained_elapsed", 72),
               number_metric("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 35),
               number_metric("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 20),
               number_metric("dram__bytes.sum.per_second", 1e12),
               number_metric("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", 70),
               number_metric("sm__ops_path_tensor_src_bf16_dst_fp32.sum.per_second", 6e14)};
  k.reindex();
  r.kernels.push_back(k);
  auto a = analyze(r);
  ASSERT_TRUE(a.ok());
  const KernelAnalysis& ka = a->kernels[0];
  EXPECT_EQ(ka.roofline.bound, "compute");
  EXPECT_EQ(ka.roofline.tensor_ops_per_s, 6e14);
  EXPECT_EQ(ka.roofline.peak_source, "H200 defaults");
  ASSERT_FALSE(ka.priorities.empty());
  EXPECT_EQ(ka.priorities[0].id, "tensor-pipe-roof");
  EXPECT_NEAR(ka.priorities[0].expected_gain_pct, 10, 1e-9);
}

// An FP32 kernel below the ridge stays memory-bound with a percent of tensor-pipe noise and busier
// SM sub-units than memory (issue 21: it was called compute-bound).
TEST(Analyze, TensorPipeNoiseDoesNotMakeAnFp32KernelComputeBound) {
  Report r;
  KernelResult k;
  k.name = "fp32_stencil";
  k.metrics = {number_metric("gpu__time_duration.sum", 1e6),
               number_metric("smsp__cycles_elapsed.avg.per_second", 1.5e9),
               number_metric("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed", 2600),
               number_metric("dram__bytes.sum.per_second", 1e12),
               number_metric("sm__throughput.avg.pct_of_peak_sustained_elapsed", 60),
               number_metric("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 55),
               number_metric("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", 1.2)};
  k.reindex();
  r.kernels.push_back(k);
  auto a = analyze(r);
  ASSERT_TRUE(a.ok());
  const Roofline& roof = a->kernels[0].roofline;
  EXPECT_NEAR(roof.arithmetic_intensity, 7.8, 1e-9);
  EXPECT_GT(roof.ridge_point, roof.arithmetic_intensity);
  EXPECT_EQ(roof.bound, "memory");
}

// A large straight-line kernel that runs for a few microseconds (the MoE route: 67 KiB of code, one warp,
// 17 us) gets the code-fetch priority; the same code in a 6 ms kernel, or 4 KiB in the short one, does not.
TEST(Analyze, LargeCodeInAShortKernelIsACodeFetchPriority) {
  auto priorities_of = [](uint64_t code_bytes, double duration_ns) {
    Report r;
    KernelResult k;
    k.name = "route";
    k.code_bytes = code_bytes;
    k.metrics = {number_metric("gpu__time_duration.sum", duration_ns),
                 number_metric("launch__waves_per_multiprocessor", 0.0006)};
    k.reindex();
    r.kernels.push_back(k);
    auto a = analyze(r);
    EXPECT_TRUE(a.ok());
    return a.ok() ? a->kernels[0] : KernelAnalysis{};
  };
  auto find = [](const KernelAnalysis& ka) -> const Priority* {
    for (const auto& p : ka.priorities)
      if (p.id == "code-fetch") return &p;
    return nullptr;
  };
  const KernelAnalysis route = priorities_of(67 * 1024, 17120);
  EXPECT_EQ(route.code_bytes, std::optional<uint64_t>(67 * 1024));
  const Priority* p = find(route);
  ASSERT_NE(p, nullptr);
  EXPECT_NEAR(p->expected_gain_pct, 90, 1e-9);  // 67 KiB x 0.23 us = 15.4 us of 17.1: capped at 90 %
  EXPECT_TRUE(has_wiki(*p, "diagnosis/code-fetch"));
  const Evidence* bytes = find_evidence(*p, "code_bytes (the kernel's .text in the report's cubin)");
  ASSERT_NE(bytes, nullptr);
  EXPECT_EQ(bytes->value, 67.0 * 1024);
  const KernelAnalysis mid = priorities_of(42 * 1024, 86e3);  // wy_prepare at T = 8192: 9.7 of 86 us
  ASSERT_NE(find(mid), nullptr);
  EXPECT_NEAR(find(mid)->expected_gain_pct, 100 * 42 * 230 / 86e3, 1e-9);
  EXPECT_EQ(find(priorities_of(67 * 1024, 6.4e6)), nullptr);  // the GEMM at T = 14107: fetch is noise
  EXPECT_EQ(find(priorities_of(4 * 1024, 2000)), nullptr);    // small code
  // 51 KiB done in 2.1 us (the indexer's rows that need no scoring): it cannot have fetched all of it
  EXPECT_EQ(find(priorities_of(51 * 1024, 2100)), nullptr);
  EXPECT_EQ(find(priorities_of(67 * 1024, 0)), nullptr);  // no duration: no estimate
  const std::string md = to_markdown(Analysis{.kernels = {route}});
  EXPECT_NE(md.find("Code 67.0 KiB."), std::string::npos) << md;
  EXPECT_EQ(to_json(Analysis{.kernels = {route}})["kernels"][0]["code_bytes"], 67 * 1024);
}

// A metric set from another architecture resolves through the aliases (sm_100 tensor pipe name).
TEST(Analyze, AliasesResolveOtherArchitectures) {
  Report r;
  KernelResult k;
  k.name = "k";
  k.metrics = {number_metric("sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_active", 55),
               number_metric("dram__bytes_op_read.sum", 4096)};
  k.reindex();
  r.kernels.push_back(k);
  auto a = analyze(r);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kernels[0].tensor_pipe_pct, std::optional<double>(55));
  bool read = false;
  for (const auto& [name, v] : a->kernels[0].headline) read |= name == "dram__bytes_op_read.sum" && v == 4096;
  EXPECT_TRUE(read);
}

}  // namespace
}  // namespace kda::ncu
