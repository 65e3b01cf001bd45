// GPU check of screening sessions on the CUDA backend (ctest label gpu; exit 77 = no device): one
// candidate runner loads each next library in place, keeps its CUDA context, and the verdicts are
// evaluate()'s; a failed candidate's runner is replaced. On the CUDA rmsnorm pack's first dev
// workload: the fast fixture, the naive baseline, the wrong fixture, the fast fixture again.
#include <gtest/gtest.h>

#include <filesystem>

#include "eval/evaluator.h"
#include "task/solution.h"
#include "task/task_pack.h"

namespace kda::eval {
namespace {

const std::filesystem::path kSource = KDA_SOURCE_DIR;

TEST(ScreenerCuda, ReloadsInOneRunnerWithEvaluatesVerdicts) {
  auto pack = task::load_task_pack(kSource / "tasks/cuda/rmsnorm");
  ASSERT_TRUE(pack.ok()) << pack.status().message();
  EvalOptions o;
  o.runner_binary = KDA_RUNNER;
  auto screener = Screener::open(*pack, o);
  ASSERT_TRUE(screener.ok()) << screener.status().message();
  const std::string first = pack->dev_uuids.at(0);
  auto screen = [&](const std::filesystem::path& dir) {
    auto sol = task::load_solution(dir);
    EXPECT_TRUE(sol.ok()) << sol.status().message();
    auto r = (*screener)->evaluate(*sol, first, 1, 2, 10);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : EvalReport{};
  };
  const auto fixtures = kSource / "tests/fixtures/solutions/cuda_rmsnorm";
  EvalReport fast = screen(fixtures / "fast");
  ASSERT_TRUE(fast.all_passed) << (fast.workloads.empty() ? "" : fast.workloads[0].message);
  EvalReport naive = screen(kSource / "tasks/cuda/rmsnorm/baselines/naive");
  ASSERT_TRUE(naive.all_passed) << (naive.workloads.empty() ? "" : naive.workloads[0].message);
  EXPECT_GT(naive.workloads[0].latency_ms, 0);
  // Where the calls' time went, by kernel: the naive baseline's one kernel, in every timed call, its median
  // within the call's span.
  const auto& by_kernel = naive.workloads[0].kda["kernel_ms_by_name"];
  ASSERT_EQ(by_kernel.size(), 1u) << by_kernel.dump();
  EXPECT_GT(by_kernel.begin()->at("median_ms").get<double>(), 0);
  EXPECT_LE(by_kernel.begin()->at("median_ms").get<double>(), naive.workloads[0].latency_ms * 1.5);
  EXPECT_GE(by_kernel.begin()->at("calls").get<int>(), 2);
  ScreenStats s = (*screener)->stats();
  EXPECT_EQ(s.candidate_runner_starts, 1);
  EXPECT_EQ(s.reloads, 1);
  EXPECT_GT(s.reference_reused, 0);
  EvalReport wrong = screen(fixtures / "wrong");
  ASSERT_EQ(wrong.workloads.size(), 1u);
  EXPECT_EQ(wrong.workloads[0].verdict, Verdict::kIncorrectNumerical);
  EvalReport again = screen(fixtures / "fast");
  EXPECT_TRUE(again.all_passed);
  s = (*screener)->stats();
  EXPECT_EQ(s.candidate_runner_starts, 2);
  EXPECT_EQ(s.reloads, 2);
}

}  // namespace
}  // namespace kda::eval

int main(int argc, char** argv) {
  if (!std::filesystem::exists("/dev/nvidia0") && !std::filesystem::exists("/dev/nvidiactl")) return 77;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
