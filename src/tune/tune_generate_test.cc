#include "tune/generate.h"

#include <dlfcn.h>

#include <filesystem>
#include <map>

#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include "eval/solution_build.h"
#include "task/solution.h"
#include "tune/guard.h"

namespace kda::tune {
namespace {

// Each configuration's entry returns 100 + ID, and the dispatcher passes the return value through,
// so a call's return code says which configuration served it.
constexpr const char* kKernel = R"(#include <dlpack/dlpack.h>
#include <stdint.h>
namespace {
int code() { return 100 + ID; }
}  // namespace
extern "C" __attribute__((visibility("default"))) int run(const DLTensor* in, int64_t ni, DLTensor* out, int64_t no,
                                                          void* stream) {
  (void)in; (void)ni; (void)out; (void)no; (void)stream;
  return code();
}
)";

task::Definition toy_def() {
  task::Definition d;
  d.name = "toy";
  d.axes = {{"n", task::AxisSpec::Kind::kVar, 0, ""},
            {"m", task::AxisSpec::Kind::kVar, 0, ""},
            {"k", task::AxisSpec::Kind::kVar, 0, ""}};
  d.inputs = {{"x", std::vector<std::string>{"n", "m"}, tensor::DType::kFloat32, ""},
              {"eps", std::nullopt, tensor::DType::kFloat32, ""}};
  d.outputs = {{"y", std::vector<std::string>{"n", "k"}, tensor::DType::kFloat32, ""}};
  return d;
}

task::Solution toy_solution() {
  task::Solution s;
  s.name = "toy_tunable";
  s.definition = "toy";
  s.author = "test";
  s.spec.language = "cpp";
  s.spec.target_hardware = {"cpu"};
  s.spec.entry_point = "kernel.cc::run";
  s.sources = {{"kernel.cc", kKernel}, {"notes.h", "// a header, not a translation unit\n"}};
  return s;
}

Tunables toy_tunables() {
  auto t = parse_tunables("[parameters.ID]\nvalues = [1, 2, 3]\n", "tunables.toml", toy_def(), "kernel.cc::run",
                          {"kernel.cc", "notes.h"});
  EXPECT_TRUE(t.ok()) << t.status().message();
  return *t;
}

TEST(Generate, ConfigSolutionPrefixesTranslationUnitsOnly) {
  auto t = toy_tunables();
  auto cs = enumerate_configs(t);
  ASSERT_TRUE(cs.ok());
  auto s = config_solution(toy_solution(), t, (*cs)[1]);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->sources.size(), 2u);
  EXPECT_EQ(s->sources[0].content.rfind("// kda tune: configuration", 0), 0u);
  EXPECT_NE(s->sources[0].content.find("#define ID 2\n"), std::string::npos);
  EXPECT_NE(s->sources[0].content.find("#line 1 \"kernel.cc\"\n"), std::string::npos);
  EXPECT_EQ(s->sources[1].content, "// a header, not a translation unit\n");
  EXPECT_EQ(s->spec.entry_point, "kernel.cc::run");
}

TEST(Generate, AxisSourcesPreferInputsThenOutputs) {
  auto a = axis_sources(toy_def());
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->size(), 3u);
  EXPECT_EQ((*a)[0].axis, "n");
  EXPECT_FALSE((*a)[0].output);
  EXPECT_EQ((*a)[1].dim, 1u);
  EXPECT_EQ((*a)[2].axis, "k");
  EXPECT_TRUE((*a)[2].output);
}

TEST(Generate, DispatcherRoutesOnShapesAndFallsBack) {
  auto t = toy_tunables();
  auto cs = enumerate_configs(t);
  ASSERT_TRUE(cs.ok());
  std::vector<Route> routes{{"few_rows", {{"n", {1, 10}}}, 0}, {"wide", {{"m", {100, 200}}, {"k", {1, 8}}}, 1}};
  auto d = dispatcher_solution(toy_solution(), toy_def(), t, *cs, routes, 2);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->spec.entry_point, "kda_dispatch.cc::run");
  const auto* disp = d->source("kda_dispatch.cc");
  ASSERT_NE(disp, nullptr);
  EXPECT_EQ(disp->content.find(".data"), std::string::npos);  // shape-keyed only
  EXPECT_EQ(disp->content.find("->data"), std::string::npos);
  ASSERT_NE(d->source("c1/kernel.cc"), nullptr);
  EXPECT_NE(d->source("c1/kernel.cc")->content.find("#define run kda_tune_c1_run"), std::string::npos);

  auto lib = eval::build_solution(*d, {});
  ASSERT_TRUE(lib.ok()) << lib.status().message();
  ASSERT_TRUE(lib->ok) << lib->log;
  void* h = dlopen(lib->library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  using Entry = int (*)(const DLTensor*, int64_t, DLTensor*, int64_t, void*);
  auto fn = reinterpret_cast<Entry>(dlsym(h, "run"));
  ASSERT_NE(fn, nullptr);
  auto call = [&](int64_t n, int64_t m, int64_t k, int x_ndim = 2) {
    int64_t xs[2] = {n, m}, ys[2] = {n, k};
    DLTensor in[2] = {}, out[1] = {};
    in[0].ndim = x_ndim;
    in[0].shape = xs;
    in[1].ndim = 0;
    out[0].ndim = 2;
    out[0].shape = ys;
    return fn(in, 2, out, 1, nullptr);
  };
  EXPECT_EQ(call(5, 50, 4), 101);     // few_rows
  EXPECT_EQ(call(5, 150, 4), 101);    // first match wins
  EXPECT_EQ(call(50, 150, 4), 102);   // wide
  EXPECT_EQ(call(50, 150, 9), 103);   // k out of range: fallback
  EXPECT_EQ(call(50, 50, 4), 103);    // no regime: fallback
  EXPECT_EQ(call(5, 50, 4, 3), 103);  // unexpected rank: fallback
  dlclose(h);
}

// With `nearest`, a shape no route matches goes to the route whose ranges are nearest (the product of
// the out-of-range ratios, as tune::shape_distance in log2), the first on a tie; a call whose tensors
// have other ranks still goes to the fallback.
TEST(Generate, ANearestDispatcherRoutesUnmatchedShapesToTheNearestRegime) {
  auto t = toy_tunables();
  auto cs = enumerate_configs(t);
  ASSERT_TRUE(cs.ok());
  std::vector<Route> routes{{"small", {{"n", {1, 15}}, {"m", {128, 255}}}, 0},
                            {"large", {{"n", {256, 511}}, {"m", {4096, 8191}}}, 1}};
  Unmatched nearest;
  nearest.rule = Unmatched::Rule::kNearest;
  auto d = dispatcher_solution(toy_solution(), toy_def(), t, *cs, routes, 2, nullptr, nearest);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_NE(d->source("kda_dispatch.cc")->content.find("constexpr int kRule = 1;"), std::string::npos);
  auto lib = eval::build_solution(*d, {});
  ASSERT_TRUE(lib.ok() && lib->ok) << (lib.ok() ? lib->log : lib.status().message());
  void* h = dlopen(lib->library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  using Entry = int (*)(const DLTensor*, int64_t, DLTensor*, int64_t, void*);
  auto fn = reinterpret_cast<Entry>(dlsym(h, "run"));
  ASSERT_NE(fn, nullptr);
  auto call = [&](int64_t n, int64_t m, int x_ndim = 2) {
    int64_t xs[2] = {n, m}, ys[2] = {n, 1};
    DLTensor in[2] = {}, out[1] = {};
    in[0].ndim = x_ndim;
    in[0].shape = xs;
    out[0].ndim = 2;
    out[0].shape = ys;
    return fn(in, 2, out, 1, nullptr);
  };
  std::map<std::string, std::pair<int64_t, int64_t>> small = routes[0].ranges, large = routes[1].ranges;
  auto nearer = [&](int64_t n, int64_t m) {
    const std::map<std::string, int64_t> axes{{"n", n}, {"m", m}};
    return shape_distance(small, axes) <= shape_distance(large, axes) ? 101 : 102;
  };
  EXPECT_EQ(call(10, 200), 101);                // inside small
  EXPECT_EQ(call(251, 4099), 102);              // just outside large: 256 / 251
  EXPECT_EQ(call(97, 1031), nearer(97, 1031));  // between: the nearer one, as kda tune computes it
  EXPECT_EQ(call(97, 1031), 102);               // 256 / 97 * 4096 / 1031 = 10.5 beats 97 / 15 * 1031 / 255 = 26.1
  EXPECT_EQ(call(1, 1), 101);                   // 128 away from small, far more from large
  EXPECT_EQ(call(1 << 20, 1 << 20), 102);
  EXPECT_EQ(call(10, 200, 3), 103);  // unexpected rank: fallback
  dlclose(h);
}

// Under the margin rule a shape no route matches goes to its nearest visible workload's target only
// when every visible workload where that target was slower lies more than twice as far away (log2),
// else to the fallback: the generated code agrees with tune::margin_target on every shape tried.
TEST(Generate, AMarginDispatcherServesUnseenShapesAsTheGuardsRuleDoes) {
  auto t = toy_tunables();
  auto cs = enumerate_configs(t);
  ASSERT_TRUE(cs.ok());
  // Visible workloads: p1 (n 1) and p2 (n 16) on configuration 2 (the fallback, 103), p3 (n 128) on 0
  // (101), p4 (1024 x 1024) on 1 (102). Configuration 0 was slower than the baseline on p1 and p2, 1 on p3.
  GuardPlan plan;
  plan.points = {{"p1", {{"n", 1}, {"m", 4096}}, "c2"},
                 {"p2", {{"n", 16}, {"m", 4096}}, "c2"},
                 {"p3", {{"n", 128}, {"m", 4096}}, "c0"},
                 {"p4", {{"n", 1024}, {"m", 1024}}, "c1"}};
  plan.slower_on = {{"c0", {"p1", "p2"}}, {"c1", {"p3"}}, {"c2", {}}};
  Unmatched margin;
  margin.rule = Unmatched::Rule::kMargin;
  margin.factor = kMarginFactor;
  const std::map<std::string, size_t> index{{"c0", 0}, {"c1", 1}, {"c2", 2}};
  for (const auto& p : plan.points) margin.points.push_back({p.axes, index.at(p.target)});
  for (const auto& [target, ws] : plan.slower_on)
    for (const auto& w : ws)
      for (const auto& p : plan.points)
        if (p.workload == w) margin.slower.push_back({p.axes, index.at(target)});
  // One route, so that the unmatched shapes below really are unmatched.
  std::vector<Route> routes{{"tiny", {{"n", {2, 3}}, {"m", {2, 3}}}, 1}};
  auto d = dispatcher_solution(toy_solution(), toy_def(), t, *cs, routes, 2, nullptr, margin);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_NE(d->source("kda_dispatch.cc")->content.find("constexpr int kRule = 2;"), std::string::npos);
  auto lib = eval::build_solution(*d, {});
  ASSERT_TRUE(lib.ok() && lib->ok) << (lib.ok() ? lib->log : lib.status().message());
  void* h = dlopen(lib->library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  using Entry = int (*)(const DLTensor*, int64_t, DLTensor*, int64_t, void*);
  auto fn = reinterpret_cast<Entry>(dlsym(h, "run"));
  ASSERT_NE(fn, nullptr);
  auto call = [&](int64_t n, int64_t m) {
    int64_t xs[2] = {n, m}, ys[2] = {n, 1};
    DLTensor in[2] = {}, out[1] = {};
    in[0].ndim = 2;
    in[0].shape = xs;
    out[0].ndim = 2;
    out[0].shape = ys;
    return fn(in, 2, out, 1, nullptr);
  };
  auto expected = [&](int64_t n, int64_t m) {
    const std::string target = margin_target(plan, {{"n", n}, {"m", m}});
    return target.empty() ? 103 : 101 + static_cast<int>(index.at(target));
  };
  EXPECT_EQ(call(100, 4096), 101);   // p3 at log2(128/100) = 0.36; p2, where 0 is slower, at 2.64
  EXPECT_EQ(call(60, 4096), 103);    // p3 at 1.09, p2 at 1.91 < 2 x 1.09: too near a slower one
  EXPECT_EQ(call(40, 4096), 103);    // nearest p2 (1.32 against 1.68): its target, the fallback
  EXPECT_EQ(call(1000, 1000), 102);  // p4; p3, where 1 is slower, far away
  EXPECT_EQ(call(2, 2), 102);        // inside the route
  for (int64_t n : {1, 5, 17, 33, 70, 90, 129, 300, 700, 2000, 100000})
    for (int64_t m : {1, 64, 1000, 3000, 4096, 9000, 1 << 20}) {
      if (n >= 2 && n <= 3 && m >= 2 && m <= 3) continue;
      EXPECT_EQ(call(n, m), expected(n, m)) << n << " x " << m;
    }
  dlclose(h);
}

TEST(Generate, WriteSolutionDirLoadsBack) {
  auto t = toy_tunables();
  auto cs = enumerate_configs(t);
  auto d = dispatcher_solution(toy_solution(), toy_def(), t, *cs, {}, 0);
  ASSERT_TRUE(d.ok());
  auto dir = std::filesystem::temp_directory_path() / ("kda_tune_gen_" + std::to_string(::getpid()));
  ASSERT_TRUE(write_solution_dir(*d, dir).ok());
  auto back = task::load_solution(dir);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(task::solution_hash(*back), task::solution_hash(*d));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kda::tune
