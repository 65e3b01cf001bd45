// `kda tune` end to end on tasks/host/rmsnorm with a small budget; the dispatcher it writes must
// pass the unchanged `kda eval --workloads all` (and the holdout).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

int run(const std::string& cmd, std::string* out = nullptr) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  int rc = pclose(p);
  if (out) *out = text;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(TuneE2e, HostRmsnormDispatcherPassesKdaEvalOnAllWorkloads) {
  const std::string src = KDA_SOURCE_DIR;
  const std::string kda = KDA_BINARY;
  const auto out = std::filesystem::temp_directory_path() / ("kda_tune_e2e_" + std::to_string(::getpid()));
  std::filesystem::remove_all(out);
  const std::string pack = src + "/tasks/host/rmsnorm";
  std::string json;
  int rc = run(kda + " tune " + pack + "/solutions/tunable --task " + pack + " --out " + out.string() +
                   " --workloads all --max-configs 8 --json --quiet",
               &json);
  ASSERT_EQ(rc, 0) << json;
  auto j = nlohmann::json::parse(json, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json;
  EXPECT_TRUE(j["dispatcher_passed"].get<bool>());
  EXPECT_GE(j["configs_measured"].get<int>(), 2);
  EXPECT_GT(j["dispatcher_geomean_ms"].get<double>(), 0);
  EXPECT_GT(j["baseline_geomean_ms"].get<double>(), 0);
  ASSERT_TRUE(std::filesystem::exists(out / "map.json"));
  ASSERT_TRUE(std::filesystem::exists(out / "map.md"));
  ASSERT_TRUE(std::filesystem::exists(out / "state.json"));
  std::string eval_out;
  rc = run(kda + " eval " + (out / "dispatcher").string() + " --task " + pack +
               " --workloads all --quiet --trials 1 --iterations 5 2>&1",
           &eval_out);
  EXPECT_EQ(rc, 0) << eval_out;
  rc =
      run(kda + " eval " + (out / "dispatcher").string() + " --task " + pack + " --holdout --quiet --iterations 0 2>&1",
          &eval_out);
  EXPECT_EQ(rc, 0) << eval_out;
  // Resume measures nothing new: every measurement is in state.json already.
  std::string again;
  rc = run(kda + " tune " + pack + "/solutions/tunable --task " + pack + " --out " + out.string() +
               " --workloads all --max-configs 8 --resume --no-final 2>&1 >/dev/null",
           &again);
  EXPECT_EQ(rc, 0) << again;
  EXPECT_EQ(again.find("rung 0 ["), std::string::npos) << again;
  std::filesystem::remove_all(out);
}

// Issue 45: a tunable planted so that its best configuration on the tuned long rows is about 4x
// slower than the naive baseline on the short rows (8192 x 12, 4096 x 24, 16384 x 4), which the
// search never sees. With the guard the dispatcher routes those shapes away from it (to the baseline
// or the other configuration) and stays near the baseline's speed there; without it (--no-guard) the
// same dispatcher is far slower than the baseline there, so the check can fail.
TEST(TuneE2e, ThePlantedShortRowTrapIsRoutedAwayFromUnseenShapes) {
  const std::string src = KDA_SOURCE_DIR;
  const std::string kda = KDA_BINARY;
  const std::string planted = src + "/tests/fixtures/tune/planted_short_rows";
  const std::string tuned =
      "53b9e1c0-77f4-5de6-84ee-faa70bfdab18,8c03f971-2dcb-50a6-b293-f7961cb169d9,"
      "540b1e90-a83a-501e-bf14-f48f680bf5aa,65f9fcae-d4e3-5e6f-8834-29fcefd2c846";
  const std::string short_rows =
      "545b9a25-33cd-5d7d-a27f-2fc18410534e,c603c9f4-31c0-5bf0-aa3a-df4ef8e676bd,"
      "07ffcad2-fa02-57d8-a79c-244774c8fa52";
  const auto base = std::filesystem::temp_directory_path() / ("kda_tune_guard_" + std::to_string(::getpid()));
  std::filesystem::remove_all(base);
  // A copy of the pack with one more holdout workload, 12288 x 6: a short-row shape that neither the
  // search nor the guard sees (the holdout is never screened), judged only at the end.
  const std::string pack = (base / "pack").string();
  const std::string unseen = "5a1e4c0d-6b2f-5c3a-9d8e-7f6a5b4c3d2e";
  std::filesystem::create_directories(base);
  std::filesystem::copy(src + "/tasks/host/rmsnorm", pack, std::filesystem::copy_options::recursive);
  {
    std::ofstream holdout(pack + "/holdout.jsonl", std::ios::app);
    holdout << R"({"definition": "host_rmsnorm_f32", "workload": {"uuid": ")" << unseen
            << R"(", "axes": {"batch_size": 12288, "hidden_size": 6}, "inputs": {"x": {"type": "random"}, )"
            << R"("weight": {"type": "random"}, "eps": {"type": "scalar", "value": 1e-06}}}, "solution": null, )"
            << R"("evaluation": null})"
            << "\n";
  }
  // The worst speedup over the baseline of a dispatcher on the short rows, from kda eval --json.
  auto worst_on_short_rows = [&](const std::filesystem::path& out) {
    std::string json;
    EXPECT_EQ(run(kda + " eval " + (out / "dispatcher").string() + " --task " + pack + " --workloads " + short_rows +
                      " --json --quiet",
                  &json),
              0)
        << json;
    auto j = nlohmann::json::parse(json, nullptr, false);
    double worst = 1e9;
    for (const auto& t : j["traces"])
      worst = std::min(worst, t["evaluation"]["kda"]["speedup_vs_baseline"].get<double>());
    return worst;
  };
  // The same on the unseen holdout shape.
  auto on_unseen = [&](const std::filesystem::path& out) {
    std::string json;
    EXPECT_EQ(
        run(kda + " eval " + (out / "dispatcher").string() + " --task " + pack + " --holdout --json --quiet", &json), 0)
        << json;
    auto j = nlohmann::json::parse(json, nullptr, false);
    for (const auto& t : j["traces"])
      if (t["workload"]["uuid"] == unseen) return t["evaluation"]["kda"]["speedup_vs_baseline"].get<double>();
    ADD_FAILURE() << "no trace of the unseen shape: " << json;
    return 0.0;
  };
  for (const bool guard : {true, false}) {
    SCOPED_TRACE(guard ? "guard" : "--no-guard");
    const auto out = base / (guard ? "guard" : "no_guard");
    std::string json;
    int rc = run(kda + " tune " + planted + " --task " + pack + " --out " + out.string() + " --workloads " + tuned +
                     " --no-final --json --quiet" + (guard ? "" : " --no-guard"),
                 &json);
    ASSERT_EQ(rc, 0) << json;
    auto r = nlohmann::json::parse(json, nullptr, false);
    ASSERT_FALSE(r.is_discarded()) << json;
    const double worst = worst_on_short_rows(out);
    const double unseen_ratio = on_unseen(out);
    std::cout << (guard ? "guard" : "no guard") << ": worst speedup over the baseline on the short rows " << worst
              << ", on the unseen 12288 x 6 " << unseen_ratio << "\n";
    if (!guard) {
      EXPECT_FALSE(r["guard"]["ran"].get<bool>());
      EXPECT_LT(worst, 0.6);         // the trap is real: FAST=1 serves the short rows
      EXPECT_LT(unseen_ratio, 0.6);  // and the unseen one
      continue;
    }
    // The unseen shape is routed away from FAST=1 too (to its nearest regime's target, or the fallback).
    EXPECT_GE(unseen_ratio, 0.5) << r["guard"].dump();
    std::string md;
    EXPECT_EQ(run("cat " + (out / "map.md").string(), &md), 0);
    EXPECT_NE(md.find("## Guard: routes checked against the baseline"), std::string::npos) << md;
    EXPECT_NE(md.find("Shapes outside every regime: the "), std::string::npos) << md;
    ASSERT_TRUE(r["guard"]["ran"].get<bool>()) << r["guard"].dump();
    std::string map_text;
    EXPECT_EQ(run("cat " + (out / "map.json").string(), &map_text), 0);
    const auto map = nlohmann::json::parse(map_text, nullptr, false);
    const std::string trap = map.value("/best_single/config/id"_json_pointer, std::string());
    ASSERT_FALSE(trap.empty()) << map_text.substr(0, 2000);  // the search's best single: FAST=1
    int short_row_regimes = 0;
    for (const auto& g : r["guard"]["regimes"]) {
      bool has_short_row = false;
      for (const auto& w : g["workloads"]) has_short_row |= short_rows.find(w.get<std::string>()) != std::string::npos;
      if (!has_short_row) continue;
      if (g["shipped"].get<bool>()) {  // the shipped check's route of one shape (the dispatcher as built was slower)
        EXPECT_EQ(g["target"], "baseline") << g.dump();
        continue;
      }
      ++short_row_regimes;
      EXPECT_TRUE(g["visible_only"].get<bool>()) << g.dump();
      EXPECT_NE(g["target"], trap) << g.dump();  // routed away from the search's FAST=1
    }
    EXPECT_EQ(short_row_regimes, 3);
    // Near the baseline (0.77-1.23x in runs here), far from the trap's ~0.2x: the margin is the
    // host's timing noise under a loaded ctest -j2.
    EXPECT_GE(worst, 0.5);
  }
  std::filesystem::remove_all(base);
}

}  // namespace
