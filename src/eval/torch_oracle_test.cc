// The torch oracle (src/runner/torch_oracle.py) driven through RunnerClient on the host backend.
// Without torch only the protocol, the refusals and the "torch is not importable" load run; with
// torch (KDA_PYTHON or python3 on PATH can import it) the tiny definitions below are computed,
// compared, and the guard bands and inputs checked.
#include "eval/torch_oracle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/arena.h"
#include "eval/compare.h"
#include "eval/inputs.h"
#include "eval/solution_build.h"
#include "eval/topk_checker.h"
#include "eval/runner_client.h"
#include "task/task_pack.h"
#include "tensor/tensor.h"
#include "util/fs.h"

namespace kda::eval {
namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;
using ojson = nlohmann::ordered_json;
using tensor::DType;
using tensor::Tensor;

const stdfs::path kRunnerPath = stdfs::path(KDA_BINARY_DIR) / "kda-runner";  // the script lies beside it
constexpr double kTimeoutS = 120;
constexpr uint64_t kGuardSeed = 77;

class TorchOracleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = kda::fs::make_temp_dir(stdfs::temp_directory_path(), "kda-torch-oracle-test");
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    dir_ = *dir;
  }
  void TearDown() override {
    std::error_code ec;
    stdfs::remove_all(dir_, ec);
  }

  // Writes a definition.json with the given inputs/outputs and Python reference; returns its path.
  // Definitions keep their key order (inputs and outputs in definition order): ordered_json.
  stdfs::path write_definition(const std::string& name, const ojson& inputs, const ojson& outputs,
                               const std::string& ref) {
    ojson d{{"name", name},     {"op_type", "test"},  {"axes", ojson::object()},
            {"inputs", inputs}, {"outputs", outputs}, {"reference", ref}};
    stdfs::path p = dir_ / (name + ".json");
    EXPECT_TRUE(kda::fs::write_file_atomic(p, d.dump(2)).ok());
    return p;
  }

  // Starts the oracle; `block_torch` puts a torch package that refuses to import first on PYTHONPATH.
  RunnerClient start(bool block_torch) {
    auto o = torch_oracle_runner_options(kRunnerPath, "host");
    EXPECT_TRUE(o.ok()) << o.status().message();
    if (!o.ok()) return {};
    if (block_torch) {
      stdfs::create_directories(dir_ / "blocked" / "torch");
      EXPECT_TRUE(kda::fs::write_file_atomic(dir_ / "blocked" / "torch" / "__init__.py",
                                             "raise ImportError('torch blocked by torch_oracle_test')\n")
                      .ok());
      auto& env = o->extra_env;
      env.erase(
          std::remove_if(env.begin(), env.end(), [](const std::string& e) { return e.starts_with("PYTHONPATH="); }),
          env.end());
      env.push_back("PYTHONPATH=" + (dir_ / "blocked").string());
    }
    auto r = RunnerClient::start(*o);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return {};
    return std::move(*r);
  }

  stdfs::path dir_;
};

#define REQUIRE_TORCH()                                                            \
  do {                                                                             \
    if (!torch_importable()) GTEST_SKIP() << "no torch: " << torch_probe().detail; \
  } while (0)

const ojson kTwoInputs = {{"x", {{"shape", {"M", "N"}}, {"dtype", "float32"}}},
                          {"scale", {{"shape", nullptr}, {"dtype", "float32"}}}};
const ojson kTwoOutputs = {{"y", {{"shape", {"M", "N"}}, {"dtype", "float32"}}},
                           {"positives", {{"shape", {"M"}}, {"dtype", "int32"}}}};

// y = x * scale; positives[i] = count of x[i, :] > 0 (torch gives int64: the oracle converts).
constexpr const char* kScaleReference = R"(import torch

def run(x, scale):
    return x * scale, (x > 0).sum(dim=1)
)";

ArenaLayout scale_layout() {
  return plan_layout(
      {Slot{"x", DType::kFloat32, {4, 8}, false, 0, 4 * 8 * 4}, Slot{"scale", DType::kFloat32, {}, true, 0, 4}},
      {Slot{"y", DType::kFloat32, {4, 8}, false, 0, 4 * 8 * 4}, Slot{"positives", DType::kInt32, {4}, false, 0, 16}});
}

Tensor make_x(float shift) {
  Tensor x(DType::kFloat32, {4, 8});
  auto v = x.span<float>();
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) - 3.0f + shift;
  return x;
}

Tensor make_scalar(float s) {
  Tensor t(DType::kFloat32, {});
  t.span<float>()[0] = s;
  return t;
}

TEST(TorchOracleOptions, ScriptBesideRunnerReferenceRoleNoSandbox) {
  auto o = torch_oracle_runner_options(kRunnerPath, "host");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->runner_binary, stdfs::path(KDA_BINARY_DIR) / "torch_oracle.py");
  EXPECT_TRUE(stdfs::is_regular_file(o->runner_binary));
  EXPECT_EQ(o->role, RunnerRole::kReference);
  EXPECT_FALSE(o->sandbox);
  ASSERT_EQ(o->wrapper.size(), 1u);
  EXPECT_EQ(o->wrapper[0].front(), '/') << o->wrapper[0];

  auto missing = torch_oracle_runner_options(stdfs::path(KDA_BINARY_DIR) / "no-such-dir" / "kda-runner", "host");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("torch_oracle.py not found"), std::string::npos);
  EXPECT_FALSE(torch_oracle_runner_options(kRunnerPath, "rocm").ok());
}

TEST(TorchOracleOptions, ProbeNamesTheInterpreterAndIsCached) {
  const TorchProbe& p = torch_probe();
  EXPECT_FALSE(p.python.empty()) << p.detail;
  EXPECT_FALSE(p.executable.empty()) << p.detail;  // the interpreter started and printed sys.executable
  EXPECT_FALSE(p.detail.empty());
  EXPECT_EQ(&torch_probe(), &p);
  EXPECT_EQ(torch_importable(), p.importable);
}

TEST_F(TorchOracleTest, WithoutTorchLoadFailsClearlyAndTheOracleLivesOn) {
  RunnerClient r = start(/*block_torch=*/true);
  ASSERT_TRUE(r.alive());
  stdfs::path def = write_definition("scale", kTwoInputs, kTwoOutputs, kScaleReference);
  auto load = load_torch_reference(r, def, kTimeoutS);
  ASSERT_EQ(load.kind, CallOutcome::Kind::kFailed) << load.message;
  EXPECT_NE(load.message.find("torch is not importable"), std::string::npos) << load.message;
  EXPECT_NE(load.message.find("torch blocked by torch_oracle_test"), std::string::npos) << load.message;
  // Nothing is loaded: layout and call are refused, the process answers on.
  auto layout = r.set_layout(scale_layout(), kTimeoutS);
  EXPECT_EQ(layout.kind, CallOutcome::Kind::kFailed);
  EXPECT_NE(layout.message.find("before a successful load"), std::string::npos) << layout.message;
  auto call = r.call(CallRequest{.seq = 1}, kTimeoutS);
  EXPECT_EQ(call.kind, CallOutcome::Kind::kFailed);
  EXPECT_NE(call.message.find("before a successful load"), std::string::npos) << call.message;
  EXPECT_TRUE(r.alive());
}

TEST_F(TorchOracleTest, StartTorchReferenceLoadsOrSaysWhyNot) {
  stdfs::path def = write_definition("scale", kTwoInputs, kTwoOutputs, kScaleReference);
  auto r = start_torch_reference(kRunnerPath, "host", def, kTimeoutS);
  if (torch_importable()) {
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_TRUE(r->alive());
  } else {
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("torch is not importable"), std::string::npos) << r.status().message();
  }
  auto missing = start_torch_reference(kRunnerPath, "host", dir_ / "no-such-definition.json", kTimeoutS);
  if (torch_importable()) {
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.status().message().find("cannot read the definition"), std::string::npos)
        << missing.status().message();
  }
}

TEST_F(TorchOracleTest, RefusesASandboxedLoad) {
  auto o = torch_oracle_runner_options(kRunnerPath, "host");
  ASSERT_TRUE(o.ok());
  o->sandbox = true;
  auto r = RunnerClient::start(*o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  stdfs::path def = write_definition("scale", kTwoInputs, kTwoOutputs, kScaleReference);
  auto load = load_torch_reference(*r, def, kTimeoutS);
  ASSERT_EQ(load.kind, CallOutcome::Kind::kFailed);
  EXPECT_NE(load.message.find("cannot sandbox itself"), std::string::npos) << load.message;
  EXPECT_TRUE(r->alive());
}

TEST_F(TorchOracleTest, ExitsOnQuit) {
  RunnerClient r = start(/*block_torch=*/true);
  ASSERT_TRUE(r.alive());
  // stop() sends kQuit and waits 2 s before it kills: an oracle that exits on kQuit is gone sooner.
  auto t0 = std::chrono::steady_clock::now();
  r.stop();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.9);
  EXPECT_FALSE(r.alive());
}

TEST_F(TorchOracleTest, ComputesTheReferenceIntoTheOutputSlotsOnly) {
  REQUIRE_TORCH();
  RunnerClient r = start(false);
  ASSERT_TRUE(r.alive());
  stdfs::path def = write_definition("scale", kTwoInputs, kTwoOutputs, kScaleReference);
  auto load = load_torch_reference(r, def, kTimeoutS);
  ASSERT_EQ(load.kind, CallOutcome::Kind::kOk) << load.message;
  EXPECT_EQ(load.reply.value("call", ""), "keyword");

  ArenaLayout layout = scale_layout();
  auto lo = r.set_layout(layout, kTimeoutS);
  ASSERT_EQ(lo.kind, CallOutcome::Kind::kOk) << lo.message;
  SharedArena& arena = r.arena();
  Tensor x = make_x(0.5f);
  Tensor scale = make_scalar(2.0f);
  arena.write(layout.inputs[0], x);
  arena.write(layout.inputs[1], scale);
  arena.fill_guards(layout, kGuardSeed);
  for (const auto& s : layout.outputs) arena.poison(s, 5);

  auto c = r.call(CallRequest{.seq = 1, .timed = true}, kTimeoutS);
  ASSERT_EQ(c.kind, CallOutcome::Kind::kOk) << c.message;
  EXPECT_EQ(c.reply.value("rc", -1), 0);
  EXPECT_GT(c.reply.value("elapsed_ns", int64_t{0}), 0);
  EXPECT_LE(static_cast<double>(c.reply.value("elapsed_ns", int64_t{0})) / 1e9, c.wall_s);
  ASSERT_TRUE(c.reply.contains("extra"));
  EXPECT_EQ(c.reply["extra"].value("converted", json::array()), json::array({"positives: int64 -> int32"}));

  Tensor y = arena.read(layout.outputs[0]);
  Tensor pos = arena.read(layout.outputs[1]);
  for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(y.span<float>()[i], x.span<float>()[i] * 2.0f) << i;
  for (int64_t row = 0; row < 4; ++row) {
    int expect = 0;
    for (int64_t col = 0; col < 8; ++col) expect += x.span<float>()[row * 8 + col] > 0 ? 1 : 0;
    EXPECT_EQ(pos.span<int32_t>()[row], expect) << row;
  }
  EXPECT_TRUE(arena.damaged_guards(layout, kGuardSeed).empty());
  EXPECT_TRUE(arena.equals(layout.inputs[0], x));
  EXPECT_TRUE(arena.equals(layout.inputs[1], scale));

  // upload = false (and upload_from past the inputs): the previous inputs are reused, so new arena
  // inputs change nothing; a fresh upload picks them up.
  arena.write(layout.inputs[1], make_scalar(3.0f));
  for (const auto& s : layout.outputs) arena.poison(s, 6);
  c = r.call(CallRequest{.seq = 2, .upload = false}, kTimeoutS);
  ASSERT_EQ(c.kind, CallOutcome::Kind::kOk) << c.message;
  EXPECT_EQ(arena.read(layout.outputs[0]).span<float>()[5], x.span<float>()[5] * 2.0f);
  c = r.call(CallRequest{.seq = 3, .upload_from = layout.outputs[0].offset - kGuardBytes}, kTimeoutS);
  ASSERT_EQ(c.kind, CallOutcome::Kind::kOk) << c.message;
  EXPECT_EQ(arena.read(layout.outputs[0]).span<float>()[5], x.span<float>()[5] * 2.0f);
  c = r.call(CallRequest{.seq = 4, .upload_from = 0}, kTimeoutS);
  ASSERT_EQ(c.kind, CallOutcome::Kind::kOk) << c.message;
  EXPECT_EQ(arena.read(layout.outputs[0]).span<float>()[5], x.span<float>()[5] * 3.0f);

  // download = false: the output slots keep their poison.
  for (const auto& s : layout.outputs) arena.poison(s, 7);
  Tensor poisoned = arena.read(layout.outputs[0]);
  c = r.call(CallRequest{.seq = 5, .download = false}, kTimeoutS);
  ASSERT_EQ(c.kind, CallOutcome::Kind::kOk) << c.message;
  EXPECT_TRUE(arena.read(layout.outputs[0]).bitwise_equal(poisoned));
  EXPECT_TRUE(arena.damaged_guards(layout, kGuardSeed).empty());

  // A new, larger layout remaps the arena.
  ArenaLayout big = plan_layout(
      {Slot{"x", DType::kFloat32, {64, 128}, false, 0, 64 * 128 * 4}, Slot{"scale", DType::kFloat32, {}, true, 0, 4}},
      {Slot{"y", DType::kFloat32, {64, 128}, false, 0, 64 * 128 * 4},
       Slot{"positives", DType::kInt32, {64}, false, 0, 64 * 4}});
  lo = r.set_layout(big, kTimeoutS);
  ASSERT_EQ(lo.kind, CallOutcome::Kind::kOk) << lo.message;
  Tensor bx(DType::kFloat32, {64, 128});
  for (int64_t i = 0; i < bx.numel(); ++i) bx.span<float>()[i] = static_cast<float>(i % 11) - 5.0f;
  r.arena().write(big.inputs[0], bx);
  r.arena().write(big.inputs[1], make_scalar(-1.0f));
  r.arena().fill_guards(big, kGuardSeed + 1);
  c = r.call(CallRequest{.seq = 6}, kTimeoutS);
  ASSERT_EQ(c.kind, CallOutcome::Kind::kOk) << c.message;
  Tensor by = r.arena().read(big.outputs[0]);
  EXPECT_EQ(by.span<float>()[64 * 128 - 1], -bx.span<float>()[64 * 128 - 1]);
  EXPECT_TRUE(r.arena().damaged_guards(big, kGuardSeed + 1).empty());
}

TEST_F(TorchOracleTest, ARaisingReferenceFailsTheCallWithItsTraceback) {
  REQUIRE_TORCH();
  RunnerClient r = start(false);
  stdfs::path def = write_definition("raises", kTwoInputs, kTwoOutputs, R"(import torch

def helper(x):
    raise ValueError("boom from the reference")

def run(x, scale):
    return helper(x)
)");
  ASSERT_EQ(load_torch_reference(r, def, kTimeoutS).kind, CallOutcome::Kind::kOk);
  ArenaLayout layout = scale_layout();
  ASSERT_EQ(r.set_layout(layout, kTimeoutS).kind, CallOutcome::Kind::kOk);
  r.arena().write(layout.inputs[0], make_x(0));
  r.arena().fill_guards(layout, kGuardSeed);
  for (const auto& s : layout.outputs) r.arena().poison(s, 9);
  Tensor poisoned = r.arena().read(layout.outputs[0]);
  auto c = r.call(CallRequest{.seq = 1}, kTimeoutS);
  ASSERT_EQ(c.kind, CallOutcome::Kind::kFailed);
  EXPECT_NE(c.message.find("Traceback"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("ValueError: boom from the reference"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("in helper"), std::string::npos) << c.message;
  EXPECT_TRUE(r.arena().read(layout.outputs[0]).bitwise_equal(poisoned));
  EXPECT_TRUE(r.arena().damaged_guards(layout, kGuardSeed).empty());
  EXPECT_TRUE(r.alive());
}

TEST_F(TorchOracleTest, WrongShapesCountsAndBrokenSourcesAreClearErrors) {
  REQUIRE_TORCH();
  RunnerClient r = start(false);
  // Positional call (run's parameter names differ from the definition's) returning a wrong shape.
  stdfs::path def = write_definition("shape", kTwoInputs, kTwoOutputs, R"(import torch

def run(a, b):
    return a.t() * b, (a > 0).sum(dim=1)
)");
  auto load = load_torch_reference(r, def, kTimeoutS);
  ASSERT_EQ(load.kind, CallOutcome::Kind::kOk) << load.message;
  EXPECT_EQ(load.reply.value("call", ""), "positional");
  ArenaLayout layout = scale_layout();
  ASSERT_EQ(r.set_layout(layout, kTimeoutS).kind, CallOutcome::Kind::kOk);
  r.arena().write(layout.inputs[0], make_x(0));
  auto c = r.call(CallRequest{.seq = 1}, kTimeoutS);
  ASSERT_EQ(c.kind, CallOutcome::Kind::kFailed);
  EXPECT_NE(c.message.find("output y: shape [8, 4], the definition's is [4, 8]"), std::string::npos) << c.message;

  def = write_definition("count", kTwoInputs, kTwoOutputs, "def run(x, scale):\n    return x * scale\n");
  ASSERT_EQ(load_torch_reference(r, def, kTimeoutS).kind, CallOutcome::Kind::kOk);
  ASSERT_EQ(r.set_layout(layout, kTimeoutS).kind, CallOutcome::Kind::kOk);
  c = r.call(CallRequest{.seq = 2}, kTimeoutS);
  ASSERT_EQ(c.kind, CallOutcome::Kind::kFailed);
  EXPECT_NE(c.message.find("returned 1 value(s); the definition has 2 output(s)"), std::string::npos) << c.message;

  def = write_definition("syntax", kTwoInputs, kTwoOutputs, "def run(x, scale)\n    return x\n");
  load = load_torch_reference(r, def, kTimeoutS);
  ASSERT_EQ(load.kind, CallOutcome::Kind::kFailed);
  EXPECT_NE(load.message.find("the reference does not load"), std::string::npos) << load.message;
  EXPECT_NE(load.message.find("SyntaxError"), std::string::npos) << load.message;

  def = write_definition("norun", kTwoInputs, kTwoOutputs, "def forward(x, scale):\n    return x\n");
  load = load_torch_reference(r, def, kTimeoutS);
  ASSERT_EQ(load.kind, CallOutcome::Kind::kFailed);
  EXPECT_NE(load.message.find("defines no function run"), std::string::npos) << load.message;

  // A layout that is not the definition's is refused.
  def = write_definition("scale", kTwoInputs, kTwoOutputs, kScaleReference);
  ASSERT_EQ(load_torch_reference(r, def, kTimeoutS).kind, CallOutcome::Kind::kOk);
  ArenaLayout wrong =
      plan_layout({Slot{"z", DType::kFloat32, {4, 8}, false, 0, 128}, Slot{"scale", DType::kFloat32, {}, true, 0, 4}},
                  layout.outputs);
  auto lo = r.set_layout(wrong, kTimeoutS);
  ASSERT_EQ(lo.kind, CallOutcome::Kind::kFailed);
  EXPECT_NE(lo.message.find("not the definition's inputs"), std::string::npos) << lo.message;
  EXPECT_TRUE(r.alive());
}

// Cross-check of one pack: its reference solution (kda-runner) as the candidate and its Python
// reference (the torch oracle) as the expected values, on the first `count` dev workloads, with the
// pack's checker and tolerances; one "oracle-xcheck" line per workload on stdout for the record.
void cross_check_pack(const stdfs::path& dir, const std::string& backend, size_t count) {
  auto pack = task::load_task_pack(dir);
  ASSERT_TRUE(pack.ok()) << pack.status().message();
  auto lib = build_solution(pack->reference, {});
  ASSERT_TRUE(lib.ok()) << lib.status().message();
  ASSERT_TRUE(lib->ok) << lib->log;
  RunnerOptions native_options{
      .runner_binary = KDA_RUNNER, .backend = backend, .role = RunnerRole::kReference, .sandbox = false};
  auto native = RunnerClient::start(native_options);
  ASSERT_TRUE(native.ok()) << native.status().message();
  auto nl = native->load(lib->library, lib->symbol, kTimeoutS);
  ASSERT_EQ(nl.kind, CallOutcome::Kind::kOk) << nl.message;
  auto oracle = start_torch_reference(kRunnerPath, backend, dir / "definition.json", 600);
  ASSERT_TRUE(oracle.ok()) << oracle.status().message();
  BlobCache blobs;
  for (size_t k = 0; k < std::min(count, pack->dev_uuids.size()); ++k) {
    const std::string& uuid = pack->dev_uuids[k];
    SCOPED_TRACE(uuid);
    const task::Workload* w = pack->workload(uuid);
    ASSERT_NE(w, nullptr);
    auto rw = resolve_workload(*pack, *w);
    ASSERT_TRUE(rw.ok()) << rw.status().message();
    auto inputs = materialize_inputs(*pack, *rw, 0x5eed + k, blobs);
    ASSERT_TRUE(inputs.ok()) << inputs.status().message();
    // The evaluator's layout: every tensor in its own guarded slot, definition order.
    std::vector<Slot> ins, outs;
    for (size_t i = 0; i < pack->definition.inputs.size(); ++i) {
      const auto& spec = pack->definition.inputs[i];
      Slot s{spec.name, spec.dtype, rw->input_shapes[i], !spec.shape.has_value()};
      s.nbytes = static_cast<uint64_t>(tensor::dtype_storage_bytes(spec.dtype, *tensor::checked_numel(s.shape)));
      ins.push_back(s);
    }
    std::vector<std::string> names;
    for (size_t i = 0; i < pack->definition.outputs.size(); ++i) {
      const auto& spec = pack->definition.outputs[i];
      Slot s{spec.name, spec.dtype, rw->output_shapes[i], false};
      s.nbytes = static_cast<uint64_t>(tensor::dtype_storage_bytes(spec.dtype, *tensor::checked_numel(s.shape)));
      outs.push_back(s);
      names.push_back(spec.name);
    }
    ArenaLayout layout = plan_layout(ins, outs);

    std::vector<std::vector<tensor::Tensor>> results;
    std::vector<double> ms;
    for (RunnerClient* r : {&*native, &*oracle}) {
      auto lo = r->set_layout(layout, kTimeoutS);
      ASSERT_EQ(lo.kind, CallOutcome::Kind::kOk) << lo.message;
      for (size_t i = 0; i < layout.inputs.size(); ++i) r->arena().write(layout.inputs[i], inputs->tensors[i]);
      r->arena().fill_guards(layout, kGuardSeed + k);
      for (const auto& s : layout.outputs) r->arena().poison(s, 11 + k);
      auto c = r->call(CallRequest{.seq = static_cast<uint64_t>(k + 1), .timed = true}, 600);
      ASSERT_EQ(c.kind, CallOutcome::Kind::kOk) << c.message << "\n" << c.log;
      EXPECT_TRUE(r->arena().damaged_guards(layout, kGuardSeed + k).empty());
      for (size_t i = 0; i < layout.inputs.size(); ++i)
        EXPECT_TRUE(r->arena().equals(layout.inputs[i], inputs->tensors[i])) << layout.inputs[i].name;
      std::vector<tensor::Tensor> out;
      for (const auto& s : layout.outputs) out.push_back(r->arena().read(s));
      results.push_back(std::move(out));
      ms.push_back(static_cast<double>(c.reply.value("elapsed_ns", int64_t{0})) / 1e6);
    }
    Tolerance tol{pack->settings.atol, pack->settings.rtol, pack->settings.matched_ratio};
    CheckResult check = pack->settings.checker == task::Checker::kTopkIndices
                            ? check_topk_indices(pack->definition, inputs->tensors, results[0], results[1], tol)
                            : check_default(names, results[0], results[1], tol, pack->settings.compare_outputs);
    EXPECT_EQ(check.verdict, CheckVerdict::kPass) << check.message;
    std::printf("oracle-xcheck %s %s %s %s max_abs=%.3g max_rel=%.3g matched=%.6f native_ms=%.4f python_ms=%.4f\n",
                pack->definition.name.c_str(), backend.c_str(), uuid.c_str(),
                check.verdict == CheckVerdict::kPass ? "PASS" : "FAIL", check.max_abs, check.max_rel,
                check.matched_ratio, ms[0], ms[1]);
    std::fflush(stdout);
  }
}

// The built-in host packs' Python references (run by the oracle) against their C++ reference
// solutions, on the first dev workload, at each pack's tolerance.
TEST(TorchOracleHostPacks, PythonReferencesMatchTheCppReferences) {
  REQUIRE_TORCH();
  auto packs = task::find_task_packs(stdfs::path(KDA_SOURCE_DIR) / "tasks" / "host");
  ASSERT_GE(packs.size(), 3u);
  for (const auto& dir : packs) {
    SCOPED_TRACE(dir.string());
    cross_check_pack(dir, "host", 1);
  }
}

// On a GPU with CUDA torch: every CUDA and contest pack's Python reference (the oracle on the
// device) against its CUDA reference solution, on the first 2 dev workloads (one ctest per pack;
// the record for bench/contest: `ctest -R TorchOracleGpu -V | grep oracle-xcheck`).
class TorchOracleGpu : public ::testing::TestWithParam<std::string> {};

std::vector<std::string> gpu_packs() {
  std::vector<std::string> names;
  for (const char* group : {"cuda", "contest"})
    for (const auto& dir : task::find_task_packs(stdfs::path(KDA_SOURCE_DIR) / "tasks" / group))
      names.push_back(std::string(group) + "/" + dir.filename().string());
  return names;
}

TEST_P(TorchOracleGpu, PythonReferenceMatchesTheCudaReference) {
  REQUIRE_TORCH();
  if (torch_probe().detail.find("cuda available") == std::string::npos)
    GTEST_SKIP() << "torch has no CUDA device: " << torch_probe().detail;
  cross_check_pack(stdfs::path(KDA_SOURCE_DIR) / "tasks" / GetParam(), "cuda", 2);
}

INSTANTIATE_TEST_SUITE_P(Packs, TorchOracleGpu, ::testing::ValuesIn(gpu_packs()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace kda::eval
