// Threat X4 with public code (issue 17): a candidate that ships outputs computed offline for the
// pack's public uuids. The adversary runs the GDN decode pack's own generator at trial seed 0 (what
// kda's bench and contest tools pass) and its CPU reference for the batch-1 dev workloads, and
// compiles the outputs into a solution that only copies them (tests/fixtures/hacks/precomputed).
//
// Expected: rejected INCORRECT_NUMERICAL on every one of those workloads, because every generated
// input is drawn from the evaluation's secret trial seeds. With the fresh inputs knocked out (the
// generator given trial seed 0 again, as before 9ec6c8d) the same candidate PASSES: its table is
// right, so nothing but the fresh inputs rejects it.
//
// Host (CI): on a host copy of the pack (backend host, the CPU reference as the reference). CUDA
// (ctest label gpu, precomputed_outputs_gpu_test): the pack as it is, against its naive baseline.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "eval/evaluator.h"
#include "eval/inputs.h"
#include "task/solution.h"
#include "task/task_pack.h"
#include "util/fs.h"
#include "util/strings.h"

// tasks/contest/gdn_decode_qk4_v8_d128_k_last/reference_cpu/kernel.cc, compiled into this test.
extern "C" int run(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs, void* stream);

namespace kda::eval {
namespace {

namespace stdfs = std::filesystem;

const stdfs::path kSource = KDA_SOURCE_DIR;
const stdfs::path kPack = kSource / "tasks/contest/gdn_decode_qk4_v8_d128_k_last";
const stdfs::path kFixtures = kSource / "tests/fixtures/hacks/precomputed";

// The dev workloads the table is made for: batch size 1 (one shape, so a shape-keyed table cannot
// tell them apart; the entry is picked by input bytes that the uuid fixed).
std::vector<std::string> batch1_dev_uuids(const task::TaskPack& pack) {
  std::vector<std::string> out;
  for (const auto& u : pack.dev_uuids)
    if (const task::Workload* w = pack.workload(u); w != nullptr && w->axes.at("batch_size") == 1) out.push_back(u);
  return out;
}

// The adversary's offline step: inputs from the pack's generator at trial seed 0, outputs from the
// CPU reference; written as precomputed.h (keys: q's first four bytes; outputs as their bits).
std::string precompute_header(const task::TaskPack& pack, const std::vector<std::string>& uuids) {
  std::string keys, outs, states;
  BlobCache blobs;
  for (const auto& uuid : uuids) {
    auto rw = resolve_workload(pack, *pack.workload(uuid));
    EXPECT_TRUE(rw.ok()) << rw.status().message();
    if (!rw.ok()) return "";
    auto in = materialize_inputs(pack, *rw, /*trial_seed=*/0, blobs, /*host_values=*/true);
    EXPECT_TRUE(in.ok()) << in.status().message();
    if (!in.ok()) return "";
    std::vector<DLTensor> args;
    for (const auto& t : in->tensors) args.push_back(t.dl_view());
    std::vector<tensor::Tensor> results;
    for (size_t i = 0; i < pack.definition.outputs.size(); ++i)
      results.emplace_back(pack.definition.outputs[i].dtype, rw->output_shapes[i]);
    std::vector<DLTensor> res;
    for (const auto& t : results) res.push_back(t.dl_view());
    EXPECT_EQ(
        run(args.data(), static_cast<int64_t>(args.size()), res.data(), static_cast<int64_t>(res.size()), nullptr), 0);
    uint32_t key = 0;
    std::memcpy(&key, in->tensors[0].data(), sizeof key);
    keys += fmt::format("0x{:08x}u, ", key);
    auto words = [](const tensor::Tensor& t, int bits) {
      std::string s = "{";
      const int64_t n = t.numel();
      for (int64_t i = 0; i < n; ++i) {
        uint32_t v = 0;
        std::memcpy(&v, reinterpret_cast<const char*>(t.data()) + i * (bits / 8), bits / 8);
        s += bits == 16 ? fmt::format("0x{:04x},", v) : fmt::format("0x{:08x}u,", v);
        if (i % 16 == 15) s += "\n";
      }
      return s + "},\n";
    };
    outs += words(results[0], 16);
    states += words(results[1], 32);
  }
  const size_t n = uuids.size();
  return fmt::format(
      "// Written by precomputed_outputs_test: outputs of {} for the inputs its generator makes at trial seed 0.\n"
      "#pragma once\n#include <cstdint>\n"
      "constexpr int kdaPrecomputedEntries = {};\n"
      "KDA_PRECOMPUTED_STORAGE uint32_t kdaPrecomputedKey[{}] = {{{}}};\n"
      "KDA_PRECOMPUTED_STORAGE uint16_t kdaPrecomputedOutput[{}][1024] = {{\n{}}};\n"
      "KDA_PRECOMPUTED_STORAGE uint32_t kdaPrecomputedState[{}][131072] = {{\n{}}};\n",
      pack.definition.name, n, n, keys, n, outs, n, states);
}

// A copy of the fixture directory with the adversary's table in it.
stdfs::path make_fixture(const std::string& name, const std::string& header) {
  const stdfs::path dir = stdfs::temp_directory_path() / fmt::format("kda-precomputed-{}-{}", name, ::getpid());
  stdfs::remove_all(dir);
  stdfs::create_directories(dir);
  for (const auto& e : stdfs::directory_iterator(kFixtures / name))
    stdfs::copy_file(e.path(), dir / e.path().filename());
  EXPECT_TRUE(fs::write_file_atomic(dir / "precomputed.h", header).ok());
  return dir;
}

struct Outcome {
  std::vector<const WorkloadResult*> rejected, passed;
  EvalReport report;
};

Outcome evaluate_fixture(const task::TaskPack& pack, const stdfs::path& dir, EvalOptions o, bool knock_out) {
  Outcome out;
  // The stress inputs are a second catch (their draws are not the ones the table holds, fixed per uuid or
  // not): knocked out with the fresh inputs, so that what is left shows the fresh inputs alone.
  if (knock_out) o.disabled_gates = {"fresh-inputs", "stress"};
  auto sol = task::load_solution(dir);
  EXPECT_TRUE(sol.ok()) << sol.status().message();
  if (!sol.ok()) return out;
  auto r = evaluate(pack, *sol, o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return out;
  out.report = *r;
  for (const auto& w : out.report.workloads) {
    std::cout << (knock_out ? "fresh inputs off: " : "as evaluated:      ") << w.uuid << " " << verdict_name(w.verdict)
              << (w.reason.empty() ? "" : " (" + w.reason + ")") << fmt::format(" {:.5f} ms", w.latency_ms)
              << (w.baseline_ms > 0 ? fmt::format(" against the baseline's {:.5f} ms", w.baseline_ms) : "") << "\n";
    (w.verdict == Verdict::kPassed ? out.passed : out.rejected).push_back(&w);
  }
  return out;
}

void expect_rejected_then_passed(const task::TaskPack& pack, const stdfs::path& dir, const EvalOptions& o,
                                 size_t workloads) {
  Outcome fresh = evaluate_fixture(pack, dir, o, /*knock_out=*/false);
  ASSERT_EQ(fresh.report.workloads.size(), workloads);
  EXPECT_TRUE(fresh.passed.empty()) << "precomputed outputs passed on fresh inputs";
  for (const WorkloadResult* w : fresh.rejected) {
    EXPECT_EQ(w->verdict, Verdict::kIncorrectNumerical) << w->uuid << ": " << w->message;
    EXPECT_EQ(w->reason, "incorrect_numerical") << w->uuid << ": " << w->message;
  }
  // The same table is right when the inputs are what the uuid alone fixes: the fixture is a real
  // hack, and the fresh inputs are what rejects it.
  Outcome fixed = evaluate_fixture(pack, dir, o, /*knock_out=*/true);
  ASSERT_EQ(fixed.report.workloads.size(), workloads);
  for (const WorkloadResult* w : fixed.rejected)
    ADD_FAILURE() << "with inputs fixed per uuid the table should be right: " << w->uuid << " "
                  << verdict_name(w->verdict) << " (" << w->reason << ") " << w->message;
}

TEST(PrecomputedOutputs, HostRejectedAndPassesOnlyWithInputsFixedByTheUuid) {
  auto pack = task::load_task_pack(kPack);
  ASSERT_TRUE(pack.ok()) << pack.status().message();
  ASSERT_TRUE(pack->cpu_reference.has_value());
  const auto uuids = batch1_dev_uuids(*pack);
  ASSERT_GE(uuids.size(), 2u) << "the pack's dev workloads have fewer than two of batch size 1";
  const std::string header = precompute_header(*pack, uuids);
  ASSERT_FALSE(header.empty());
  // The host copy of the pack: the CPU reference judges, no CUDA baseline.
  task::TaskPack host = *pack;
  host.backend = task::Backend::kHost;
  host.reference = *pack->cpu_reference;
  host.baselines.clear();
  host.baseline_name.clear();
  const stdfs::path dir = make_fixture("gdn_decode_host", header);
  EvalOptions o;
  o.runner_binary = KDA_RUNNER;
  o.workloads = util::join(uuids, ",");
  o.with_baseline = false;
  o.trials = 2;
  o.warmup = 2;
  o.iterations = 6;
  expect_rejected_then_passed(host, dir, o, uuids.size());
  stdfs::remove_all(dir);
}

TEST(PrecomputedOutputs, CudaRejectedAndPassesOnlyWithInputsFixedByTheUuid) {
  if (!stdfs::exists("/dev/nvidia0") && !stdfs::exists("/dev/nvidiactl")) GTEST_SKIP() << "no NVIDIA device";
  auto pack = task::load_task_pack(kPack);
  ASSERT_TRUE(pack.ok()) << pack.status().message();
  const auto uuids = batch1_dev_uuids(*pack);
  ASSERT_GE(uuids.size(), 2u);
  const std::string header = precompute_header(*pack, uuids);
  ASSERT_FALSE(header.empty());
  const stdfs::path dir = make_fixture("gdn_decode_cuda", header);
  EvalOptions o;
  o.runner_binary = KDA_RUNNER;
  o.workloads = util::join(uuids, ",");
  o.trials = 2;
  o.iterations = 10;
  expect_rejected_then_passed(*pack, dir, o, uuids.size());
  stdfs::remove_all(dir);
}

}  // namespace
}  // namespace kda::eval
