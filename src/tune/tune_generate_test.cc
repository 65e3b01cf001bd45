#include "tune/generate.h"

#include <dlfcn.h>

#include <atomic>
#include <filesystem>
#include <limits>
#include <map>
#include <thread>
#include <vector>

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

// Two routes (small: n 1-15, m 128-255 on configuration 0; large: n 256-511, m 4096-8191 on 1),
// and their dispatcher under the nearest rule within `reach` (fallback: configuration 2).
std::vector<Route> two_routes() {
  return {{"small", {{"n", {1, 15}}, {"m", {128, 255}}}, 0}, {"large", {{"n", {256, 511}}, {"m", {4096, 8191}}}, 1}};
}

Result<task::Solution> nearest_dispatcher(const std::vector<Route>& routes,
                                          double reach = std::numeric_limits<double>::infinity(),
                                          std::optional<size_t> beyond = std::nullopt) {
  auto t = toy_tunables();
  KDA_ASSIGN_OR_RETURN(auto cs, enumerate_configs(t));
  Unmatched nearest;
  nearest.rule = Unmatched::Rule::kNearest;
  nearest.reach = reach;
  nearest.beyond = beyond;
  return dispatcher_solution(toy_solution(), toy_def(), t, cs, routes, 2, nullptr, nearest);
}

// A built dispatcher, loaded: call(n, m, k, x_ndim) calls its entry with x of shape n x m (rank
// x_ndim) and y of shape n x k, and returns the code of the configuration that served it.
class Dispatcher {
 public:
  explicit Dispatcher(const task::Solution& d) {
    auto lib = eval::build_solution(d, {});
    if (!lib.ok() || !lib->ok) {
      error_ = lib.ok() ? lib->log : lib.status().message();
      return;
    }
    handle_ = dlopen(lib->library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      error_ = dlerror();
      return;
    }
    fn_ = reinterpret_cast<Entry>(dlsym(handle_, "run"));
    if (fn_ == nullptr) error_ = "no entry 'run'";
  }
  ~Dispatcher() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;
  bool ok() const { return fn_ != nullptr; }
  const std::string& error() const { return error_; }
  int call(int64_t n, int64_t m, int64_t k = 1, int x_ndim = 2) const {
    int64_t xs[2] = {n, m}, ys[2] = {n, k};
    DLTensor in[2] = {}, out[1] = {};
    in[0].ndim = x_ndim;
    in[0].shape = xs;
    out[0].ndim = 2;
    out[0].shape = ys;
    return fn_(in, 2, out, 1, nullptr);
  }

 private:
  using Entry = int (*)(const DLTensor*, int64_t, DLTensor*, int64_t, void*);
  void* handle_ = nullptr;
  Entry fn_ = nullptr;
  std::string error_;
};

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

  const Dispatcher disp_lib(*d);
  ASSERT_TRUE(disp_lib.ok()) << disp_lib.error();
  auto call = [&](int64_t n, int64_t m, int64_t k, int x_ndim = 2) { return disp_lib.call(n, m, k, x_ndim); };
  EXPECT_EQ(call(5, 50, 4), 101);     // few_rows
  EXPECT_EQ(call(5, 150, 4), 101);    // first match wins
  EXPECT_EQ(call(50, 150, 4), 102);   // wide
  EXPECT_EQ(call(50, 150, 9), 103);   // k out of range: fallback
  EXPECT_EQ(call(50, 50, 4), 103);    // no regime: fallback
  EXPECT_EQ(call(5, 50, 4, 3), 103);  // unexpected rank: fallback
}

// With `nearest`, a shape no route matches goes to the route whose ranges are nearest (the product of
// the out-of-range ratios, as tune::shape_distance in log2), the first on a tie; a call whose tensors
// have other ranks still goes to the fallback.
TEST(Generate, ANearestDispatcherRoutesUnmatchedShapesToTheNearestRegime) {
  const std::vector<Route> routes = two_routes();
  auto d = nearest_dispatcher(routes);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_NE(d->source("kda_dispatch.cc")->content.find("constexpr int kRule = 1;"), std::string::npos);
  const Dispatcher disp_lib(*d);
  ASSERT_TRUE(disp_lib.ok()) << disp_lib.error();
  auto call = [&](int64_t n, int64_t m, int x_ndim = 2) { return disp_lib.call(n, m, 1, x_ndim); };
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
}

// A rule serves an unmatched shape only as far out as kda tune checked it (Unmatched::reach, log2):
// farther, the fallback. And the memo of the last shape's route never hands one caller another
// shape's route: threads calling different shapes at once each get their own route every time.
TEST(Generate, ANearestDispatcherServesNoShapeBeyondTheRulesReach) {
  const std::vector<Route> routes = two_routes();
  // The reach: log2(1024 / 255) = 2.006.
  auto d = nearest_dispatcher(routes, shape_distance(routes[0].ranges, {{"n", 1}, {"m", 1024}}));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_NE(d->source("kda_dispatch.cc")->content.find("constexpr bool kCapped = true;"), std::string::npos);
  const Dispatcher disp_lib(*d);
  ASSERT_TRUE(disp_lib.ok()) << disp_lib.error();
  auto call = [&](int64_t n, int64_t m) { return disp_lib.call(n, m); };
  EXPECT_EQ(call(251, 4099), 102);  // 0.03 from large
  EXPECT_EQ(call(10, 600), 101);    // 1.23 from small
  EXPECT_EQ(call(1, 1024), 101);    // exactly the reach
  EXPECT_EQ(call(1, 1025), 103);    // just beyond it: the fallback
  EXPECT_EQ(call(97, 1031), 103);   // 3.39 from large, the nearer
  EXPECT_EQ(call(1, 1), 103);       // 7 from small
  EXPECT_EQ(call(10, 200), 101);    // inside small
  // Four threads, two shapes each, alternating: every call must get its own shape's route.
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      const int64_t shapes[4][3] = {{10, 200, 101}, {251, 4099, 102}, {1, 1, 103}, {300, 5000, 102}};
      for (int i = 0; i < 20000; ++i) {
        const auto& s = shapes[(k + i) % 4];
        if (call(s[0], s[1]) != s[2]) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);

  // Given a target for shapes beyond the reach (kda tune gives the baseline), they go there instead;
  // a call whose axes cannot be read still goes to the fallback.
  auto b = nearest_dispatcher(routes, shape_distance(routes[0].ranges, {{"n", 1}, {"m", 1024}}), 1);
  ASSERT_TRUE(b.ok()) << b.status().message();
  const Dispatcher beyond_lib(*b);
  ASSERT_TRUE(beyond_lib.ok()) << beyond_lib.error();
  EXPECT_EQ(beyond_lib.call(1, 1024), 101);  // exactly the reach: the rule
  EXPECT_EQ(beyond_lib.call(1, 1025), 102);  // just beyond it
  EXPECT_EQ(beyond_lib.call(1, 1), 102);
  EXPECT_EQ(beyond_lib.call(10, 200, 1, 3), 103);  // unexpected rank: the fallback
}

// Under the margin rule a shape no route matches goes to its nearest visible workload's target only
// when every visible workload where that target was slower lies more than twice as far away (log2),
// else to the fallback; a shape nearest to a vetoed workload (where the rule's check failed) goes to
// the fallback too: the generated code agrees with tune::margin_target on every shape tried.
TEST(Generate, AMarginDispatcherServesUnseenShapesAsTheGuardsRuleDoes) {
  auto t = toy_tunables();
  auto cs = enumerate_configs(t);
  ASSERT_TRUE(cs.ok());
  // Visible workloads: p1 (n 1) and p2 (n 16) on configuration 2 (the fallback, 103), p3 (n 128) on 0
  // (101), p4 (1024 x 1024) on 1 (102). Configuration 0 was slower than the baseline on p1 and p2, 1 on p3.
  for (const bool veto : {false, true}) {
    SCOPED_TRACE(veto ? "p3 vetoed" : "no veto");
    GuardPlan plan;
    plan.points = {{"p1", {{"n", 1}, {"m", 4096}}, "c2"},
                   {"p2", {{"n", 16}, {"m", 4096}}, "c2"},
                   {"p3", {{"n", 128}, {"m", 4096}}, "c0"},
                   {"p4", {{"n", 1024}, {"m", 1024}}, "c1"}};
    plan.slower_on = {{"c0", {"p1", "p2"}}, {"c1", {"p3"}}, {"c2", {}}};
    if (veto) plan.vetoed = {"p3"};
    Unmatched margin;
    margin.rule = Unmatched::Rule::kMargin;
    margin.factor = kMarginFactor;
    const std::map<std::string, size_t> index{{"c0", 0}, {"c1", 1}, {"c2", 2}};
    for (const auto& p : plan.points) margin.points.push_back({p.axes, index.at(p.target), veto && p.workload == "p3"});
    for (const auto& [target, ws] : plan.slower_on)
      for (const auto& w : ws)
        for (const auto& p : plan.points)
          if (p.workload == w) margin.slower.push_back({p.axes, index.at(target)});
    // One route, so that the unmatched shapes below really are unmatched.
    std::vector<Route> routes{{"tiny", {{"n", {2, 3}}, {"m", {2, 3}}}, 1}};
    auto d = dispatcher_solution(toy_solution(), toy_def(), t, *cs, routes, 2, nullptr, margin);
    ASSERT_TRUE(d.ok()) << d.status().message();
    EXPECT_NE(d->source("kda_dispatch.cc")->content.find("constexpr int kRule = 2;"), std::string::npos);
    EXPECT_EQ(d->source("kda_dispatch.cc")->content.find("    {kVetoed, {") != std::string::npos, veto);
    const Dispatcher disp_lib(*d);
    ASSERT_TRUE(disp_lib.ok()) << disp_lib.error();
    auto call = [&](int64_t n, int64_t m) { return disp_lib.call(n, m); };
    auto expected = [&](int64_t n, int64_t m) {
      const std::string target = margin_target(plan, {{"n", n}, {"m", m}});
      return target.empty() ? 103 : 101 + static_cast<int>(index.at(target));
    };
    EXPECT_EQ(call(100, 4096), veto ? 103 : 101);  // p3 at log2(128/100) = 0.36; p2, where 0 is slower, at 2.64
    EXPECT_EQ(call(60, 4096), 103);                // p3 at 1.09, p2 at 1.91 < 2 x 1.09: too near a slower one
    EXPECT_EQ(call(40, 4096), 103);                // nearest p2 (1.32 against 1.68): its target, the fallback
    EXPECT_EQ(call(1000, 1000), 102);              // p4; p3, where 1 is slower, far away
    EXPECT_EQ(call(2, 2), 102);                    // inside the route
    for (int64_t n : {1, 5, 17, 33, 70, 90, 129, 300, 700, 2000, 100000})
      for (int64_t m : {1, 64, 1000, 3000, 4096, 9000, 1 << 20}) {
        if (n >= 2 && n <= 3 && m >= 2 && m <= 3) continue;
        EXPECT_EQ(call(n, m), expected(n, m)) << n << " x " << m;
      }
  }
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
