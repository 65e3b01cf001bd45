#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "report/page.h"
#include "report/provenance.h"
#include "report/report.h"
#include "util/fs.h"

namespace kda::report {
namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = *fs::make_temp_dir(stdfs::temp_directory_path(), "kda-report-test"); }
  void TearDown() override { stdfs::remove_all(dir_); }
  void write(const std::string& rel, const json& j) {
    ASSERT_TRUE(fs::ensure_dir((dir_ / rel).parent_path()).ok());
    ASSERT_TRUE(fs::write_file_atomic(dir_ / rel, j.dump(1)).ok());
  }
  static json trace(const std::string& uuid, int m, const char* status, double lat, double base,
                    std::optional<double> floor) {
    json kda = {
        {"candidate", {{"median_ms", lat}, {"p10_ms", lat * 0.9}, {"p90_ms", lat * 1.2}}},
        {"baseline", {{"latency_ms", base}}},
        {"speedup_vs_baseline", base / lat},
        {"message", std::string(status) == "PASSED" ? "" : "3 of 16 elements beyond atol"},
        {"gates",
         json::array({{{"gate", "correctness"}, {"status", std::string(status) == "PASSED" ? "pass" : "fail"}}})}};
    if (floor) kda["roofline_floor_ms"] = *floor;
    json ev = {{"status", status}, {"kda", kda}};
    ev["performance"] = std::string(status) == "PASSED" ? json{{"latency_ms", lat}} : json();
    return {{"workload", {{"uuid", uuid}, {"axes", {{"M", m}, {"K", 64}}}}}, {"evaluation", ev}};
  }
  stdfs::path dir_;
};

TEST(Page, EscapesAndCarriesProvenance) {
  EXPECT_EQ(escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  EXPECT_EQ(number(1.5, "1.500x", {"state.json", 0, "/incumbent/speedup"}),
            R"(<data value="1.5" data-src="state.json#/incumbent/speedup">1.500x</data>)");
  EXPECT_EQ(Source({"final/traces.jsonl", 3, "/evaluation/x"}).str(), "final/traces.jsonl:3#/evaluation/x");
  const std::string html = Page("t <1>").html();
  EXPECT_NE(html.find("Content-Security-Policy"), std::string::npos);
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(html.find("<title>t &lt;1&gt;</title>"), std::string::npos);
}

TEST_F(ReportTest, AnEvaluationPageShowsEveryWorkloadAndChecksOut) {
  json traces = json::array({trace("aaaaaaaa-1", 1, "PASSED", 0.0021874, 0.0061, 0.0009),
                             trace("bbbbbbbb-2", 256, "PASSED", 1.93, 11.5, std::nullopt),
                             trace("cccccccc-3", 64, "INCORRECT_NUMERICAL", 0.5, 0.7, std::nullopt)});
  write("e/eval.json", {{"definition", "gemm"},
                        {"solution", "mine"},
                        {"backend", "host"},
                        {"baseline", "naive"},
                        {"seed", 7},
                        {"all_passed", false},
                        {"score", {{"geomean_speedup", 3.1234}, {"geomean_ci95", {2.9, 3.3}}}},
                        {"wall_s", 4.5},
                        {"traces", traces},
                        {"static_gates", json::array()}});
  auto r = render(dir_ / "e/eval.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->kind, ReportKind::kEval);
  EXPECT_EQ(default_output(dir_ / "e/eval.json", r->kind), dir_ / "e/eval.html");
  for (const char* s : {"aaaaaaaa", "bbbbbbbb", "cccccccc", "K=64 M=256", "INCORRECT_NUMERICAL",
                        "3 of 16 elements beyond atol", "3.123x", "2.19 us", "roofline floor"})
    EXPECT_NE(r->html.find(s), std::string::npos) << s;
  // The floor fraction is a ratio of two fields: 0.0009 / 0.0021874 = 41 %.
  EXPECT_NE(r->html.find("data-op=\"ratio\">41 %</data>"), std::string::npos);
  const ProvenanceCheck c = check_provenance(r->html, r->root);
  EXPECT_TRUE(c.ok()) << c.problems.front();
  EXPECT_GE(c.checked, 20);
  EXPECT_EQ(c.checked, r->numbers);
}

TEST_F(ReportTest, TheCheckCatchesAPageThatDisagreesWithItsFiles) {
  write("e/eval.json", {{"score", {{"geomean_speedup", 2.0}}}, {"traces", json::array()}});
  auto r = render(dir_ / "e/eval.json");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(check_provenance(r->html, r->root).ok());
  // The file changes after the page was drawn; a shown text rounds wrongly; a source is missing.
  write("e/eval.json", {{"score", {{"geomean_speedup", 2.5}}}, {"traces", json::array()}});
  auto c = check_provenance(r->html, r->root);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].find("the page says 2, the file 2.5"), std::string::npos) << c.problems[0];
  EXPECT_FALSE(
      check_provenance(R"(<data value="2.5" data-src="eval.json#/score/geomean_speedup">2.6x</data>)", dir_ / "e")
          .ok());
  EXPECT_TRUE(
      check_provenance(R"(<data value="2.5" data-src="eval.json#/score/geomean_speedup">2.50x</data>)", dir_ / "e")
          .ok());
  EXPECT_FALSE(
      check_provenance(R"(<data value="2.5" data-src="eval.json#/score/nothing">2.5</data>)", dir_ / "e").ok());
  EXPECT_FALSE(check_provenance(R"(<rect data-value="1" data-src="nofile.json#/a"></rect>)", dir_ / "e").ok());
}

TEST_F(ReportTest, BadInputNamesWhatIsWrong) {
  auto missing = render(dir_ / "nothing-here");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nothing-here"), std::string::npos);
  ASSERT_TRUE(fs::ensure_dir(dir_ / "empty").ok());
  auto empty = render(dir_ / "empty");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("neither a run directory"), std::string::npos);
  ASSERT_TRUE(fs::write_file_atomic(dir_ / "broken.json", "{\"traces\": [").ok());
  auto broken = render(dir_ / "broken.json");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("broken.json: not valid JSON"), std::string::npos);
  write("other.json", {{"a", 1}});
  auto other = render(dir_ / "other.json");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("not a kda eval --json report"), std::string::npos);
  write("t/map.json", {{"kind", "something"}});
  auto tune = render(dir_ / "t");
  ASSERT_FALSE(tune.ok());
  EXPECT_NE(tune.status().message().find("not a kda tune map"), std::string::npos);
}

TEST_F(ReportTest, ATuningPageDrawsTheMapAsAHeatMap) {
  auto cfg = [](const char* label, double ms) {
    return json{{"label", label}, {"latency_ms", ms}, {"ci_low_ms", ms * 0.95}, {"ci_high_ms", ms * 1.05}};
  };
  json regimes = json::array();
  regimes.push_back({{"regime", "M=1..7/memory"},
                     {"bound", "memory"},
                     {"workloads", {"u1", "u2"}},
                     {"best", cfg("ROWS=1", 0.002)},
                     {"runners_up", {cfg("ROWS=4", 0.003)}},
                     {"routed_to", {{"label", "ROWS=1"}, {"why", "12 % faster"}}}});
  regimes.push_back({{"regime", "M=8..4096/memory"},
                     {"bound", "memory"},
                     {"workloads", {"u3"}},
                     {"best", cfg("ROWS=4", 0.05)},
                     {"runners_up", {cfg("ROWS=1", 0.09)}}});
  write("t/map.json", {{"kind", "kda-tune-map"},
                       {"version", 1},
                       {"regimes", regimes},
                       {"best_single", {{"label", "ROWS=4"}}},
                       {"result",
                        {{"baseline_geomean_ms", 0.07},
                         {"best_single_geomean_ms", 0.04},
                         {"dispatcher_geomean_ms", 0.036},
                         {"dispatcher_vs_best_single", 1.11},
                         {"configs_measured", 8},
                         {"guard",
                          {{"ran", true},
                           {"regimes", json::array({{{"regime", "visible M=8192..16383"},
                                                     {"workloads", {"u4"}},
                                                     {"target", "baseline"},
                                                     {"why", "kept on the baseline: no finalist beats it"}}})},
                           {"fallback", "0123456789abcdef"},
                           {"fallback_why", "the best single configuration"},
                           {"unseen", "nearest"},
                           {"unseen_why", "the nearest regime's target: checked on 3 visible workload(s)"}}}}}});
  auto r = render(dir_ / "t");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->kind, ReportKind::kTune);
  EXPECT_NE(r->html.find("class=\"chart heat\""), std::string::npos);
  EXPECT_NE(r->html.find(">1.50x<"), std::string::npos);  // ROWS=4 in the first regime: 0.003 / 0.002
  EXPECT_NE(r->html.find(">1.80x<"), std::string::npos);
  EXPECT_NE(r->html.find("12 % faster"), std::string::npos);
  // The guard's plan: each regime's route and why, the fallback, how unseen shapes are routed.
  EXPECT_NE(r->html.find("kept on the baseline: no finalist beats it"), std::string::npos);
  EXPECT_NE(r->html.find("<code>the baseline</code>"), std::string::npos);
  EXPECT_NE(r->html.find("Shapes outside every regime: the nearest regime&#39;s target"), std::string::npos) << r->html;
  const ProvenanceCheck c = check_provenance(r->html, r->root);
  EXPECT_TRUE(c.ok()) << c.problems.front();
  EXPECT_GE(c.checked, 12);
}

}  // namespace
}  // namespace kda::report
