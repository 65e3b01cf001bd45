// eval's units, each on its own: probes, output comparison, attestation, statistics, the gate
// ledger and the arena. The evaluator end to end is eval_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "eval/arena.h"
#include "eval/attestation.h"
#include "eval/code_digest.h"
#include "eval/compare.h"
#include "eval/evaluator.h"
#include "eval/gates.h"
#include "eval/input_digest.h"
#include "eval/inputs.h"
#include "eval/probes.h"
#include "eval/protocol.h"
#include "eval/round_trips.h"
#include "eval/runner_client.h"
#include "eval/screen_cache.h"
#include "eval/solution_build.h"
#include "eval/stats.h"
#include "task/solution.h"
#include "task/task_pack.h"
#include "tensor/random_values.h"
#include "util/fs.h"

namespace kda::eval {
namespace {

// The runner protocol's messages: what the evaluator writes, kda-runner reads back unchanged; an
// absent field takes the runner's default; a field of the wrong type is refused, naming it.
TEST(Protocol, MessagesRoundTripAndRefuseWrongTypes) {
  CallRequest call{.seq = 7, .upload = false, .upload_from = 4096, .download_outputs = false, .timed = true};
  call.defer_records = true;
  call.poison = {{0, 11}, {2, 13}};
  auto back = CallRequest::from_json(nlohmann::json::parse(call.to_json().dump()));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->to_json(), call.to_json());
  EXPECT_EQ(back->poison, call.poison);
  auto defaults = CallRequest::from_json({{"seq", 3}});
  ASSERT_TRUE(defaults.ok());
  EXPECT_TRUE(defaults->flush && defaults->upload && defaults->download && defaults->download_outputs);
  EXPECT_FALSE(defaults->timed || defaults->defer_records || defaults->profile_range);
  auto bad = CallRequest::from_json({{"seq", 3}, {"timed", "yes"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("call: field \"timed\" has the wrong type"), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(CallRequest::from_json(nlohmann::json::array()).ok());
  EXPECT_EQ(defaults->graph, CallRequest::Graph::kNone);
  for (auto g : {CallRequest::Graph::kCapture, CallRequest::Graph::kReplay}) {  // the deployment contract's calls
    CallRequest c;
    c.graph = g;
    auto again = CallRequest::from_json(nlohmann::json::parse(c.to_json().dump()));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->graph, g);
  }
  auto bad_graph = CallRequest::from_json({{"seq", 3}, {"graph", "record"}});
  ASSERT_FALSE(bad_graph.ok());
  EXPECT_NE(bad_graph.status().message().find("graph 'record'"), std::string::npos);

  PrepareRequest prep{.inputs = {{.random = true, .seed = 5, .stream = 2, .fingerprint_seed = 9}, {.random = false}},
                      .digest_key = 42};
  auto prep_back = PrepareRequest::from_json(prep.to_json());
  ASSERT_TRUE(prep_back.ok()) << prep_back.status().message();
  EXPECT_EQ(prep_back->to_json(), prep.to_json());
  EXPECT_EQ(prep_back->inputs[0].fingerprint_seed, 9u);
  EXPECT_FALSE(prep_back->inputs[1].fingerprint_seed.has_value());
  EXPECT_FALSE(PrepareRequest::from_json({{"inputs", {{{"seed", "x"}}}}}).ok());

  LoadRequest load{.library = "/x/lib.so", .symbol = "run", .sandbox = true, .reload_root = "/x"};
  auto load_back = LoadRequest::from_json(load.to_json());
  ASSERT_TRUE(load_back.ok());
  EXPECT_EQ(load_back->reload_root, "/x");
  EXPECT_TRUE(load_back->sandbox);
  EXPECT_FALSE(LoadRequest::from_json({{"symbol", "run"}}).ok());  // no library

  CallReply reply{.ok = true, .rc = 0, .elapsed_ns = 1500, .extra = {{"kernels", {"k"}}}, .seq = 7};
  auto reply_back = CallReply::from_json(reply.to_json());
  ASSERT_TRUE(reply_back.ok());
  EXPECT_EQ(reply_back->to_json(), reply.to_json());
  EXPECT_FALSE(reply.to_json().contains("error"));
  PrepareReply pr{.ok = true, .digests = {{1, 2}}, .elapsed_ns = 3};
  auto pr_back = PrepareReply::from_json(pr.to_json());
  ASSERT_TRUE(pr_back.ok());
  EXPECT_EQ(pr_back->digests, pr.digests);

  Hello hello{.pid = 12, .backend = "cuda", .capabilities = {"device_inputs", "reload"}};
  auto hello_back = Hello::from_json(nlohmann::json::parse(hello.to_json().dump()));
  ASSERT_TRUE(hello_back.ok());
  EXPECT_EQ(hello_back->to_json(), hello.to_json());
  auto bad_hello = Hello::from_json({{"pid", 1}, {"capabilities", "reload"}});  // not a list
  ASSERT_FALSE(bad_hello.ok());
  EXPECT_NE(bad_hello.status().message().find("hello: field \"capabilities\""), std::string::npos);
  EXPECT_TRUE(Hello::from_json({{"pid", 1}, {"backend", "torch-cpu"}})->capabilities.empty());  // the oracle's
  CollectReply collect{.ok = true, .calls = {{{"seq", 4}, {"cupti_span_ns", 2240}}}};
  auto collect_back = CollectReply::from_json(collect.to_json());
  ASSERT_TRUE(collect_back.ok());
  EXPECT_EQ(collect_back->calls.at(0).at("cupti_span_ns"), 2240);
  EXPECT_FALSE(CollectReply::from_json({{"ok", true}, {"calls", 3}}).ok());
}

namespace stdfs = std::filesystem;
using tensor::DType;
using tensor::Tensor;

Tensor vec(std::vector<float> v) {
  Tensor t(DType::kFloat32, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.set_from_double(static_cast<int64_t>(i), v[i]);
  return t;
}

// Large inputs are transformed over several threads: every element, once (packed fp4 too, two per
// byte), and the outliers' RMS does not depend on the number of threads.
// The runner's CUPTI summaries of four timed calls: one clean, one with a device-wide wait and a
// pageable read-back, one with a pinned copy only (legal in a graph), one with two stream waits.
TEST(RoundTrips, HostWaitsAndPageableCopiesAreCountedByCallAndNamed) {
  HostRoundTrips rt;
  rt.add({{"kernels", {"k"}}});
  rt.add(
      {{"host_waits", {{"cudaDeviceSynchronize", 1}}}, {"copies", {{"DtoH pageable", {{"count", 1}, {"bytes", 2}}}}}});
  rt.add({{"copies", {{"HtoD pinned", {{"count", 1}, {"bytes", 64}}}, {"DtoD", {{"count", 3}, {"bytes", 9}}}}}});
  rt.add({{"host_waits", {{"cudaStreamSynchronize", 2}}}});
  EXPECT_EQ(rt.of_calls, 4);
  EXPECT_EQ(rt.calls, 2);
  EXPECT_EQ(rt.host_waits.at("cudaDeviceSynchronize"), 1);
  EXPECT_EQ(rt.host_waits.at("cudaStreamSynchronize"), 2);
  ASSERT_EQ(rt.pageable_copies.size(), 1u);
  EXPECT_EQ(rt.pageable_copies.at("DtoH pageable"), std::make_pair(int64_t{1}, int64_t{2}));
  const std::string said = describe_round_trips(rt.to_json());
  EXPECT_NE(said.find("2 of 4 timed calls"), std::string::npos) << said;
  EXPECT_NE(said.find("cudaDeviceSynchronize x1"), std::string::npos) << said;
  EXPECT_NE(said.find("cudaStreamSynchronize x2"), std::string::npos) << said;
  EXPECT_NE(said.find("DtoH pageable copy x1 (2 B)"), std::string::npos) << said;
  EXPECT_EQ(said.find("pinned"), std::string::npos) << said;

  HostRoundTrips clean;
  clean.add({{"copies", {{"HtoD pinned", {{"count", 1}, {"bytes", 64}}}}}});
  clean.add({{"host_waits", {{"cudaEventSynchronize", 0}}}});
  EXPECT_EQ(clean.calls, 0);
  EXPECT_EQ(describe_round_trips(clean.to_json()), "");
  EXPECT_EQ(describe_round_trips(nlohmann::json::object()), "");
}

TEST(Probes, LargeInputsAreTransformedWhole) {
  for (DType d : {DType::kFloat32, DType::kFloat4E2M1}) {
    Tensor base(d, {(int64_t{3} << 20) + 5});
    for (int64_t i = 0; i < base.numel(); ++i) base.set_from_double(i, (i % 7) * 0.5);
    Tensor t = base;
    const std::string what = apply_probe(task::Probe::kScale, 5, "x", t).description;  // "x * 2^k"
    const double ratio = std::ldexp(1.0, std::stoi(what.substr(what.find('^') + 1)));
    const double limit = d == DType::kFloat4E2M1 ? 6.0 : 1e30;
    Tensor want = base;  // the same transform, one element at a time
    for (int64_t i = 0; i < base.numel(); ++i)
      want.set_from_double(i, std::clamp(base.get_as_double(i) * ratio, -limit, limit));
    EXPECT_TRUE(t.bitwise_equal(want)) << tensor::dtype_name(d) << " " << what;
  }
}

// Probes transform with secret but reproducible parameters: offset by one constant of magnitude 2-4,
// scale by an exact power of two, outliers ~1/512 of the elements at 8-16x the RMS; fp8 stays finite.
TEST(Probes, TransformsAreExactReproducibleAndBounded) {
  tensor::Tensor base(tensor::DType::kFloat32, {4096});
  for (int64_t i = 0; i < base.numel(); ++i) base.set_from_double(i, std::sin(0.37 * static_cast<double>(i)));
  auto probed = [&](task::Probe p, uint64_t seed) {
    tensor::Tensor t = base;
    apply_probe(p, seed, "x", t);
    return t;
  };
  tensor::Tensor off = probed(task::Probe::kOffset, 1);
  const double c = off.get_as_double(0) - base.get_as_double(0);
  EXPECT_GE(std::fabs(c), 2.0 - 1e-6);
  EXPECT_LE(std::fabs(c), 4.0 + 1e-6);
  for (int64_t i = 0; i < base.numel(); ++i) EXPECT_NEAR(off.get_as_double(i) - base.get_as_double(i), c, 1e-5);
  tensor::Tensor sc = probed(task::Probe::kScale, 2);
  const double ratio = sc.get_as_double(1) / base.get_as_double(1);
  int k = 0;
  EXPECT_EQ(std::frexp(ratio, &k), 0.5) << ratio;  // a power of two
  EXPECT_NE(ratio, 1.0);
  for (int64_t i = 0; i < base.numel(); ++i) EXPECT_EQ(sc.get_as_double(i), base.get_as_double(i) * ratio);
  tensor::Tensor out = probed(task::Probe::kOutliers, 3);
  int changed = 0;
  for (int64_t i = 0; i < base.numel(); ++i)
    if (out.get_as_double(i) != base.get_as_double(i)) {
      ++changed;
      EXPECT_GE(std::fabs(out.get_as_double(i)), 8.0 - 1e-6);  // RMS < 1 counts as 1
      EXPECT_LE(std::fabs(out.get_as_double(i)), 16.0 + 1e-6);
    }
  EXPECT_GE(changed, 1);
  EXPECT_LE(changed, 8);  // 4096 / 512, fewer where positions repeat
  // Same seed, same transform; another seed, another.
  EXPECT_EQ(probed(task::Probe::kOffset, 1).get_as_double(7), off.get_as_double(7));
  EXPECT_NE(probed(task::Probe::kOffset, 99).get_as_double(7), off.get_as_double(7));
  // fp8 e4m3fn has no infinity: probes saturate at its largest finite value instead of writing NaN.
  tensor::Tensor f8(tensor::DType::kFloat8E4M3FN, {64});
  for (int64_t i = 0; i < f8.numel(); ++i) f8.set_from_double(i, 300.0);
  for (uint64_t seed = 0; seed < 16; ++seed) {
    tensor::Tensor t = f8;
    apply_probe(task::Probe::kScale, seed, "x", t);
    for (int64_t i = 0; i < t.numel(); ++i) EXPECT_TRUE(std::isfinite(t.get_as_double(i)));
  }
  // Integers are left alone.
  tensor::Tensor ints(tensor::DType::kInt32, {8});
  EXPECT_NE(apply_probe(task::Probe::kOffset, 1, "idx", ints).description.find("not floating-point"),
            std::string::npos);
  EXPECT_EQ(ints.get_as_double(3), 0.0);
}

// A Python solution's code text: comments, trailing blanks and emptied lines go; every literal stays
// whole, `#` and blank lines inside it included, also inside an f-string's replacement field.
TEST(CodeDigest, PythonCodeTextDropsCommentsButNoLiteral) {
  EXPECT_EQ(python_code_text("x = 1  # one\n# a whole line\n\n    \ny = 2\t\n"), "x = 1\ny = 2\n");
  EXPECT_EQ(python_code_text("s = \"a # b\"  # c\nt = 'it''s # x'\n"), "s = \"a # b\"\nt = 'it''s # x'\n");
  const std::string doc = "def f():\n    \"\"\"Doc # kept.\n\n    trailing   \n    \"\"\"  # gone\n    return 1\n";
  EXPECT_EQ(python_code_text(doc), "def f():\n    \"\"\"Doc # kept.\n\n    trailing   \n    \"\"\"\n    return 1\n");
  EXPECT_EQ(python_code_text("r'a\\'#b'  # c\n"), "r'a\\'#b'\n");
  EXPECT_EQ(python_code_text("f\"{{#}} {d[\"k#v\"]:>{w}}\"  # c\n"), "f\"{{#}} {d[\"k#v\"]:>{w}}\"\n");
  EXPECT_EQ(python_code_text("rb'''x\n# in\n'''\n"), "rb'''x\n# in\n'''\n");
  EXPECT_EQ(python_code_text("x = 'unterminated # c\ny = 2\n"), "x = 'unterminated # c\ny = 2\n");
  // What the review found: a quote in a format spec is text, a lone \r ends a line, "\{" still opens a
  // field in Python 3.12, and nesting past CPython's limit keeps the rest of the file (no recursion).
  EXPECT_NE(python_code_text("L = {\"m\": f\"\"\"{when:%b '%y}\"\"\",\n}\nC = \"\"\"\n#define BLOCK 128\n\"\"\"\n"),
            python_code_text("L = {\"m\": f\"\"\"{when:%b '%y}\"\"\",\n}\nC = \"\"\"\n#define BLOCK 256\n\"\"\"\n"));
  EXPECT_EQ(python_code_text("f\"{x:{w}.{p}f} {y!r:>{w}}\"  # c\n"), "f\"{x:{w}.{p}f} {y!r:>{w}}\"\n");
  EXPECT_NE(python_code_text("x = 1 # c\ry = 2\r"), python_code_text("x = 1 # c\ry = 3\r"));
  EXPECT_EQ(python_code_text("x = 1 # c\r\ny = 2\r\n"), "x = 1\ny = 2\n");
  EXPECT_NE(python_code_text("f\"\\{d[\"#\"]}\"\n"), python_code_text("f\"\\{d[\"#x\"]}\"\n"));
  std::string deep = "v = ";
  for (int k = 0; k < 60000; ++k) deep += "f\"{";
  EXPECT_EQ(python_code_text(deep).size(), deep.size());  // kept as it is, and no stack overflow

  const auto digest = [](const std::string& kernel) {
    return python_code_digest({{"kernel.py", kernel}, {"solution.json", "{}"}}, "kernel.py::run", true);
  };
  const std::string base = "import triton\n\ndef run(x):\n    return x * 2  # double\n";
  EXPECT_EQ(digest(base), digest("import triton\n# Round 3: a comment only\ndef run(x):\n    return x * 2\n"));
  EXPECT_NE(digest(base), digest("import triton\n\ndef run(x):\n    return x * 3  # double\n"));
  EXPECT_NE(digest(base), digest("import triton\n\ndef run(x):\n    return x * 2 if '#' else 0\n"));
  EXPECT_NE(digest(base), python_code_digest({{"kernel.py", base}, {"solution.json", "{}"}}, "kernel.py::run", false));
  EXPECT_NE(digest(base), python_code_digest({{"kernel.py", base}, {"solution.json", "{ }"}}, "kernel.py::run", true));
}

TEST(Verdict, NamesReadBackToTheirVerdicts) {
  for (int v = 0; v <= static_cast<int>(Verdict::kMemoization); ++v)
    EXPECT_EQ(verdict_from_name(verdict_name(static_cast<Verdict>(v))), static_cast<Verdict>(v));
  EXPECT_FALSE(verdict_from_name("PASSED ").has_value());
  EXPECT_FALSE(verdict_from_name("").has_value());
}

TEST(Compare, ElementFailsOnlyBeyondBothTolerances) {
  Tolerance tol{0.1, 0.1, 1.0};
  // |x-y| = 0.5 > atol but rel = 0.05 < rtol: passes. |x-y| = 0.05 < atol: passes.
  auto r = check_default({"y"}, {vec({10.5f, 0.05f})}, {vec({10.0f, 0.0f})}, tol);
  EXPECT_EQ(r.verdict, CheckVerdict::kPass) << r.message;
  EXPECT_NEAR(r.max_abs, 0.5, 1e-6);
  // Both exceeded: fails.
  r = check_default({"y"}, {vec({2.0f})}, {vec({1.0f})}, tol);
  EXPECT_EQ(r.verdict, CheckVerdict::kIncorrectNumerical);
  EXPECT_NE(r.message.find("'y'"), std::string::npos);
}

// The error budget: per element min(abs / atol, rel / rtol), the largest over the output; an element
// fails where it exceeds 1, so a passing output has spent at most all of it.
TEST(Compare, ToleranceUsedIsTheShareOfTheBudgetTheWorstElementSpent) {
  Tolerance tol{0.1, 0.1, 1.0};
  // 10.5 vs 10: abs 0.5 (5x atol), rel 0.05 (0.5x rtol) -> 0.5; 0.05 vs 0: abs 0.05 -> 0.5; 1.02 vs 1 -> 0.2.
  auto r = check_default({"y", "z"}, {vec({10.5f, 0.05f}), vec({1.02f})}, {vec({10.0f, 0.0f}), vec({1.0f})}, tol);
  ASSERT_EQ(r.verdict, CheckVerdict::kPass) << r.message;
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_NEAR(r.outputs[0].tolerance_used, 0.5, 1e-5);
  EXPECT_NEAR(r.outputs[1].tolerance_used, 0.2, 1e-5);
  EXPECT_NEAR(r.tolerance_used, 0.5, 1e-5);
  EXPECT_NEAR(r.to_json()["outputs"][1]["tolerance_used"].get<double>(), 0.2, 1e-5);
  // Exact: nothing spent. Beyond both tolerances: more than all of it. Inf: infinite ("Infinity").
  EXPECT_EQ(check_default({"y"}, {vec({1.0f})}, {vec({1.0f})}, tol).tolerance_used, 0.0);
  EXPECT_GT(check_default({"y"}, {vec({2.0f})}, {vec({1.0f})}, tol).tolerance_used, 1.0);
  auto inf = check_default({"y"}, {vec({INFINITY})}, {vec({1.0f})}, tol);
  EXPECT_TRUE(std::isinf(inf.tolerance_used));
  EXPECT_EQ(inf.to_json()["tolerance_used"], "Infinity");
}

TEST(Compare, InfAndNanAlwaysFailEvenWhenReferenceAgrees) {
  Tolerance tol;
  auto r = check_default({"y"}, {vec({INFINITY})}, {vec({INFINITY})}, tol);
  EXPECT_EQ(r.verdict, CheckVerdict::kIncorrectNumerical);
  EXPECT_NE(r.message.find("Inf"), std::string::npos);
  r = check_default({"y"}, {vec({NAN})}, {vec({1})}, tol);
  EXPECT_EQ(r.verdict, CheckVerdict::kIncorrectNumerical);
  EXPECT_NE(r.message.find("NaN"), std::string::npos);
}

TEST(Compare, MatchedRatioAndOrder) {
  Tolerance tol{0.01, 0.01, 0.75};
  auto r = check_default({"y"}, {vec({1, 1, 1, 5})}, {vec({1, 1, 1, 1})}, tol);
  EXPECT_EQ(r.verdict, CheckVerdict::kPass);
  EXPECT_DOUBLE_EQ(r.matched_ratio, 0.75);
  tol.matched_ratio = 0.8;
  EXPECT_EQ(check_default({"y"}, {vec({1, 1, 1, 5})}, {vec({1, 1, 1, 1})}, tol).verdict,
            CheckVerdict::kIncorrectNumerical);
  // Shape is checked before values, dtype before values.
  EXPECT_EQ(check_default({"y"}, {vec({1, 2})}, {vec({1})}, tol).verdict, CheckVerdict::kIncorrectShape);
  Tensor bf(DType::kBFloat16, {1});
  EXPECT_EQ(check_default({"y"}, {bf}, {vec({0})}, tol).verdict, CheckVerdict::kIncorrectDtype);
  // Only the selected outputs count.
  EXPECT_EQ(check_default({"a", "b"}, {vec({9}), vec({1})}, {vec({1}), vec({1})}, tol, {"b"}).verdict,
            CheckVerdict::kPass);
}

// An INCORRECT verdict names the worst elements by their indices in the output's shape, with the
// candidate's and the reference's values, so a person sees what went wrong without the trace.
TEST(Compare, IncorrectNamesTheWorstElementsWithIndexAndValues) {
  Tensor x(DType::kFloat32, {3, 4}), y(DType::kFloat32, {3, 4});
  for (int64_t i = 0; i < 12; ++i) {
    x.set_from_double(i, 1.0);
    y.set_from_double(i, 1.0);
  }
  x.set_from_double(1 * 4 + 2, 3.0);   // [1, 2]: abs 2
  x.set_from_double(2 * 4 + 3, -9.0);  // [2, 3]: abs 10, the worst
  x.set_from_double(0 * 4 + 1, 1.5);   // [0, 1]: abs 0.5, the first
  auto r = check_default({"out"}, {x}, {y}, Tolerance{0.01, 0.01, 1.0});
  ASSERT_EQ(r.verdict, CheckVerdict::kIncorrectNumerical);
  EXPECT_NE(r.message.find("3 of 12 elements"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("first at [0, 1]"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("worst [2, 3]: got -9, expected 1 (abs 10, rel 10)"), std::string::npos) << r.message;
  ASSERT_EQ(r.outputs[0].worst.size(), 3u);
  EXPECT_EQ(r.outputs[0].worst[0].index, 11);
  EXPECT_EQ(r.outputs[0].worst[1].index, 6);
  EXPECT_EQ(r.outputs[0].worst[2].index, 1);
  const auto j = r.to_json();
  EXPECT_EQ(j["outputs"][0]["worst"][0]["at"], "[2, 3]");
  EXPECT_EQ(j["outputs"][0]["worst"][0]["got"], -9.0);
  // A NaN counts among the worst (infinitely wrong) and is written as FlashInfer-Bench writes it.
  x.set_from_double(0, NAN);
  const auto n = check_default({"out"}, {x}, {y}, Tolerance{0.01, 0.01, 1.0}).to_json();
  EXPECT_EQ(n["outputs"][0]["worst"][0]["at"], "[0, 0]");
  EXPECT_EQ(n["outputs"][0]["worst"][0]["got"], "NaN");
  EXPECT_EQ(index_string(5, {}), "[5]");
  EXPECT_EQ(index_string(7, {2, 2, 2}), "[1, 1, 1]");
}

// The block-decoded, multi-threaded path must count exactly what an element-by-element reading of
// the rule counts: every failure once, the first failure's index, the maxima.
TEST(Compare, LargeOutputsSplitOverThreadsCountExactly) {
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    const int64_t n = (int64_t{1} << 22) + 77;  // several threads' worth, not a multiple of any block
    Tensor x(dt, {n}), y(dt, {n});
    for (int64_t i = 0; i < n; ++i) {
      y.set_from_double(i, static_cast<double>(i % 97) / 8.0);
      x.set_from_double(i, static_cast<double>(i % 97) / 8.0);
    }
    const std::vector<int64_t> bad = {1'000'003, 2'500'000, n - 1};
    for (int64_t i : bad) x.set_from_double(i, 1000.0);
    x.set_from_double(3'000'000, NAN);
    auto r = check_default({"y"}, {x}, {y}, Tolerance{1e-3, 1e-3, 1.0});
    ASSERT_EQ(r.outputs.size(), 1u);
    EXPECT_EQ(r.outputs[0].failed, 4) << tensor::dtype_name(dt);
    EXPECT_EQ(r.outputs[0].nan, 1);
    EXPECT_EQ(r.outputs[0].first_bad_index, 1'000'003);
    EXPECT_GE(r.outputs[0].max_abs, 1000.0 - 96.0 / 8.0);
    EXPECT_LE(r.outputs[0].max_abs, 1000.0);
    EXPECT_EQ(r.verdict, CheckVerdict::kIncorrectNumerical);
  }
}

TEST(Attestation, OnlyKernelsOutsideTheCandidatesOwnAreForeign) {
  const std::set<std::string> own = {"_Z6kernelPf", "_Z4tailPf"};
  EXPECT_TRUE(foreign_kernels({"_Z6kernelPf"}, own).empty());
  EXPECT_TRUE(foreign_kernels({}, own).empty());
  EXPECT_EQ(foreign_kernels({"_Z6kernelPf", "sgemm_128x64_nn", "ampere_h16816gemm"}, own),
            (std::vector<std::string>{"ampere_h16816gemm", "sgemm_128x64_nn"}));
}

// A Python solution's own kernels are the functions its sources decorate with a JIT; each
// language's rule says what else may run (kernel names as CUPTI reported them on an H100 for the
// torch rmsnorm solution, bench/results/h100/python_2026-12-06).
TEST(Attestation, APythonSolutionsOwnKernelsAreItsJitFunctionsAndItsLanguageSaysWhatElse) {
  const std::vector<task::SourceFile> sources = {
      {"kernel.py",
       "import triton\nimport triton.language as tl\n\n@triton.autotune(configs=[], key=['n'])\n"
       "@triton.jit(do_not_specialize=['eps'])\ndef _rmsnorm_row(x, n, eps, BLOCK: tl.constexpr):\n"
       "    pass\n\n@jit\ndef helper(x):\n    pass\n\n  @ tl . jit\n  def nested(y):\n    pass\n\n"
       "def run(x, y):\n    _rmsnorm_row[(1,)](x, 1, 1e-6, BLOCK=128)\n\n@functools.cache\ndef cached():\n"
       "    pass\n"},
      {"notes.txt", "@triton.jit\ndef not_python(x):\n"}};
  EXPECT_EQ(jit_kernel_names(sources), (std::set<std::string>{"_rmsnorm_row", "helper", "nested"}));
  const std::string aten_reduce =
      "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_7MeanOpsIffffEEjfLi4ELi4EEEEEvT1_";
  const std::string aten_rsqrt =
      "_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_17rsqrt_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE0_"
      "clEvENKUlvE0_clEvEUlfE_St5arrayIPcLm2EEEEviT0_T1_";
  const std::string aten_copy =
      "_ZN2at6native29vectorized_elementwise_kernelILi8EZNS0_25bfloat16_copy_kernel_cudaERNS_"
      "18TensorIteratorBaseEEUlfE_"
      "St5arrayIPcLm2EEEEviT0_T1_";
  const std::string cublas = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1";
  const std::set<std::string> jit = {"_rmsnorm_row"};
  // python: torch's ATen kernels are the solution's; cuBLAS behind torch.matmul is a library's.
  EXPECT_TRUE(foreign_python_kernels({aten_reduce, aten_rsqrt, aten_copy, "_rmsnorm_row"}, jit, "python").empty());
  EXPECT_EQ(foreign_python_kernels({aten_reduce, cublas}, jit, "python"), (std::vector<std::string>{cublas}));
  // triton: its own kernel (Triton 3's name, or Triton 2's with the signature) and torch's copies;
  // torch doing the work (a reduction, elementwise math) is foreign, and so is another JIT's kernel.
  EXPECT_TRUE(foreign_python_kernels({"_rmsnorm_row", "_rmsnorm_row_0d1d2d3de", aten_copy}, jit, "triton").empty());
  EXPECT_EQ(
      foreign_python_kernels({"_rmsnorm_row", aten_reduce, aten_rsqrt, "fused_recurrent_fwd_kernel"}, jit, "triton"),
      (std::vector<std::string>{aten_reduce, aten_rsqrt, "fused_recurrent_fwd_kernel"}));
  EXPECT_EQ(foreign_python_kernels({"_rmsnorm_rowX"}, jit, "triton"), (std::vector<std::string>{"_rmsnorm_rowX"}));
}

TEST(Stats, QuantilesAndMeans) {
  auto s = summarize({5, 1, 3, 2, 4});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_NEAR(s.cv, std::sqrt(2.5) / 3, 1e-12);
  EXPECT_DOUBLE_EQ(geometric_mean({1, 4}), 2);
  EXPECT_DOUBLE_EQ(geometric_mean({1, 0}), 0);
}

// Fresh-versus-repeat: one distribution on both sides never convicts, even with a slow fresh outlier
// or a small systematic gap; remembered outputs (repeats several times faster) always do; too few
// samples on either side make the test not apply.
// The geomean speedup's interval over trials: each trial's geomean is a replicate; identical trials
// give a zero-width interval, spread trials a Student-t interval centred on the reported geomean.
TEST(Stats, KernelMediansSayWhereACallsTimeWent) {
  const nlohmann::json k =
      kernel_medians({{"state_scan", {0.118, 0.116, 0.117}}, {"wy_prepare", {0.077}}, {"idle", {}}});
  EXPECT_DOUBLE_EQ(k["state_scan"]["median_ms"].get<double>(), 0.117);
  EXPECT_EQ(k["state_scan"]["calls"], 3);
  EXPECT_EQ(k["wy_prepare"]["calls"], 1);
  EXPECT_FALSE(k.contains("idle"));  // a kernel with no samples is not reported
  EXPECT_TRUE(kernel_medians({}).is_object());
  // Names as ptxas records them (this session's GDN kernels), read as a person would.
  EXPECT_EQ(kernel_label("_ZN36_GLOBAL__N__0cac1a89_9_kernel_cu_run10state_scanENS_6ParamsE"), "state_scan");
  EXPECT_EQ(kernel_label("_ZN36_GLOBAL__N__22d4b02e_9_kernel_cu_run15gdn_decode_rowsILi4EEEvNS_4ArgsE"),
            "gdn_decode_rows<4>");
  EXPECT_EQ(kernel_label("rmsnorm_kernel"), "rmsnorm_kernel");  // extern "C": not mangled
  const nlohmann::json two = {
      {"_ZN36_GLOBAL__N__0cac1a89_9_kernel_cu_run10wy_prepareENS_6ParamsE", {{"median_ms", 0.077}}},
      {"_ZN36_GLOBAL__N__0cac1a89_9_kernel_cu_run10state_scanENS_6ParamsE", {{"median_ms", 0.1162}}}};
  EXPECT_EQ(kernel_breakdown(two), "state_scan 0.1162, wy_prepare 0.0770 ms");
  EXPECT_EQ(kernel_breakdown({{"k", {{"median_ms", 1.0}}}}), "");  // one kernel: its time is the latency
}

TEST(Stats, IdleNoteOnlyWhereLaunchGapsAreAFifthOfTheSpan) {
  // mma_radix's no-scoring workloads on an H100: 10.5 us a call, 2.9 us of it in its two kernels.
  EXPECT_EQ(idle_note(0.0076, 0.0105), "0.0076 ms idle between launches (72 % of the span)");
  EXPECT_EQ(idle_note(0.0025, 0.0105), "0.0025 ms idle between launches (24 % of the span)");
  EXPECT_EQ(idle_note(0.0020, 0.0105), "");  // under a fifth: not worth a line
  EXPECT_EQ(idle_note(0.0, 0.0105), "");
  EXPECT_EQ(idle_note(0.001, 0.0), "");  // no latency (a failed workload): nothing to compare with
}

TEST(Stats, GeomeanSpeedupIntervalOverTrials) {
  EXPECT_DOUBLE_EQ(student_t95(2), 4.303);
  EXPECT_DOUBLE_EQ(student_t95(100), 1.96);
  EXPECT_FALSE(geomean_speedup_ci({{1.0}}, {{2.0}}, 2.0).has_value());  // one trial: no interval
  auto same = geomean_speedup_ci({{1, 1, 1}, {2, 2, 2}}, {{2, 2, 2}, {8, 8, 8}}, std::sqrt(8.0));
  ASSERT_TRUE(same.has_value());
  EXPECT_NEAR(same->low, std::sqrt(8.0), 1e-12);
  EXPECT_NEAR(same->high, std::sqrt(8.0), 1e-12);
  // One workload, trials with speedups 2, 2*e^0.1, 2*e^-0.1: sd(log) = 0.1, half = 4.303 * 0.1 / sqrt(3).
  auto spread = geomean_speedup_ci({{1, 1, 1}}, {{2, 2 * std::exp(0.1), 2 * std::exp(-0.1)}}, 2.0);
  ASSERT_TRUE(spread.has_value());
  const double half = 4.303 * 0.1 / std::sqrt(3.0);
  EXPECT_NEAR(spread->low, 2 * std::exp(-half), 1e-9);
  EXPECT_NEAR(spread->high, 2 * std::exp(half), 1e-9);
  EXPECT_FALSE(geomean_speedup_ci({{1, 0}}, {{1, 1}}, 1.0).has_value());  // a missing latency
  auto m = mean_ci95({1, 2, 3});
  ASSERT_TRUE(m.has_value());
  EXPECT_NEAR(m->low, 2 - 4.303 / std::sqrt(3.0), 1e-9);
  EXPECT_FALSE(mean_ci95({5}).has_value());
}

// One ratio per independent evaluation: the geometric mean, and the t-interval of the logs mapped back.
TEST(Stats, RatioIntervalOverEvaluations) {
  auto same = ratio_ci95({1.5, 1.5, 1.5});
  ASSERT_TRUE(same.has_value());
  EXPECT_NEAR(same->geomean, 1.5, 1e-12);
  EXPECT_NEAR(same->ci.low, 1.5, 1e-12);
  EXPECT_NEAR(same->ci.high, 1.5, 1e-12);
  auto spread = ratio_ci95({0.95, 1.0, 1.05});
  ASSERT_TRUE(spread.has_value());
  EXPECT_LT(spread->ci.low, 1.0);
  EXPECT_GT(spread->ci.high, 1.0);
  // exp(mean log) = cube root of the product; half-width t95(2) * sd(log) / sqrt(3).
  EXPECT_NEAR(spread->geomean, std::cbrt(0.95 * 1.0 * 1.05), 1e-12);
  const double l[] = {std::log(0.95), 0.0, std::log(1.05)};
  const double m = (l[0] + l[1] + l[2]) / 3;
  const double sd = std::sqrt(((l[0] - m) * (l[0] - m) + m * m + (l[2] - m) * (l[2] - m)) / 2);
  EXPECT_NEAR(spread->ci.high, std::exp(m + 4.303 * sd / std::sqrt(3.0)), 1e-9);
  EXPECT_FALSE(ratio_ci95({1.2}).has_value());
  EXPECT_FALSE(ratio_ci95({1.2, 0.0}).has_value());
}

TEST(Stats, FreshVersusRepeatConvictsOnlyRememberedOutputs) {
  std::vector<double> repeat, fresh;
  for (int i = 0; i < 132; ++i) repeat.push_back(1.0 + 0.05 * std::sin(1.7 * i));
  for (int i = 0; i < 18; ++i) fresh.push_back(1.0 + 0.05 * std::cos(2.3 * i));
  FreshRepeat honest = fresh_versus_repeat(fresh, repeat);
  EXPECT_TRUE(honest.applies);
  EXPECT_FALSE(honest.memoized);
  EXPECT_NEAR(honest.ratio, 1.0, 0.05);
  EXPECT_NEAR(honest.repeat_faster, 0.5, 0.15);
  fresh[3] = 40.0;  // one fresh call hit by noise
  EXPECT_FALSE(fresh_versus_repeat(fresh, repeat).memoized);
  for (double& f : fresh) f *= 1.2;  // fresh calls systematically 20 % slower: not enough to convict
  EXPECT_FALSE(fresh_versus_repeat(fresh, repeat).memoized);
  std::vector<double> hit = repeat;
  for (double& h : hit) h *= 0.1;  // cache hits: 10x faster
  FreshRepeat memo = fresh_versus_repeat(fresh, hit);
  EXPECT_TRUE(memo.memoized);
  EXPECT_LT(memo.ratio, 0.2);
  EXPECT_DOUBLE_EQ(memo.repeat_faster, 1.0);
  EXPECT_FALSE(fresh_versus_repeat({1.0, 1.0}, hit).applies);
  EXPECT_FALSE(fresh_versus_repeat(fresh, {0.1, 0.1}).applies);
  EXPECT_FALSE(fresh_versus_repeat({1.0, 1.0}, {0.1, 0.1}).memoized);
  // Sub-microsecond calls: a large ratio but a gain below kMemoMinGainMs is not convicted.
  EXPECT_FALSE(fresh_versus_repeat({0.00034, 0.00035, 0.00033, 0.00034}, {0.00021, 0.00021, 0.0002, 0.00022}).memoized);
  EXPECT_TRUE(fresh_versus_repeat({0.034, 0.035, 0.033, 0.034}, {0.0021, 0.0021, 0.002, 0.0022}).memoized);
  // Ties count half: identical samples are not "faster".
  EXPECT_DOUBLE_EQ(fresh_versus_repeat({1, 1, 1}, {1, 1, 1}).repeat_faster, 0.5);
}

// Paired (CUDA): the same inputs twice, so data-dependent work cancels; too few pairs give no verdict.
TEST(Stats, FreshVersusRepeatPairedConvictsOnlyRememberedOutputs) {
  using Pairs = std::vector<std::pair<double, double>>;
  // Honest: each pair's two calls do the same work, whatever each set's work is (data-dependent work
  // varies 2x between sets here).
  Pairs honest_pairs;
  for (int i = 0; i < 9; ++i) {
    const double work = 1.0 + (i % 3);
    honest_pairs.emplace_back(work * (1.0 + 0.05 * std::cos(2.3 * i)), work * (1.0 + 0.05 * std::sin(1.7 * i)));
  }
  FreshRepeat honest = fresh_versus_repeat_paired(honest_pairs);
  EXPECT_TRUE(honest.applies);
  EXPECT_FALSE(honest.memoized);
  EXPECT_NEAR(honest.ratio, 1.0, 0.1);
  EXPECT_NEAR(honest.repeat_faster, 0.5, 0.3);
  Pairs noisy = honest_pairs;
  noisy[3].first = 40.0;  // one fresh call hit by noise
  EXPECT_FALSE(fresh_versus_repeat_paired(noisy).memoized);
  Pairs slower = honest_pairs;
  for (auto& p : slower) p.first = 1.2 * p.second;  // first calls systematically 20 % slower: not enough
  EXPECT_FALSE(fresh_versus_repeat_paired(slower).memoized);
  Pairs hits = honest_pairs;
  for (auto& p : hits) p.second = 0.1 * p.first;  // cache hits on the repeat: 10x faster
  FreshRepeat memo = fresh_versus_repeat_paired(hits);
  EXPECT_TRUE(memo.memoized);
  EXPECT_NEAR(memo.ratio, 0.1, 1e-9);
  EXPECT_DOUBLE_EQ(memo.repeat_faster, 1.0);
  EXPECT_FALSE(fresh_versus_repeat_paired(Pairs{{1.0, 0.1}, {1.0, 0.1}}).applies);  // too few pairs
  // Sub-microsecond calls: a large ratio but a gain below kMemoMinGainMs is not convicted.
  EXPECT_FALSE(
      fresh_versus_repeat_paired(
          Pairs{{0.00034, 0.00021}, {0.00035, 0.00021}, {0.00033, 0.0002}, {0.00034, 0.00022}, {0.00034, 0.00021}})
          .memoized);
  EXPECT_TRUE(fresh_versus_repeat_paired(
                  Pairs{{0.034, 0.0021}, {0.035, 0.0021}, {0.033, 0.002}, {0.034, 0.0022}, {0.034, 0.0021}})
                  .memoized);
  // Fewer pairs than kMemoMinSamples give no verdict, however clear (a one-trial screening has 3).
  EXPECT_FALSE(
      fresh_versus_repeat_paired(Pairs{{0.034, 0.0021}, {0.035, 0.0021}, {0.033, 0.002}, {0.034, 0.0022}}).applies);
  // Ties count half: identical calls are not "faster".
  EXPECT_DOUBLE_EQ(fresh_versus_repeat_paired(Pairs{{1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}).repeat_faster, 0.5);
}

// The ledger reports a gate as passed only after it ran; skipped with the reason given, or the
// not-reached note; a failure with its reason code.
TEST(Gates, LedgerRecordsOnlyWhatRan) {
  GateLedger g;
  g.ran(GateId::kGuardBands, 3);
  g.skip(GateId::kProbes, "no probes");
  g.skip(GateId::kThreads, "policy allows threads");
  g.ran(GateId::kThreads);  // ran after all: the skip note no longer applies
  g.fail(GateId::kTimedRecheck, "recheck_mismatch", "iteration 3 wrong");
  std::vector<Gate> r = g.records("not reached");
  ASSERT_EQ(r.size(), static_cast<size_t>(kGateCount));
  auto find = [&](GateId id) {
    for (const Gate& x : r)
      if (x.name == gate_name(id)) return x;
    return Gate{};
  };
  EXPECT_EQ(find(GateId::kGuardBands).status, GateStatus::kPass);
  EXPECT_NE(find(GateId::kGuardBands).detail.find("3 checks"), std::string::npos);
  EXPECT_EQ(find(GateId::kProbes).status, GateStatus::kSkipped);
  EXPECT_EQ(find(GateId::kProbes).detail, "no probes");
  EXPECT_EQ(find(GateId::kThreads).status, GateStatus::kPass);
  EXPECT_EQ(find(GateId::kTimedRecheck).status, GateStatus::kFail);
  EXPECT_EQ(find(GateId::kTimedRecheck).reason, "recheck_mismatch");
  EXPECT_EQ(find(GateId::kMemoization).status, GateStatus::kSkipped);
  EXPECT_EQ(find(GateId::kMemoization).detail, "not reached");
  for (int i = 0; i < kGateCount; ++i) {
    const auto id = static_cast<GateId>(i);
    EXPECT_EQ(gate_from_name(gate_name(id)), id);
  }
  EXPECT_FALSE(gate_from_name("no-such-gate").has_value());
}

// count_poisoned compares 8 bytes at a time; it must count exactly what an element-by-element compare
// with the poisoned copy counts, for every lane width, at odd lengths and across 4 KiB blocks.
TEST(Arena, CountPoisonedEqualsElementwiseCount) {
  using tensor::DType;
  for (DType d :
       {DType::kFloat32, DType::kInt32, DType::kBFloat16, DType::kFloat16, DType::kFloat8E4M3FN, DType::kInt64}) {
    for (int64_t n : {1, 7, 9, 1000, 4097, 70001}) {
      SCOPED_TRACE(std::string(tensor::dtype_name(d)) + " x " + std::to_string(n));
      Slot s{"y", d, {n}, false};
      s.nbytes = static_cast<uint64_t>(tensor::dtype_storage_bytes(d, n));
      const tensor::Tensor poison = poison_tensor(s, 42);
      tensor::Tensor out = poison;
      const int64_t width = tensor::dtype_bits(d) / 8;
      // Overwrite every element except a pseudo-random ~1/7 of them, with bytes that differ from the poison
      // in one byte only (the hardest case for a lane test: a near-equal neighbour).
      int64_t kept = 0;
      uint64_t state = 99;
      for (int64_t i = 0; i < n; ++i) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        if ((state >> 33) % 7 == 0) {
          ++kept;
          continue;
        }
        out.data()[i * width + static_cast<int64_t>((state >> 40) % static_cast<uint64_t>(width))] ^= std::byte{0x01};
      }
      EXPECT_EQ(count_poisoned(d, 42, out.data(), s.nbytes), kept);
      EXPECT_EQ(count_poisoned(d, 42, poison.data(), s.nbytes), n);
      // Another seed's block: as many matches as an element-by-element compare finds (narrow float
      // types have few NaN payload bits, fp8 none, so two seeds' poisons share values).
      const tensor::Tensor other = poison_tensor(s, 43);
      int64_t equal = 0;
      for (int64_t i = 0; i < n; ++i)
        equal += std::memcmp(other.data() + i * width, poison.data() + i * width, width) == 0;
      EXPECT_EQ(count_poisoned(d, 43, poison.data(), s.nbytes), equal);
      if (width >= 4) {
        EXPECT_EQ(equal, 0);
      }
    }
  }
}

TEST(Arena, GuardsPoisonAndInputCompare) {
  Slot in{"x", DType::kFloat32, {4}, false, 0, 16};
  Slot out{"y", DType::kFloat32, {4}, false, 0, 16};
  ArenaLayout l = plan_layout({in}, {out});
  ASSERT_EQ(l.inputs[0].offset % 64, 0u);
  auto a = SharedArena::create(l.size, "test");
  ASSERT_TRUE(a.ok());
  a->fill_guards(l, 7);
  EXPECT_TRUE(a->damaged_guards(l, 7).empty());
  a->poison(l.outputs[0], 9);
  Tensor y = a->read(l.outputs[0]);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isnan(y.get_as_double(i)));
  const Tensor x_before = a->read(l.inputs[0]);
  EXPECT_TRUE(a->equals(l.inputs[0], x_before));
  a->data()[l.outputs[0].offset + 16] = std::byte{1};  // one byte past the end of y
  auto bad = a->damaged_guards(l, 7);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_NE(bad[0].find("y (after the end)"), std::string::npos);
  a->data()[l.inputs[0].offset] = std::byte{42};
  EXPECT_FALSE(a->equals(l.inputs[0], x_before));
  auto round = ArenaLayout::from_json(l.to_json());
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->outputs[0].offset, l.outputs[0].offset);
}

}  // namespace
}  // namespace kda::eval

// What a screening session keeps: reference outputs and input sets within one byte budget (a set that
// does not fit is simply not kept), kept sets come back as copies with a new id, checks are per library.
TEST(ScreenCache, KeepsWithinItsBudgetAndCountsWhatItReuses) {
  using kda::eval::detail::ScreenCache;
  using kda::tensor::DType;
  ScreenCache cache(/*byte_budget=*/1024);
  auto outputs = std::make_shared<const std::vector<kda::tensor::Tensor>>(
      std::vector<kda::tensor::Tensor>{kda::tensor::Tensor(DType::kFloat32, {128})});  // 512 bytes
  EXPECT_EQ(cache.reference("w1", 7), nullptr);
  cache.computed_reference("w1", 7, outputs);
  EXPECT_EQ(cache.reference("w1", 7), outputs);
  EXPECT_EQ(cache.reference("w2", 7), nullptr);  // another workload, the same seed
  kda::eval::MaterializedInputs in;
  in.tensors.emplace_back(DType::kFloat32, std::vector<int64_t>{128});
  in.seed = 9;
  in.id = 3;
  cache.keep_set("w1", in, ScreenCache::SetKind::kRaw);  // 512 more: the budget is full
  uint64_t next_id = 40;
  auto kept = cache.set("w1", 9, ScreenCache::SetKind::kRaw, &next_id);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->id, 41u);
  EXPECT_EQ(next_id, 41u);
  EXPECT_FALSE(cache.set("w1", 9, ScreenCache::SetKind::kProbe, &next_id).has_value());
  in.seed = 10;
  cache.keep_set("w1", in, ScreenCache::SetKind::kRaw);  // over the budget: not kept
  EXPECT_FALSE(cache.set("w1", 10, ScreenCache::SetKind::kRaw, &next_id).has_value());
  cache.computed_reference("w1", 8, outputs);  // over the budget: counted, not kept
  EXPECT_EQ(cache.reference("w1", 8), nullptr);
  EXPECT_EQ(cache.stats().reference_calls, 2);
  EXPECT_EQ(cache.stats().reference_reused, 1);
  EXPECT_EQ(cache.stats().input_sets_reused, 1);

  EXPECT_FALSE(cache.probe_what("w1", 5).has_value());
  cache.set_probe_what("w1", 5, "");
  ASSERT_TRUE(cache.probe_what("w1", 5).has_value());
  EXPECT_TRUE(cache.probe_what("w1", 5)->empty());

  cache.mark_verified("lib_a.so", "w1", 9, ScreenCache::Check::kCorrectness);
  EXPECT_TRUE(cache.verified("lib_a.so", "w1", 9, ScreenCache::Check::kCorrectness));
  EXPECT_FALSE(cache.verified("lib_a.so", "w1", 9, ScreenCache::Check::kDeterminism));
  EXPECT_FALSE(cache.verified("lib_b.so", "w1", 9, ScreenCache::Check::kCorrectness));
  EXPECT_FALSE(cache.first_look());
  cache.checks = kda::eval::ScreenChecks::kCorrectness;
  EXPECT_TRUE(cache.first_look());
}
