// FlashInfer-Bench schemas: one test per validation rule (a bad document fails naming the file and the JSON
// pointer), round trips, shape resolution and var-axis binding, the solution hash.
#include <gtest/gtest.h>

#include <cmath>

#include "task/definition.h"
#include "task/solution.h"
#include "task/trace.h"
#include "task/workload.h"
#include "util/fs.h"

namespace kda::task {
namespace {

const char* kDefinition = R"({
  "name": "gemm_n64", "op_type": "gemm", "tags": ["t"], "description": "d", "unknown_key": {"x": 1},
  "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 64}, "K": {"type": "const", "value": 32}},
  "constraints": ["M > 0"],
  "inputs": {"B": {"shape": ["N", "K"], "dtype": "bfloat16"}, "A": {"shape": ["M", "K"], "dtype": "bfloat16"},
             "alpha": {"shape": null, "dtype": "float32"}, "steps": {"shape": null, "dtype": "int32"}},
  "outputs": {"C": {"shape": ["M", "N"], "dtype": "float32"}},
  "reference": "import torch\n\ndef run(B, A, alpha, steps):\n    return alpha * A @ B.T\n"
})";

ojson base_definition() { return ojson::parse(kDefinition); }

Definition definition() {
  Diagnostics d;
  auto def = definition_from_json(base_definition(), "def.json", d);
  EXPECT_TRUE(def.has_value()) << (d.empty() ? "" : d.items()[0].to_string());
  return def.value_or(Definition{});
}

// The problems of parsing `j` as a definition.
Diagnostics definition_problems(const ojson& j) {
  Diagnostics d;
  EXPECT_FALSE(definition_from_json(j, "bad.json", d).has_value());
  return d;
}

bool names(const Diagnostics& d, const std::string& file, const std::string& pointer, int line = -1) {
  for (const auto& item : d.items())
    if (item.file == file && item.pointer == pointer && (line < 0 || item.line == line)) return true;
  std::string all;
  for (const auto& item : d.items()) all += "\n  " + item.to_string();
  ADD_FAILURE() << "no problem at " << file << " " << pointer << "; got:" << all;
  return false;
}

TEST(Definition, ParsesInFileOrderAndIgnoresUnknownKeys) {
  Definition def = definition();
  ASSERT_EQ(def.inputs.size(), 4u);
  EXPECT_EQ(def.inputs[0].name, "B");  // file order, not alphabetical
  EXPECT_EQ(def.inputs[1].name, "A");
  EXPECT_TRUE(def.inputs[2].is_scalar());
  EXPECT_EQ(def.inputs[1].dtype, tensor::DType::kBFloat16);
  EXPECT_EQ(def.var_axes(), std::vector<std::string>{"M"});
  EXPECT_EQ(def.axis("N")->value, 64);
  EXPECT_EQ(def.constraints, std::vector<std::string>{"M > 0"});
}

TEST(Definition, RoundTrip) {
  Definition def = definition();
  Diagnostics d;
  auto again = definition_from_json(ojson::parse(def.to_json().dump()), "rt.json", d);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, def);
}

TEST(Definition, RequiresName) {
  ojson j = base_definition();
  j.erase("name");
  EXPECT_TRUE(names(definition_problems(j), "bad.json", "/name"));
  j["name"] = "";
  EXPECT_TRUE(names(definition_problems(j), "bad.json", "/name"));
}

TEST(Definition, ConstAxisNeedsNonNegativeInteger) {
  ojson j = base_definition();
  j["axes"]["N"]["value"] = -1;
  EXPECT_TRUE(names(definition_problems(j), "bad.json", "/axes/N/value"));
  j["axes"]["N"]["value"] = 1.5;
  EXPECT_TRUE(names(definition_problems(j), "bad.json", "/axes/N/value"));
  j["axes"]["N"].erase("value");
  EXPECT_TRUE(names(definition_problems(j), "bad.json", "/axes/N/value"));
}

TEST(Definition, AxisTypeIsConstOrVar) {
  ojson j = base_definition();
  j["axes"]["M"]["type"] = "dynamic";
  EXPECT_TRUE(names(definition_problems(j), "bad.json", "/axes/M/type"));
}

TEST(Definition, ShapesUseDeclaredAxes) {
  ojson j = base_definition();
  j["inputs"]["A"]["shape"] = ojson::array({"M", "Q"});
  EXPECT_TRUE(names(definition_problems(j), "bad.json", "/inputs/A/shape/1"));
  j = base_definition();
  j["outputs"]["C"]["shape"] = "M";
  EXPECT_TRUE(names(definition_problems(j), "bad.json", "/outputs/C/shape"));
}

TEST(Definition, DtypeMustBeKnown) {
  ojson j = base_definition();
  j["inputs"]["A"]["dtype"] = "float128";
  EXPECT_TRUE(names(definition_problems(j), "bad.json", "/inputs/A/dtype"));
}

TEST(Definition, OutputNamesDistinctFromInputs) {
  ojson j = base_definition();
  j["outputs"]["A"] = {{"shape", {"M", "K"}}, {"dtype", "float32"}};
  EXPECT_TRUE(names(definition_problems(j), "bad.json", "/outputs/A"));
}

TEST(Definition, ReferenceDefinesTopLevelRun) {
  ojson j = base_definition();
  j["reference"] = "import torch\nclass X:\n    def run(self):\n        pass\n";
  EXPECT_TRUE(names(definition_problems(j), "bad.json", "/reference"));
  j["reference"] = "  \n\t";
  EXPECT_TRUE(names(definition_problems(j), "bad.json", "/reference"));
  j["reference"] = 3;
  EXPECT_TRUE(names(definition_problems(j), "bad.json", "/reference"));
  EXPECT_TRUE(has_top_level_run("x = 1\r\ndef run(a):\r\n  return a\r\n"));
  EXPECT_FALSE(has_top_level_run("def runner(a): pass"));
}

TEST(Definition, TagsAndConstraintsAreStringLists) {
  ojson j = base_definition();
  j["constraints"] = ojson::array({"M > 0", 7});
  EXPECT_TRUE(names(definition_problems(j), "bad.json", "/constraints/1"));
  j = base_definition();
  j["tags"] = "x";
  EXPECT_TRUE(names(definition_problems(j), "bad.json", "/tags"));
}

TEST(Definition, ListsAllProblemsNotJustTheFirst) {
  ojson j = base_definition();
  j.erase("op_type");
  j["inputs"]["A"]["dtype"] = "nope";
  j["reference"] = "pass";
  EXPECT_GE(definition_problems(j).size(), 3u);
}

TEST(Definition, ResolveShape) {
  Definition def = definition();
  auto s = resolve_shape(def, *def.input("A"), {{"M", 5}});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(*s, (std::vector<int64_t>{5, 32}));
  EXPECT_EQ(*resolve_shape(def, *def.input("alpha"), {}), std::vector<int64_t>{});
  EXPECT_FALSE(resolve_shape(def, *def.input("A"), {}).ok());                     // M unbound
  EXPECT_FALSE(resolve_shape(def, *def.input("A"), {{"M", 5}, {"K", 31}}).ok());  // const disagrees
}

TEST(Definition, BindVarAxesConsistently) {
  Definition def = definition();
  auto ok = bind_var_axes(def, {{"A", {7, 32}}, {"B", {64, 32}}});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->at("M"), 7);
  EXPECT_EQ(ok->at("N"), 64);
  EXPECT_FALSE(bind_var_axes(def, {{"A", {7, 31}}}).ok());  // const K mismatch
  EXPECT_FALSE(bind_var_axes(def, {{"A", {7}}}).ok());      // rank
  Definition two = def;
  two.inputs.push_back({.name = "D", .shape = std::vector<std::string>{"M"}});
  auto bad = bind_var_axes(two, {{"A", {7, 32}}, {"D", {8}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'M'"), std::string::npos);
}

// ---- Workloads --------------------------------------------------------------------------------------------

Diagnostics workload_problems(const std::string& line_json) {
  Definition def = definition();
  Diagnostics d;
  auto lines = trace_lines_from_jsonl("\n" + line_json + "\n", "w.jsonl", d, true);
  for (const auto& [line, t] : lines) check_workload(def, t.workload, "w.jsonl", line, "/workload", d, nullptr);
  return d;
}

std::string workload_line(const std::string& axes, const std::string& inputs) {
  return R"({"definition": "gemm_n64", "workload": {"uuid": "u1", "axes": )" + axes + R"(, "inputs": )" + inputs +
         R"(}, "solution": null, "evaluation": null})";
}

TEST(Workload, ValidLinePasses) {
  EXPECT_TRUE(
      workload_problems(
          workload_line(
              R"({"M": 3})",
              R"({"alpha": {"type": "scalar", "value": 0.5}, "steps": {"type": "scalar", "value": 3}, "A": {"type": "random"}})"))
          .empty());
}

TEST(Workload, AxesDeclaredAndBound) {
  EXPECT_TRUE(names(workload_problems(workload_line(R"({"M": 3, "Z": 1})", "{}")), "w.jsonl", "/workload/axes/Z", 2));
  EXPECT_TRUE(names(workload_problems(workload_line(R"({})", "{}")), "w.jsonl", "/workload/axes", 2));
  EXPECT_TRUE(names(workload_problems(workload_line(R"({"M": 3, "N": 63})", "{}")), "w.jsonl", "/workload/axes/N", 2));
  EXPECT_TRUE(names(workload_problems(workload_line(R"({"M": -3})", "{}")), "w.jsonl", "/workload/axes/M", 2));
  EXPECT_TRUE(names(workload_problems(workload_line(R"({"M": "3"})", "{}")), "w.jsonl", "/workload/axes/M", 2));
}

TEST(Workload, InputsNameOnlyDefinitionInputs) {
  EXPECT_TRUE(names(workload_problems(workload_line(R"({"M": 3})", R"({"X": {"type": "random"}})")), "w.jsonl",
                    "/workload/inputs/X", 2));
}

TEST(Workload, ScalarsByValue) {
  // A "scalar" spec on a tensor input is an error.
  EXPECT_TRUE(names(workload_problems(workload_line(R"({"M": 3})", R"({"A": {"type": "scalar", "value": 1}})")),
                    "w.jsonl", "/workload/inputs/A/type", 2));
  // A scalar input from a blob is an error (scalars are passed by value).
  EXPECT_TRUE(
      names(workload_problems(workload_line(
                R"({"M": 3})", R"({"alpha": {"type": "safetensors", "path": "x.safetensors", "tensor_key": "a"}})")),
            "w.jsonl", "/workload/inputs/alpha/type", 2));
  // The value fits the dtype.
  EXPECT_TRUE(names(workload_problems(workload_line(R"({"M": 3})", R"({"steps": {"type": "scalar", "value": 2.5}})")),
                    "w.jsonl", "/workload/inputs/steps/value", 2));
  EXPECT_TRUE(names(workload_problems(workload_line(R"({"M": 3})", R"({"alpha": {"type": "scalar", "value": "x"}})")),
                    "w.jsonl", "/workload/inputs/alpha/value", 2));
  EXPECT_TRUE(names(workload_problems(workload_line(R"({"M": 3})", R"({"alpha": {"type": "scalar"}})")), "w.jsonl",
                    "/workload/inputs/alpha/value", 2));
}

TEST(Workload, InputTypeIsKnown) {
  EXPECT_TRUE(names(workload_problems(workload_line(R"({"M": 3})", R"({"A": {"type": "zeros"}})")), "w.jsonl",
                    "/workload/inputs/A/type", 2));
}

TEST(Workload, SafetensorsPathIsRelativeWithoutDotDot) {
  EXPECT_TRUE(
      names(workload_problems(workload_line(
                R"({"M": 3})", R"({"A": {"type": "safetensors", "path": "../x.safetensors", "tensor_key": "A"}})")),
            "w.jsonl", "/workload/inputs/A/path", 2));
  EXPECT_TRUE(
      names(workload_problems(workload_line(
                R"({"M": 3})", R"({"A": {"type": "safetensors", "path": "/abs.safetensors", "tensor_key": "A"}})")),
            "w.jsonl", "/workload/inputs/A/path", 2));
  EXPECT_TRUE(names(workload_problems(workload_line(R"({"M": 3})", R"({"A": {"type": "safetensors", "path": "x"}})")),
                    "w.jsonl", "/workload/inputs/A/tensor_key", 2));
}

TEST(Workload, WorkloadLinesHaveNullSolutionAndEvaluation) {
  std::string l = workload_line(R"({"M": 3})", "{}");
  l.replace(l.find("\"solution\": null"), 16, "\"solution\": \"s\"");
  EXPECT_TRUE(names(workload_problems(l), "w.jsonl", "/evaluation", 2));
}

TEST(Workload, BadJsonNamesTheLine) {
  Diagnostics d;
  auto lines = trace_lines_from_jsonl(workload_line(R"({"M": 3})", "{}") + "\n{oops\n", "w.jsonl", d, true);
  EXPECT_EQ(lines.size(), 1u);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d.items()[0].line, 2);
}

TEST(Workload, RoundTrip) {
  Diagnostics d;
  std::string text = workload_line(
      R"({"M": 3})",
      R"({"alpha": {"type": "scalar", "value": 0.5}, "A": {"type": "safetensors", "path": "b/x.safetensors", "tensor_key": "A"}})");
  auto lines = trace_lines_from_jsonl(text, "w.jsonl", d, true);
  ASSERT_EQ(lines.size(), 1u);
  auto again = trace_lines_from_jsonl(traces_to_jsonl({lines[0].trace}), "rt.jsonl", d, true);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(again[0].trace, lines[0].trace);
  EXPECT_EQ(again[0].trace.workload.input("alpha").value, 0.5);
  EXPECT_EQ(again[0].trace.workload.input("B").kind, InputSpec::Kind::kRandom);
}

// ---- Traces -----------------------------------------------------------------------------------------------

ojson trace_json(const std::string& status, bool corr, bool perf) {
  ojson t = ojson::parse(workload_line(R"({"M": 3})", "{}"));
  t["solution"] = "sol";
  ojson e = {{"status", status},
             {"environment", {{"hardware", "H200"}, {"libs", {{"cuda", "13.0"}}}}},
             {"timestamp", "2026-11-30T08:00:00Z"},
             {"log", ""}};
  e["correctness"] =
      corr ? ojson{{"max_relative_error", 0.001}, {"max_absolute_error", "NaN"}, {"extra", {{"matched_ratio", 1.0}}}}
           : ojson(nullptr);
  e["performance"] =
      perf ? ojson{{"latency_ms", 0.5}, {"reference_latency_ms", 1.0}, {"speedup_factor", 2.0}} : ojson(nullptr);
  t["evaluation"] = e;
  return t;
}

Diagnostics trace_problems(const ojson& j) {
  Diagnostics d;
  EXPECT_FALSE(trace_from_json(j, "t.jsonl", 4, d).has_value());
  return d;
}

TEST(Trace, StatusRules) {
  Diagnostics ok;
  EXPECT_TRUE(trace_from_json(trace_json("PASSED", true, true), "t.jsonl", 1, ok).has_value());
  EXPECT_TRUE(trace_from_json(trace_json("INCORRECT_NUMERICAL", true, false), "t.jsonl", 1, ok).has_value());
  EXPECT_TRUE(trace_from_json(trace_json("TIMEOUT", false, false), "t.jsonl", 1, ok).has_value());
  EXPECT_TRUE(ok.empty());
  EXPECT_TRUE(names(trace_problems(trace_json("PASSED", true, false)), "t.jsonl", "/evaluation/performance", 4));
  EXPECT_TRUE(names(trace_problems(trace_json("PASSED", false, true)), "t.jsonl", "/evaluation/correctness", 4));
  EXPECT_TRUE(
      names(trace_problems(trace_json("INCORRECT_NUMERICAL", false, false)), "t.jsonl", "/evaluation/correctness", 4));
  EXPECT_TRUE(
      names(trace_problems(trace_json("INCORRECT_NUMERICAL", true, true)), "t.jsonl", "/evaluation/performance", 4));
  EXPECT_TRUE(names(trace_problems(trace_json("RUNTIME_ERROR", true, false)), "t.jsonl", "/evaluation/correctness", 4));
  EXPECT_TRUE(names(trace_problems(trace_json("COMPILE_ERROR", false, true)), "t.jsonl", "/evaluation/performance", 4));
}

TEST(Trace, FieldTypes) {
  EXPECT_TRUE(names(trace_problems(trace_json("DONE", false, false)), "t.jsonl", "/evaluation/status", 4));
  ojson t = trace_json("PASSED", true, true);
  t["evaluation"]["performance"]["latency_ms"] = "fast";
  EXPECT_TRUE(names(trace_problems(t), "t.jsonl", "/evaluation/performance/latency_ms", 4));
  t = trace_json("PASSED", true, true);
  t["evaluation"].erase("environment");
  EXPECT_TRUE(names(trace_problems(t), "t.jsonl", "/evaluation/environment", 4));
  t = trace_json("PASSED", true, true);
  t["solution"] = nullptr;
  EXPECT_TRUE(names(trace_problems(t), "t.jsonl", "/solution", 4));
}

TEST(Trace, RoundTripWithNonFiniteErrors) {
  Diagnostics d;
  ojson j = trace_json("PASSED", true, true);
  j["evaluation"]["kda"] = {{"baseline_latency_ms", 0.7}};
  auto t = trace_from_json(j, "t.jsonl", 1, d);
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(std::isnan(t->evaluation->correctness->max_absolute_error));
  t->evaluation->correctness->max_absolute_error = 0.25;  // NaN != NaN; compare the rest exactly
  auto again = trace_from_json(ojson::parse(t->to_json().dump()), "rt.jsonl", 1, d);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *t);
  EXPECT_EQ(again->evaluation->kda["baseline_latency_ms"], 0.7);
  Evaluation inf = *t->evaluation;
  inf.correctness->max_relative_error = INFINITY;
  EXPECT_EQ(inf.to_json()["correctness"]["max_relative_error"], "Infinity");
}

// ---- Solutions --------------------------------------------------------------------------------------------

ojson solution_json() {
  return ojson::parse(R"({"name": "s1", "definition": "gemm_n64", "author": "me", "unknown": 1,
    "spec": {"language": "cuda", "target_hardware": ["H200"], "entry_point": "main.cu::run",
             "dependencies": ["cublas"], "destination_passing_style": true, "binding": null},
    "sources": [{"path": "main.cu", "content": "A"}, {"path": "inc/util.cuh", "content": "B"}]})");
}

Diagnostics solution_problems(const ojson& j) {
  Diagnostics d;
  EXPECT_FALSE(solution_from_json(j, "s.json", d).has_value());
  return d;
}

TEST(Solution, ParsesAndRoundTrips) {
  Diagnostics d;
  auto s = solution_from_json(solution_json(), "s.json", d);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->spec.entry_file(), "main.cu");
  EXPECT_EQ(s->spec.entry_function(), "run");
  EXPECT_TRUE(s->spec.destination_passing_style);
  EXPECT_FALSE(s->spec.binding.has_value());
  auto again = solution_from_json(ojson::parse(s->to_json().dump()), "rt.json", d);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *s);
}

TEST(Solution, EntryPointHasExactlyOneSeparatorAndNamesASource) {
  ojson j = solution_json();
  j["spec"]["entry_point"] = "main.cu:run";
  EXPECT_TRUE(names(solution_problems(j), "s.json", "/spec/entry_point"));
  j["spec"]["entry_point"] = "a::b::c";
  EXPECT_TRUE(names(solution_problems(j), "s.json", "/spec/entry_point"));
  j["spec"]["entry_point"] = "::run";
  EXPECT_TRUE(names(solution_problems(j), "s.json", "/spec/entry_point"));
  j["spec"]["entry_point"] = "other.cu::run";
  EXPECT_TRUE(names(solution_problems(j), "s.json", "/spec/entry_point"));
}

TEST(Solution, SourcePathsRelativeUniqueWithoutDotDot) {
  ojson j = solution_json();
  j["sources"][1]["path"] = "../etc/passwd";
  EXPECT_TRUE(names(solution_problems(j), "s.json", "/sources/1/path"));
  j["sources"][1]["path"] = "/abs.cu";
  EXPECT_TRUE(names(solution_problems(j), "s.json", "/sources/1/path"));
  j["sources"][1]["path"] = "main.cu";
  EXPECT_TRUE(names(solution_problems(j), "s.json", "/sources/1/path"));
  j["sources"] = ojson::array();
  EXPECT_TRUE(names(solution_problems(j), "s.json", "/sources"));
}

TEST(Solution, SpecFields) {
  ojson j = solution_json();
  j["spec"]["language"] = "fortran";
  EXPECT_TRUE(names(solution_problems(j), "s.json", "/spec/language"));
  j = solution_json();
  j["spec"]["target_hardware"] = ojson::array();
  EXPECT_TRUE(names(solution_problems(j), "s.json", "/spec/target_hardware"));
  j = solution_json();
  j["spec"]["binding"] = "pybind";
  EXPECT_TRUE(names(solution_problems(j), "s.json", "/spec/binding"));
  j = solution_json();
  j["spec"]["destination_passing_style"] = "yes";
  EXPECT_TRUE(names(solution_problems(j), "s.json", "/spec/destination_passing_style"));
  j = solution_json();
  j["sources"][0].erase("content");  // inline JSON (no directory): content required
  EXPECT_TRUE(names(solution_problems(j), "s.json", "/sources/0/content"));
}

TEST(Solution, DirectoryFormReadsSourcesBesideIt) {
  auto dir = fs::make_temp_dir(std::filesystem::temp_directory_path(), "kda-sol");
  ASSERT_TRUE(dir.ok());
  ojson j = solution_json();
  j["sources"][0].erase("content");
  ASSERT_TRUE(fs::write_file_atomic(*dir / "solution.json", j.dump()).ok());
  ASSERT_TRUE(fs::write_file_atomic(*dir / "main.cu", "kernel text").ok());
  auto s = load_solution(*dir);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->source("main.cu")->content, "kernel text");
  EXPECT_EQ(s->source("inc/util.cuh")->content, "B");
  std::filesystem::remove(*dir / "main.cu");
  Diagnostics d;
  EXPECT_FALSE(load_solution(*dir, d).has_value());
  EXPECT_TRUE(names(d, (*dir / "solution.json").string(), "/sources/0/content"));
  std::filesystem::remove_all(*dir);
}

TEST(Solution, HashCoversContentNotName) {
  Diagnostics d;
  Solution s = *solution_from_json(solution_json(), "s.json", d);
  std::string h = solution_hash(s);
  EXPECT_EQ(h.size(), 64u);
  Solution renamed = s;
  renamed.name = "other";
  renamed.author = "someone";
  EXPECT_EQ(solution_hash(renamed), h);
  Solution reordered = s;
  std::swap(reordered.sources[0], reordered.sources[1]);
  EXPECT_EQ(solution_hash(reordered), h);
  auto changed = [&](auto edit) {
    Solution c = s;
    edit(c);
    return solution_hash(c) != h;
  };
  EXPECT_TRUE(changed([](Solution& c) { c.sources[0].content += " "; }));
  EXPECT_TRUE(changed([](Solution& c) { c.sources[1].path = "inc/util2.cuh"; }));
  EXPECT_TRUE(changed([](Solution& c) { c.definition = "x"; }));
  EXPECT_TRUE(changed([](Solution& c) { c.spec.language = "cpp"; }));
  EXPECT_TRUE(changed([](Solution& c) { c.spec.entry_point = "main.cu::run2"; }));
  EXPECT_TRUE(changed([](Solution& c) { c.spec.binding = "torch"; }));
  EXPECT_TRUE(changed([](Solution& c) { c.spec.dependencies.clear(); }));
  EXPECT_TRUE(changed([](Solution& c) { c.spec.destination_passing_style = false; }));
}

}  // namespace
}  // namespace kda::task
