// The built-in tunable solutions (tasks/{host,cuda}/<pack>/solutions/tunable): tunables.toml parses
// against the pack's definition, and the default, a middle and the last configuration, and a
// dispatcher over two of them, compile (CUDA ones with nvcc, where nvcc is installed).
#include <filesystem>

#include <gtest/gtest.h>

#include "eval/solution_build.h"
#include "task/task_pack.h"
#include "tune/generate.h"
#include "tune/tunables.h"

namespace kda::tune {
namespace {

class BuiltinTunable : public ::testing::TestWithParam<std::string> {};

TEST_P(BuiltinTunable, ParsesAndCompiles) {
  const std::filesystem::path pack_dir = std::filesystem::path(KDA_SOURCE_DIR) / "tasks" / GetParam();
  const auto dir = pack_dir / "solutions" / "tunable";
  auto pack = task::load_task_pack(pack_dir);
  ASSERT_TRUE(pack.ok()) << pack.status().message();
  auto base = task::load_solution(dir);
  ASSERT_TRUE(base.ok()) << base.status().message();
  EXPECT_EQ(base->definition, pack->definition.name);
  std::vector<std::string> paths;
  for (const auto& s : base->sources) paths.push_back(s.path);
  auto t = load_tunables(dir, pack->definition, base->spec.entry_point, paths);
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto cs = enumerate_configs(*t);
  ASSERT_TRUE(cs.ok()) << cs.status().message();
  ASSERT_GE(cs->size(), 4u);
  // Every configuration applies to at least one workload (the constraints leave nothing dead).
  size_t applicable_somewhere = 0;
  for (const auto& c : *cs) {
    bool any = false;
    for (const auto& w : pack->workloads) {
      auto axes = pack->definition.const_axes();
      for (const auto& [k, v] : w.axes) axes[k] = v;
      auto ok = applies_to(*t, c, axes);
      ASSERT_TRUE(ok.ok()) << ok.status().message();
      any = any || *ok;
    }
    applicable_somewhere += any;
  }
  EXPECT_EQ(applicable_somewhere, cs->size());
  std::vector<Config> picked{cs->front(), (*cs)[cs->size() / 2], cs->back()};
  for (const auto& c : picked) {
    auto sol = config_solution(*base, *t, c);
    ASSERT_TRUE(sol.ok());
    auto lib = eval::build_solution(*sol, {});
    if (!lib.ok() && lib.status().kind() == ErrorKind::kNotFound) GTEST_SKIP() << lib.status().message();
    ASSERT_TRUE(lib.ok()) << lib.status().message();
    EXPECT_TRUE(lib->ok) << c.label() << " " << lib->info.dump() << "\n" << lib->log;
  }
  std::vector<Route> routes{{"r", {{pack->definition.var_axes().front(), {1, 64}}}, 1}};
  auto disp = dispatcher_solution(*base, pack->definition, *t, {picked[0], picked[2]}, routes, 0);
  ASSERT_TRUE(disp.ok()) << disp.status().message();
  auto lib = eval::build_solution(*disp, {});
  ASSERT_TRUE(lib.ok()) << lib.status().message();
  EXPECT_TRUE(lib->ok) << lib->log;
}

INSTANTIATE_TEST_SUITE_P(Packs, BuiltinTunable,
                         ::testing::Values("host/rmsnorm", "host/softmax", "host/gemm", "cuda/rmsnorm", "cuda/softmax",
                                           "cuda/gemm"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s) ch = ch == '/' ? '_' : ch;
                           return s;
                         });

}  // namespace
}  // namespace kda::tune
