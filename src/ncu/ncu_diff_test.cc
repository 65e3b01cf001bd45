#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ncu/diff.h"
#include "ncu/report_reader.h"
#include "ncu/test_fixtures.h"

namespace kda::ncu {
namespace {

using testing::fixture;

Report load(const std::string& name) {
  auto r = read_ncu_rep(fixture(name));
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : Report{};
}

const MetricDelta* find(const KernelDiff& k, const std::string& metric) {
  for (const auto& d : k.deltas)
    if (d.metric == metric) return &d;
  return nullptr;
}

TEST(Diff, StridedToPlainSaxpyIsFasterAndCoalesced) {
  Report strided = load("multi.ncu-rep");
  Report plain = load("saxpy.ncu-rep");
  // The signatures differ ("float *" vs "const float *"): the first strided launch pairs with the
  // plain one by function name; the second launch and smem have no partner.
  ReportDiff d = diff_reports(strided, plain);
  ASSERT_EQ(d.kernels.size(), 1u);
  EXPECT_EQ(d.only_before.size(), 2u);
  EXPECT_EQ(d.kernels[0].id_before, 0);
  const KernelDiff& k = d.kernels[0];
  const MetricDelta* dur = find(k, "gpu__time_duration.sum");
  ASSERT_NE(dur, nullptr);
  EXPECT_EQ(dur->before, 152032);
  EXPECT_EQ(dur->after, 57920);
  EXPECT_NEAR(dur->delta_pct, 100.0 * (57920 - 152032) / 152032, 1e-9);
  EXPECT_NE(k.verdict.find("faster"), std::string::npos);
  const MetricDelta* spr = find(k, "sectors_per_request.global_ld");
  ASSERT_NE(spr, nullptr);
  EXPECT_EQ(spr->before, 18);
  EXPECT_EQ(spr->after, 4);
  ASSERT_FALSE(k.priorities_before.empty());
  EXPECT_EQ(k.priorities_before[0], "global-coalescing");
  for (const auto& id : k.priorities_after) EXPECT_NE(id, "global-coalescing");
  std::string md = to_markdown(d);
  EXPECT_NE(md.find("gpu__time_duration.sum"), std::string::npos);
  EXPECT_NE(md.find("-61.9%"), std::string::npos) << md;
  nlohmann::json j = to_json(d);
  EXPECT_EQ(j["kernels"][0]["deltas"][0]["metric"], "gpu__time_duration.sum");
}

TEST(Diff, MatchesLaunchesByNameAndOrder) {
  Report a = load("multi.ncu-rep");
  ReportDiff same = diff_reports(a, a);
  ASSERT_EQ(same.kernels.size(), 3u);
  EXPECT_EQ(same.kernels[1].id_before, 1);
  EXPECT_EQ(same.kernels[1].id_after, 1);
  for (const auto& k : same.kernels) {
    EXPECT_NE(k.verdict.find("unchanged"), std::string::npos);
    for (const auto& d : k.deltas) EXPECT_EQ(d.delta, 0) << d.metric;
  }
  Report b = a;
  b.kernels.pop_back();  // smem missing from the second report
  ReportDiff partial = diff_reports(a, b);
  EXPECT_EQ(partial.kernels.size(), 2u);
  ASSERT_EQ(partial.only_before.size(), 1u);
  EXPECT_EQ(partial.only_before[0], "smem(float *)");
  // The two saxpy launches of one report, compared with each other.
  Report first = a, second = a;
  first.kernels = {a.kernels[0]};
  second.kernels = {a.kernels[1]};
  ReportDiff launches = diff_reports(first, second);
  ASSERT_EQ(launches.kernels.size(), 1u);
  EXPECT_EQ(find(launches.kernels[0], "gpu__time_duration.sum")->delta, 151264.0 - 152032.0);
}

// One unmatched kernel on each side is compared as a rename only when they look like one kernel
// (a name word in common, or the same launch configuration); two unrelated kernels are reported as
// unpaired instead of as a speedup (issue 21).
TEST(Diff, RenamePairingNeedsAKernelThatLooksTheSame) {
  Report a = load("multi.ncu-rep");
  Report saxpy = a, smem = a;
  saxpy.kernels = {a.kernels[0]};
  smem.kernels = {a.kernels[2]};
  ASSERT_NE(saxpy.kernels[0].function_name, smem.kernels[0].function_name);
  ReportDiff unrelated = diff_reports(saxpy, smem);
  EXPECT_TRUE(unrelated.kernels.empty()) << unrelated.kernels[0].verdict;
  ASSERT_EQ(unrelated.only_before.size(), 1u);
  ASSERT_EQ(unrelated.only_after.size(), 1u);

  // Words that say how a kernel was written, not which kernel it is, do not make two kernels one.
  saxpy.kernels[0].function_name = "saxpy_naive";
  smem.kernels[0].function_name = "smem_naive";
  EXPECT_TRUE(diff_reports(saxpy, smem).kernels.empty());
  smem.kernels[0].function_name = a.kernels[2].function_name;

  // The same smem kernel under a new name that keeps a word of the old one: compared, and said so.
  Report renamed = smem;
  renamed.kernels[0].name = "smem_padded(float *)";
  renamed.kernels[0].function_name = "smem_padded";
  ReportDiff rename = diff_reports(smem, renamed);
  ASSERT_EQ(rename.kernels.size(), 1u);
  EXPECT_EQ(rename.kernels[0].renamed_from, "smem(float *)");
  EXPECT_NE(rename.kernels[0].verdict.find("compared as a rename of smem(float *)"), std::string::npos)
      << rename.kernels[0].verdict;
  EXPECT_EQ(to_json(rename)["kernels"][0]["renamed_from"], "smem(float *)");
}

}  // namespace
}  // namespace kda::ncu
