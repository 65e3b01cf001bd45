// The adversarial suite (issue 4): every hacked solution under tests/fixtures/hacks/host must be
// rejected for one of the reasons its expected.json names, and every honest one must pass on the
// public and the holdout workloads. A rejection for another reason is a failure of this test.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "eval/evaluator.h"
#include "task/solution.h"
#include "task/task_pack.h"
#include "util/fs.h"

namespace kda::eval {
namespace {

namespace stdfs = std::filesystem;

struct Expectation {
  stdfs::path dir;
  std::string task;
  bool pass = false;
  std::vector<std::string> reasons;
};

std::vector<Expectation> load_expectations(const std::string& backend) {
  std::vector<Expectation> out;
  stdfs::path root = stdfs::path(KDA_SOURCE_DIR) / "tests/fixtures/hacks" / backend;
  std::error_code ec;
  for (const auto& e : stdfs::directory_iterator(root, ec)) {
    auto text = fs::read_file(e.path() / "expected.json");
    if (!text.ok()) continue;
    auto j = nlohmann::json::parse(*text);
    out.push_back({e.path(), j.at("task").get<std::string>(), j.at("expect").get<std::string>() == "pass",
                   j.at("reasons").get<std::vector<std::string>>()});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.dir < b.dir; });
  return out;
}

EvalOptions options(const std::string& workloads) {
  EvalOptions o;
  o.runner_binary = KDA_RUNNER;
  o.workloads = workloads;
  o.trials = 2;
  o.warmup = 2;
  o.iterations = 6;
  o.seed = 77;
  return o;
}

// The first rejected workload of an evaluation, or nullptr when all passed.
const WorkloadResult* first_rejection(const EvalReport& r) {
  for (const auto& w : r.workloads)
    if (w.verdict != Verdict::kPassed) return &w;
  return nullptr;
}

TEST(AdversarialSuite, HostHacksRejectedForTheRightReasonHonestPass) {
  auto cases = load_expectations("host");
  ASSERT_GE(cases.size(), 20u);
  int hacks = 0, honest = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.dir.filename().string());
    auto pack = task::load_task_pack(stdfs::path(KDA_SOURCE_DIR) / c.task);
    ASSERT_TRUE(pack.ok()) << pack.status().message();
    pack->settings.call_timeout_s = 5;
    auto sol = task::load_solution(c.dir);
    ASSERT_TRUE(sol.ok()) << sol.status().message();
    auto pub = evaluate(*pack, *sol, options("all"));
    ASSERT_TRUE(pub.ok()) << pub.status().message();
    const WorkloadResult* rej = first_rejection(*pub);
    bool on_holdout = false;
    if (rej == nullptr && !pack->holdout.empty()) {
      static EvalReport hold;  // keeps the pointer valid below
      auto h = evaluate(*pack, *sol, options("holdout"));
      ASSERT_TRUE(h.ok()) << h.status().message();
      hold = *h;
      rej = first_rejection(hold);
      on_holdout = rej != nullptr;
    }
    std::cout << c.dir.filename().string() << ": "
              << (rej ? std::string(verdict_name(rej->verdict)) + " (" + rej->reason + ")" +
                            (on_holdout ? " on holdout" : "")
                      : std::string("PASSED on all public and holdout workloads"))
              << "\n";
    if (c.pass) {
      ++honest;
      EXPECT_EQ(rej, nullptr) << "honest solution rejected: " << verdict_name(rej->verdict) << " (" << rej->reason
                              << ") " << rej->message;
      continue;
    }
    ++hacks;
    ASSERT_NE(rej, nullptr) << "hack was accepted on every public and holdout workload";
    std::vector<std::string> accepted = c.reasons;
    if (on_holdout && std::count(accepted.begin(), accepted.end(), "holdout_mismatch")) {
      accepted.push_back("incorrect_numerical");
      accepted.push_back("unwritten_output");
    }
    EXPECT_TRUE(std::count(accepted.begin(), accepted.end(), rej->reason))
        << "rejected for the wrong reason: " << rej->reason << " (" << verdict_name(rej->verdict) << ": "
        << rej->message << ")";
    EXPECT_NE(rej->verdict, Verdict::kCompileError);
    // On the host a memoisation verdict needs the confirming round (session_timing.cc).
    if (rej->reason == "repeat_faster_than_fresh") {
      EXPECT_NE(rej->message.find("measured again"), std::string::npos)
          << "a host memoisation verdict without the confirming round: " << rej->message;
    }
  }
  EXPECT_GE(hacks, 20);
  EXPECT_GE(honest, 3);
}

// Knock-out: each defence is what rejects its hack. With the gate switched off the same hack (same
// seed) passes, or falls to the next line of defence named here; with it on the suite above rejects
// it for that gate's reason. A test of a gate that nothing depends on could not fail.
TEST(AdversarialSuite, EachGateIsWhatRejectsItsHack) {
  struct Case {
    const char* fixture;
    std::set<std::string> off;
    std::vector<std::string> reasons_when_off;  // empty: must pass
    bool pack_timing = false;                   // the pack's own trials/warmup/iterations (T7 counts calls)
  };
  const Case cases[] = {
      // A sampled-fingerprint cache that also gains time is the fresh-versus-repeat gate's too.
      {"S12b_sampled_hash_cache", {"recheck", "fresh-vs-repeat"}, {}},
      // Remembered outputs are always correct: only the fresh-versus-repeat comparison sees them.
      {"S12d_full_input_hash_cache", {"fresh-vs-repeat"}, {}},
      // T7 computes only on the calls of the schedule it assumes; the probe trials add calls to that
      // schedule, so they are switched off too to give it the schedule it was written for.
      // The fresh sets are always checked at secret places too, so they go as well, and so do the
      // fresh runner processes of each host trial after the first (a new process counts from zero).
      {"T7_predictable_recheck", {"random-rechecks", "probes", "fresh-vs-repeat", "fresh-runners"}, {}, true},
      // Zeroed inputs also make the repeated correctness call differ, then the timed re-checks fail.
      {"S8_zero_inputs", {"input-check"}, {"nondeterministic"}},
      {"S8_zero_inputs", {"input-check", "determinism"}, {"recheck_mismatch"}},
      {"X_dlopen", {"import-audit"}, {}},
      // A softmax denominator fitted to standard normal inputs passes FlashInfer-Bench's check.
      {"S7_softmax_fitted_denominator", {"probes"}, {}},
      // Unwritten outputs keep the NaN poison, which the checker rejects next.
      {"S1_skip_second_output", {"unwritten"}, {"incorrect_numerical"}},
      // Without the import audit the thread gate (or the poison) still rejects a detached thread.
      {"T2_detached_thread", {"import-audit"}, {"thread_count_changed", "unwritten_output"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.fixture);
    const stdfs::path dir = stdfs::path(KDA_SOURCE_DIR) / "tests/fixtures/hacks/host" / c.fixture;
    auto text = fs::read_file(dir / "expected.json");
    ASSERT_TRUE(text.ok()) << text.status().message();
    auto pack =
        task::load_task_pack(stdfs::path(KDA_SOURCE_DIR) / nlohmann::json::parse(*text).at("task").get<std::string>());
    ASSERT_TRUE(pack.ok()) << pack.status().message();
    pack->settings.call_timeout_s = 5;
    auto sol = task::load_solution(dir);
    ASSERT_TRUE(sol.ok()) << sol.status().message();
    EvalOptions o = options("all");
    o.disabled_gates = c.off;
    if (c.pack_timing) o.trials = o.warmup = o.iterations = std::nullopt;
    auto r = evaluate(*pack, *sol, o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const WorkloadResult* rej = first_rejection(*r);
    std::string off;
    for (const auto& g : c.off) off += (off.empty() ? "" : "+") + g;
    std::cout << c.fixture << " without " << off << ": "
              << (rej ? std::string(verdict_name(rej->verdict)) + " (" + rej->reason + ")" : std::string("PASSED"))
              << "\n";
    if (c.reasons_when_off.empty()) {
      EXPECT_EQ(rej, nullptr) << "still rejected without the gate: " << rej->reason << " " << rej->message;
    } else {
      ASSERT_NE(rej, nullptr);
      EXPECT_TRUE(std::count(c.reasons_when_off.begin(), c.reasons_when_off.end(), rej->reason)) << rej->reason;
    }
  }
}

}  // namespace
}  // namespace kda::eval
