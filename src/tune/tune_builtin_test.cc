// The built-in tunable solutions (tasks/{host,cuda}/<pack>/solutions/tunable): tunables.toml parses
// against the pack's definition, and the default, a middle and the last configuration, and a
// dispatcher over two of them, compile (CUDA ones with nvcc, where nvcc is installed).
#include <algorithm>
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

// `kda eval --param`'s configuration: the named parameters at the given values, the rest at their first; ids
// as kda tune gives them; a value beyond the declared ones built with a note; unknown names, a malformed
// assignment, a variant that does not vary the parameter and a broken parameter-only constraint refused.
TEST(ConfiguredSolution, SetsTheNamedParametersAndRefusesWhatTheFileDoesNotAllow) {
  const std::filesystem::path src = KDA_SOURCE_DIR;
  const auto pack = task::load_task_pack(src / "tasks/host/rmsnorm");
  ASSERT_TRUE(pack.ok()) << pack.status().message();
  const auto dir = src / "tasks/host/rmsnorm/solutions/tunable";
  const auto base = task::load_solution(dir);
  ASSERT_TRUE(base.ok());
  auto c = configured_solution(*base, dir, pack->definition, {"UNROLL=8", "SCALE_UNROLL=8"});
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->notes.size(), 1u);  // the axis constraint, which kda tune applies per workload and eval does not
  EXPECT_NE(c->notes[0].find("also constrains configurations per workload ('ROWS * hidden_size <= 8192')"),
            std::string::npos)
      << c->notes[0];
  EXPECT_EQ(c->config.label(), "ROWS=1 SCALE_UNROLL=8 UNROLL=8");  // labels list parameters by name
  const std::string& code = c->solution.sources.front().content;
  EXPECT_NE(code.find("#define UNROLL 8\n"), std::string::npos) << code.substr(0, 300);
  EXPECT_NE(code.find("#define ROWS 1\n"), std::string::npos);
  EXPECT_EQ(c->solution.name, base->name + "_" + c->config.id());
  // The same configuration as kda tune enumerates it: the same id.
  std::vector<std::string> paths;
  for (const auto& f : base->sources) paths.push_back(f.path);
  const auto t = load_tunables(dir, pack->definition, base->spec.entry_point, paths);
  ASSERT_TRUE(t.ok());
  const auto all = enumerate_configs(*t);
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(std::any_of(all->begin(), all->end(), [&](const Config& x) { return x.id() == c->config.id(); }));

  auto beyond = configured_solution(*base, dir, pack->definition, {"UNROLL=3"});
  ASSERT_TRUE(beyond.ok()) << beyond.status().message();
  ASSERT_EQ(beyond->notes.size(), 2u);
  EXPECT_NE(beyond->notes[0].find("UNROLL=3 is not among the values"), std::string::npos) << beyond->notes[0];
  EXPECT_NE(beyond->solution.sources.front().content.find("#define UNROLL 3\n"), std::string::npos);

  for (const auto& [bad, says] : std::vector<std::pair<std::string, std::string>>{
           {"UNROLLS=8", "has no parameter UNROLLS (it has UNROLL, ROWS, SCALE_UNROLL)"},
           {"UNROLL", "expected NAME=VALUE"},
           {"variant=fast", "has no variant 'fast'"},
           {"UNROLL=8 // more", "is not one line of macro text"}}) {
    auto r = configured_solution(*base, dir, pack->definition, {bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  }
  // chunked_wy: PATH == 0 || SHORT_T == 64, a constraint on parameters alone.
  const auto gdn = task::load_task_pack(src / "tasks/contest/gdn_prefill_qk4_v8_d128_k_last");
  ASSERT_TRUE(gdn.ok()) << gdn.status().message();
  const auto wy_dir = src / "solutions/gdn_prefill_qk4_v8_d128_k_last/chunked_wy";
  const auto wy = task::load_solution(wy_dir);
  ASSERT_TRUE(wy.ok());
  auto broken = configured_solution(*wy, wy_dir, gdn->definition, {"PATH=2", "SHORT_T=32"});
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("breaks the constraint 'PATH == 0 || SHORT_T == 64'"), std::string::npos)
      << broken.status().message();
  // Macro text where the constraint compares numbers: refused, naming --param rather than the file alone.
  auto text = configured_solution(*wy, wy_dir, gdn->definition, {"PATH=+2"});
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().message().rfind("--param ", 0), 0u) << text.status().message();
  auto pairs = configured_solution(*wy, wy_dir, gdn->definition, {"PAIRS=12"});
  ASSERT_TRUE(pairs.ok()) << pairs.status().message();
  EXPECT_NE(pairs->solution.sources.front().content.find("#define PAIRS 12\n"), std::string::npos);
}

}  // namespace
}  // namespace kda::tune
