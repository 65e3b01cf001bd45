// Task packs, task.toml settings, roofline formulas and manifests.
#include <gtest/gtest.h>

#include "task/expression.h"
#include "task/manifest.h"
#include "task/settings.h"
#include "task/task_pack.h"
#include "tensor/safetensors.h"
#include "util/fs.h"

namespace kda::task {
namespace {

namespace stdfs = std::filesystem;

const stdfs::path kFixtures = stdfs::path(KDA_SOURCE_DIR) / "tests/fixtures/fib";

bool names(const Diagnostics& d, const std::string& file_suffix, const std::string& pointer, int line = -1) {
  for (const auto& item : d.items())
    if (item.file.ends_with(file_suffix) && item.pointer == pointer && (line < 0 || item.line == line)) return true;
  std::string all;
  for (const auto& item : d.items()) all += "\n  " + item.to_string();
  ADD_FAILURE() << "no problem at " << file_suffix << " " << pointer << "; got:" << all;
  return false;
}

// A private copy of the fixture pack.
class PackCopy {
 public:
  PackCopy() {
    dir_ = *fs::make_temp_dir(stdfs::temp_directory_path(), "kda-pack") / "pack";
    stdfs::copy(kFixtures / "pack_vector_add", dir_, stdfs::copy_options::recursive);
  }
  ~PackCopy() { stdfs::remove_all(dir_.parent_path()); }
  const stdfs::path& dir() const { return dir_; }
  void write(const std::string& rel, const std::string& text) {
    ASSERT_TRUE(fs::write_file_atomic(dir_ / rel, text).ok());
  }
  void append(const std::string& rel, const std::string& text) { write(rel, *fs::read_file(dir_ / rel) + text); }
  void replace(const std::string& rel, const std::string& from, const std::string& to) {
    std::string t = *fs::read_file(dir_ / rel);
    size_t pos = t.find(from);
    ASSERT_NE(pos, std::string::npos) << from;
    write(rel, t.replace(pos, from.size(), to));
  }
  Diagnostics problems() const {
    Diagnostics d;
    EXPECT_FALSE(load_task_pack(dir_, d).has_value());
    return d;
  }

 private:
  stdfs::path dir_;
};

TEST(TaskPack, LoadsFixturePack) {
  auto pack = load_task_pack(kFixtures / "pack_vector_add");
  ASSERT_TRUE(pack.ok()) << pack.status().message();
  EXPECT_EQ(pack->definition.name, "vector_add_f32");
  EXPECT_EQ(pack->workloads.size(), 3u);
  EXPECT_EQ(pack->holdout.size(), 1u);
  EXPECT_EQ(pack->reference.name, "vector_add_reference");
  EXPECT_NE(pack->reference.source("kernel.cc")->content.find("extern \"C\" int run"), std::string::npos);
  EXPECT_EQ(pack->baseline_name, "naive");
  ASSERT_NE(pack->baseline(), nullptr);
  EXPECT_EQ(pack->backend, Backend::kHost);  // implied by the cpp reference
  EXPECT_EQ(pack->dev_uuids.size(), 3u);
  EXPECT_FALSE(pack->cpu_reference.has_value());
  EXPECT_EQ(pack->settings.atol, 1e-5);
  EXPECT_EQ(pack->settings.warmup, 2);
  EXPECT_EQ(pack->settings.rtol, 1e-5);
  EXPECT_EQ(pack->settings.persistent_state, PersistentState::kNone);
  EXPECT_EQ(pack->settings.call_timeout_s, 30.0);  // default
  EXPECT_EQ(*pack->settings.roofline_bytes->evaluate({{"n", 16}}), 192.0);
  ASSERT_NE(pack->workload("33333333-0000-4000-8000-000000000004"), nullptr);  // holdout
  EXPECT_FALSE(load_task_pack(kFixtures / "nope").ok());
  EXPECT_EQ(load_task_pack(kFixtures / "nope").status().kind(), ErrorKind::kNotFound);
}

// (A start naming one workload: ToolRun.AStartOfAUuidNamesItsWorkload; these uuids differ only in their last character.)
TEST(TaskPack, VisibleWorkloadByUuidOrTheStartOfOne) {
  auto pack = load_task_pack(kFixtures / "pack_vector_add");
  ASSERT_TRUE(pack.ok()) << pack.status().message();
  auto whole = pack->visible_workload("33333333-0000-4000-8000-000000000002");
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ((*whole)->uuid, "33333333-0000-4000-8000-000000000002");
  auto several = pack->visible_workload("33333333");
  ASSERT_FALSE(several.ok());
  EXPECT_NE(several.status().message().find("'33333333' is the start of 3 workloads"), std::string::npos);
  EXPECT_NE(several.status().message().find("give more of it"), std::string::npos);
  // The holdout is never found, whole or by a start.
  auto holdout = pack->visible_workload("33333333-0000-4000-8000-000000000004");
  ASSERT_FALSE(holdout.ok());
  EXPECT_NE(holdout.status().message().find("no workload '33333333-0000-4000-8000-000000000004'"), std::string::npos);
  EXPECT_FALSE(pack->visible_workload("").ok());
}

TEST(TaskPack, CpuReferenceAndGenerator) {
  PackCopy p;
  stdfs::copy(p.dir() / "reference", p.dir() / "reference_cpu", stdfs::copy_options::recursive);
  p.append("task.toml", "[reference]\ncpu_solution = \"reference_cpu\"\n[inputs]\ngenerator = \"vector_gen\"\n");
  Diagnostics d;
  auto pack = load_task_pack(p.dir(), d);
  ASSERT_TRUE(pack.has_value()) << (d.empty() ? "" : d.items()[0].to_string());
  ASSERT_TRUE(pack->cpu_reference.has_value());
  EXPECT_EQ(pack->settings.cpu_reference_dir, "reference_cpu");
  EXPECT_EQ(pack->settings.inputs_generator, "vector_gen");
}

TEST(TaskPack, DevWorkloadsMustExist) {
  PackCopy p;
  p.replace("task.toml", "[timing]", "dev_workloads = [\"no-such-uuid\"]\n\n[timing]");
  EXPECT_TRUE(names(p.problems(), "task.toml", "/evaluation/dev_workloads"));
}

TEST(TaskPack, ProbesMustNameFloatTensorInputs) {
  PackCopy p;
  p.append("task.toml", "\n[probes]\nnot_an_input = [\"offset\"]\n");
  EXPECT_TRUE(names(p.problems(), "task.toml", "/probes/not_an_input"));
  PackCopy ok;
  ok.append("task.toml", "\n[probes]\na = [\"offset\", \"outliers\"]\n");
  auto pack = load_task_pack(ok.dir());
  ASSERT_TRUE(pack.ok()) << pack.status().message();
  ASSERT_EQ(pack->settings.probes.size(), 1u);
  EXPECT_EQ(pack->settings.probes[0].first, "a");
  EXPECT_EQ(pack->settings.probes[0].second, (std::vector<Probe>{Probe::kOffset, Probe::kOutliers}));
  EXPECT_EQ(pack->settings.to_json()["probes"]["a"], (nlohmann::json{"offset", "outliers"}));
}

TEST(TaskPack, CompareOutputsMustBeOutputs) {
  PackCopy p;
  p.replace("task.toml", "compare_outputs = [\"out\"]", "compare_outputs = [\"a\"]");
  EXPECT_TRUE(names(p.problems(), "task.toml", "/evaluation/compare_outputs"));
}

TEST(TaskPack, RooflineUsesAxisNamesAndEvaluates) {
  PackCopy p;
  p.replace("task.toml", "\"2 * n\"", "\"2 * m\"");
  EXPECT_TRUE(names(p.problems(), "task.toml", "/roofline/flops"));
  PackCopy q;
  q.replace("task.toml", "\"2 * n\"", "\"2 / (n - 16)\"");  // the n = 16 workload divides by zero
  EXPECT_TRUE(names(q.problems(), "task.toml", "/roofline/flops"));
}

TEST(TaskPack, WorkloadsAreForTheDefinitionAndUnique) {
  PackCopy p;
  p.replace("workloads.jsonl", "{\"definition\": \"vector_add_f32\"", "{\"definition\": \"other\"");
  EXPECT_TRUE(names(p.problems(), "workloads.jsonl", "/definition", 1));
  PackCopy q;
  q.replace("holdout.jsonl", "000000000004", "000000000001");
  EXPECT_TRUE(names(q.problems(), "holdout.jsonl", "/workload/uuid", 1));
  PackCopy r;
  r.replace("workloads.jsonl", "{\"n\": 4096}", "{\"m\": 4096}");
  Diagnostics d = r.problems();
  EXPECT_TRUE(names(d, "workloads.jsonl", "/workload/axes/m", 3));
  EXPECT_TRUE(names(d, "workloads.jsonl", "/workload/axes", 3));
}

TEST(TaskPack, SolutionsArePresentAndForTheDefinition) {
  PackCopy p;
  stdfs::remove_all(p.dir() / "reference");
  EXPECT_TRUE(names(p.problems(), "reference", ""));
  PackCopy q;
  q.replace("baselines/naive/solution.json", "\"definition\": \"vector_add_f32\"", "\"definition\": \"x\"");
  EXPECT_TRUE(names(q.problems(), "baselines/naive/solution.json", "/definition"));
  PackCopy r;
  r.append("task.toml", "[baseline]\nname = \"fast\"\n");
  EXPECT_TRUE(names(r.problems(), "task.toml", "/baseline/name"));
  PackCopy s;
  s.append("task.toml", "[reference]\nsolution = \"../reference\"\n");
  EXPECT_TRUE(names(s.problems(), "task.toml", ""));
}

TEST(TaskPack, BackendImpliedOnlyFromCppOrCuda) {
  PackCopy p;
  p.replace("reference/solution.json", "\"cpp\"", "\"python\"");
  EXPECT_TRUE(names(p.problems(), "task.toml", "/evaluation/backend"));
  PackCopy q;
  q.replace("reference/solution.json", "\"cpp\"", "\"python\"");
  q.replace("task.toml", "[evaluation]", "[evaluation]\nbackend = \"cuda\"");
  Diagnostics d;
  auto pack = load_task_pack(q.dir(), d);
  ASSERT_TRUE(pack.has_value());
  EXPECT_EQ(pack->backend, Backend::kCuda);
}

TEST(TaskPack, SafetensorsBlobsMatchShapeDtypeAndKey) {
  tensor::Tensor five(tensor::DType::kFloat32, {5});
  tensor::Tensor half(tensor::DType::kFloat16, {4});
  {
    PackCopy p;
    ASSERT_TRUE(tensor::write_safetensors(p.dir() / "blob/a4.safetensors", {{"a", &five}}).ok());
    EXPECT_TRUE(names(p.problems(), "workloads.jsonl", "/workload/inputs/a/tensor_key", 2));
  }
  {
    PackCopy p;
    ASSERT_TRUE(tensor::write_safetensors(p.dir() / "blob/a4.safetensors", {{"a", &half}}).ok());
    EXPECT_TRUE(names(p.problems(), "workloads.jsonl", "/workload/inputs/a/tensor_key", 2));
  }
  {
    PackCopy p;
    ASSERT_TRUE(tensor::write_safetensors(p.dir() / "blob/a4.safetensors", {{"b", &five}}).ok());
    EXPECT_TRUE(names(p.problems(), "workloads.jsonl", "/workload/inputs/a/tensor_key", 2));
  }
  {
    PackCopy p;
    stdfs::remove(p.dir() / "blob/a4.safetensors");
    EXPECT_TRUE(names(p.problems(), "workloads.jsonl", "/workload/inputs/a/path", 2));
  }
  {
    PackCopy p;
    p.write("blob/a4.safetensors", "not a safetensors file");
    EXPECT_TRUE(names(p.problems(), "workloads.jsonl", "/workload/inputs/a/path", 2));
  }
}

TEST(TaskPack, DefaultDevWorkloadsAreEvenlySpaced) {
  std::vector<Workload> w(20);
  for (int i = 0; i < 20; ++i) w[i].uuid = std::to_string(i);
  auto dev = default_dev_uuids(w);
  EXPECT_EQ(dev, (std::vector<std::string>{"0", "2", "5", "8", "10", "13", "16", "19"}));
  w.resize(5);
  EXPECT_EQ(default_dev_uuids(w).size(), 5u);
}

TEST(TaskPack, FindsPacksRecursively) {
  auto packs = find_task_packs(kFixtures);
  ASSERT_EQ(packs.size(), 1u);
  EXPECT_EQ(packs[0].filename(), "pack_vector_add");
}

// Every built-in pack under tasks/ loads cleanly (a pack someone broke shows up here with its problems).
TEST(TaskPack, BuiltInPacksLoad) {
  stdfs::path tasks = stdfs::path(KDA_SOURCE_DIR) / "tasks";
  if (!stdfs::is_directory(tasks)) GTEST_SKIP() << "no tasks/ directory";
  for (const auto& dir : find_task_packs(tasks)) {
    Diagnostics d;
    auto pack = load_task_pack(dir, d);
    std::string all;
    for (const auto& item : d.items()) all += "\n  " + item.to_string();
    EXPECT_TRUE(pack.has_value()) << dir << all;
  }
}

// ---- task.toml --------------------------------------------------------------------------------------------

Diagnostics toml_problems(const std::string& text) {
  Diagnostics d;
  EXPECT_FALSE(settings_from_toml(text, "task.toml", d).has_value()) << text;
  return d;
}

TEST(Settings, DefaultsWhenEmpty) {
  Diagnostics d;
  auto s = settings_from_toml("", "task.toml", d);
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(s->backend.has_value());
  EXPECT_EQ(s->checker, Checker::kDefault);
  EXPECT_EQ(s->atol, 1e-2);
  EXPECT_EQ(s->matched_ratio, 1.0);
  EXPECT_FALSE(s->max_tolerance_used.has_value());  // no error budget unless the task sets one
  EXPECT_EQ(s->iterations, 50);
  EXPECT_EQ(s->trials, 3);
  EXPECT_EQ(s->workload_timeout_s, 300.0);
  EXPECT_EQ(s->persistent_state, PersistentState::kScratch);
  EXPECT_EQ(s->determinism, Determinism::kBitwise);
  EXPECT_EQ(s->reference_dir, "reference");
  EXPECT_FALSE(s->cpu_reference_dir.has_value());
  EXPECT_TRUE(s->inputs_generator.empty());
}

TEST(Settings, ParsesEveryKey) {
  Diagnostics d;
  auto s = settings_from_toml(R"toml(
[evaluation]
backend = "cuda"
checker = "topk_indices"
atol = 1
rtol = 0.3
matched_ratio = 0.9
compare_outputs = ["output"]
dev_workloads = ["u1"]
[timing]
warmup = 1
iterations = 5
trials = 2
call_timeout_s = 60
workload_timeout_s = 600.5
[policy]
libraries = ["cublas"]
cuda_graphs = true
streams = true
threads = true
persistent_state = "none"
determinism = "tolerance"
[roofline]
bytes = "ceil_div(n, 64) * 8448 + max(n, 1)"
flops = "2 * n"
[baseline]
name = "fast"
[reference]
solution = "ref"
cpu_solution = "ref_cpu"
[inputs]
generator = "dsa_topk_indexer"
stress = ["ties"]
[contract]
graph = true
)toml",
                              "task.toml", d);
  ASSERT_TRUE(s.has_value()) << (d.empty() ? "" : d.items()[0].to_string());
  EXPECT_EQ(s->backend, Backend::kCuda);
  EXPECT_EQ(s->checker, Checker::kTopkIndices);
  EXPECT_EQ(s->atol, 1.0);
  EXPECT_EQ(s->matched_ratio, 0.9);
  EXPECT_EQ(s->dev_workloads, std::vector<std::string>{"u1"});
  EXPECT_EQ(s->warmup, 1);
  EXPECT_EQ(s->workload_timeout_s, 600.5);
  EXPECT_EQ(s->libraries, std::vector<std::string>{"cublas"});
  EXPECT_TRUE(s->cuda_graphs && s->streams && s->threads);
  EXPECT_EQ(s->determinism, Determinism::kTolerance);
  EXPECT_EQ(*s->roofline_bytes->evaluate({{"n", 65}}), 2 * 8448 + 65);
  EXPECT_EQ(s->baseline_name, "fast");
  EXPECT_EQ(s->reference_dir, "ref");
  EXPECT_EQ(s->cpu_reference_dir, "ref_cpu");
  EXPECT_EQ(s->inputs_generator, "dsa_topk_indexer");
  EXPECT_EQ(s->stress, std::vector<std::string>{"ties"});  // names checked against the generator by the evaluator
  EXPECT_EQ(s->to_json()["inputs"]["stress"], nlohmann::json::array({"ties"}));
  EXPECT_TRUE(s->graph_contract);
  EXPECT_EQ(s->to_json()["contract"]["graph"], true);
  EXPECT_EQ(s->to_json()["evaluation"]["checker"], "topk_indices");
}

TEST(Settings, TypesRangesAndKeysNamed) {
  EXPECT_TRUE(names(toml_problems("[evaluation]\natol = \"x\"\n"), "task.toml", "/evaluation/atol", 2));
  EXPECT_TRUE(names(toml_problems("[evaluation]\natol = -1.0\n"), "task.toml", "/evaluation/atol", 2));
  EXPECT_TRUE(names(toml_problems("[evaluation]\nmatched_ratio = 0\n"), "task.toml", "/evaluation/matched_ratio"));
  EXPECT_TRUE(names(toml_problems("[evaluation]\nmatched_ratio = 1.5\n"), "task.toml", "/evaluation/matched_ratio"));
  EXPECT_TRUE(
      names(toml_problems("[evaluation]\nmax_tolerance_used = 0\n"), "task.toml", "/evaluation/max_tolerance_used"));
  {
    Diagnostics d;
    auto b = settings_from_toml("[evaluation]\nmax_tolerance_used = 0.25\n", "task.toml", d);
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->max_tolerance_used, 0.25);
    EXPECT_EQ(b->to_json()["evaluation"]["max_tolerance_used"], 0.25);
  }
  EXPECT_TRUE(names(toml_problems("[evaluation]\nbackend = \"tpu\"\n"), "task.toml", "/evaluation/backend"));
  EXPECT_TRUE(names(toml_problems("[evaluation]\nchecker = \"exact\"\n"), "task.toml", "/evaluation/checker"));
  EXPECT_TRUE(
      names(toml_problems("[evaluation]\ncompare_outputs = [1]\n"), "task.toml", "/evaluation/compare_outputs"));
  EXPECT_TRUE(names(toml_problems("[timing]\ntrials = 0\n"), "task.toml", "/timing/trials"));
  EXPECT_TRUE(names(toml_problems("[timing]\nwarmup = 1.5\n"), "task.toml", "/timing/warmup"));
  EXPECT_TRUE(names(toml_problems("[timing]\ncall_timeout_s = 0\n"), "task.toml", "/timing/call_timeout_s"));
  EXPECT_TRUE(names(toml_problems("[policy]\ncuda_graphs = \"no\"\n"), "task.toml", "/policy/cuda_graphs"));
  EXPECT_TRUE(names(toml_problems("[policy]\npersistent_state = \"all\"\n"), "task.toml", "/policy/persistent_state"));
  EXPECT_TRUE(names(toml_problems("[policy]\ndeterminism = \"maybe\"\n"), "task.toml", "/policy/determinism"));
  EXPECT_TRUE(names(toml_problems("[probes]\nx = [\"drift\"]\n"), "task.toml", "/probes/x"));
  EXPECT_TRUE(names(toml_problems("[probes]\nx = \"offset\"\n"), "task.toml", "/probes/x"));
  EXPECT_TRUE(names(toml_problems("[inputs]\nstress = [\"decay_near_one\"]\n"), "task.toml", "/inputs/stress"));
  EXPECT_TRUE(names(toml_problems("[contract]\ngraph = \"yes\"\n"), "task.toml", "/contract/graph"));
  EXPECT_TRUE(names(toml_problems("[contract]\ngraphs = true\n"), "task.toml", "/contract/graphs"));
  EXPECT_TRUE(names(toml_problems("[inputs]\ngenerator = \"gdn_decode\"\nstress = \"decay_near_one\"\n"), "task.toml",
                    "/inputs/stress"));
  EXPECT_TRUE(names(toml_problems("[roofline]\nbytes = \"n * pow(2)\"\n"), "task.toml", "/roofline/bytes"));
  EXPECT_TRUE(names(toml_problems("[baseline]\nname = 3\n"), "task.toml", "/baseline/name"));
  EXPECT_TRUE(names(toml_problems("[reference]\ncpu_solution = \"\"\n"), "task.toml", "/reference/cpu_solution"));
  EXPECT_TRUE(names(toml_problems("[inputs]\ngenerator = false\n"), "task.toml", "/inputs/generator"));
  EXPECT_TRUE(names(toml_problems("[timing]\nwarmpu = 3\n"), "task.toml", "/timing/warmpu", 2));
  EXPECT_TRUE(names(toml_problems("[evals]\natol = 1\n"), "task.toml", "/evals"));
  EXPECT_TRUE(names(toml_problems("evaluation = 3\n"), "task.toml", "/evaluation"));
  EXPECT_TRUE(names(toml_problems("[evaluation\n"), "task.toml", "", 1));
  // All problems, not the first only.
  EXPECT_EQ(toml_problems("[timing]\ntrials = 0\nwarmup = -1\n[policy]\nstreams = 1\n").size(), 3u);
}

// ---- roofline formulas ------------------------------------------------------------------------------------

double eval(const std::string& text, std::map<std::string, int64_t> vars = {}) {
  auto e = Expression::parse(text);
  EXPECT_TRUE(e.ok()) << text << ": " << e.status().message();
  if (!e.ok()) return -12345;
  auto v = e->evaluate(vars);
  EXPECT_TRUE(v.ok()) << text << ": " << v.status().message();
  return v.ok() ? *v : -12345;
}

std::string parse_error(const std::string& text) {
  auto e = Expression::parse(text);
  EXPECT_FALSE(e.ok()) << text;
  return e.ok() ? "" : e.status().message();
}

TEST(Expression, Arithmetic) {
  EXPECT_EQ(eval("1 + 2 * 3"), 7);
  EXPECT_EQ(eval("(1 + 2) * 3"), 9);
  EXPECT_EQ(eval("10 - 4 - 3"), 3);
  EXPECT_EQ(eval("12 / 4 / 3"), 1);
  EXPECT_EQ(eval("-3 + -(-2)"), -1);
  EXPECT_EQ(eval("1.5e3"), 1500);
  EXPECT_EQ(eval("min(4, 2, 9) + max(1, 7)"), 9);
  EXPECT_EQ(eval("ceil_div(n, 64)", {{"n", 65}}), 2);
  EXPECT_EQ(eval("ceil_div(n, 64)", {{"n", 64}}), 1);
  EXPECT_EQ(eval("batch_size * 1054752", {{"batch_size", 64}}), 64.0 * 1054752);
  auto e = Expression::parse("a * b + ceil_div(c, 2)");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->identifiers(), (std::set<std::string>{"a", "b", "c"}));
}

TEST(Expression, ErrorsNameTheToken) {
  EXPECT_NE(parse_error("n ^ 2").find("'^' at column 3"), std::string::npos);
  EXPECT_NE(parse_error("pow(n, 2)").find("'pow'"), std::string::npos);
  EXPECT_NE(parse_error("(n + 1").find("end of expression"), std::string::npos);
  EXPECT_NE(parse_error("n + ").find("column"), std::string::npos);
  EXPECT_NE(parse_error("n 2").find("'2'"), std::string::npos);
  EXPECT_NE(parse_error("ceil_div(1)").find("2 arguments"), std::string::npos);
  EXPECT_NE(parse_error("1.2.3").find("'1.2.3'"), std::string::npos);
  EXPECT_FALSE(parse_error("").empty());
  EXPECT_FALSE(parse_error(std::string(200, '(') + "1" + std::string(200, ')')).empty());
  EXPECT_FALSE(parse_error(std::string(100, '-') + "1").empty());
  std::string long_sum = "1";
  for (int i = 0; i < 5000; ++i) long_sum += "+1";
  EXPECT_FALSE(parse_error(long_sum).empty());
  auto e = Expression::parse("n / (m - 2)");
  ASSERT_TRUE(e.ok());
  EXPECT_NE(e->evaluate({{"n", 1}, {"m", 2}}).status().message().find("division by zero"), std::string::npos);
  EXPECT_NE(e->evaluate({{"n", 1}}).status().message().find("'m'"), std::string::npos);
}

// ---- manifests --------------------------------------------------------------------------------------------

TEST(Manifest, DetectsChangedAddedRemovedFiles) {
  PackCopy p;
  auto a = pack_manifest(p.dir());
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(a->files.contains("reference/kernel.cc"));
  EXPECT_TRUE(a->files.contains("blob/a4.safetensors"));
  auto same = pack_manifest(p.dir());
  EXPECT_EQ(*same, *a);
  EXPECT_EQ(same->digest(), a->digest());
  p.append("reference/kernel.cc", "// edited\n");
  p.write("notes.txt", "new");
  stdfs::remove(p.dir() / "holdout.jsonl");
  auto b = pack_manifest(p.dir());
  ASSERT_TRUE(b.ok());
  ManifestDiff d = manifest_diff(*a, *b);
  EXPECT_EQ(d.changed, std::vector<std::string>{"reference/kernel.cc"});
  EXPECT_EQ(d.added, std::vector<std::string>{"notes.txt"});
  EXPECT_EQ(d.removed, std::vector<std::string>{"holdout.jsonl"});
  EXPECT_NE(a->digest(), b->digest());
  EXPECT_TRUE(manifest_diff(*b, *b).empty());
  EXPECT_FALSE(pack_manifest(p.dir() / "missing").ok());
}

// The judged part leaves out holdout.jsonl and solutions/ and keeps everything else, so a pack with
// its holdout and a run's sealed copy without it compare equal, and a changed workload does not.
TEST(Manifest, TheJudgedPartLeavesOutTheHoldoutAndSolutions) {
  PackCopy p;
  stdfs::create_directories(p.dir() / "solutions/tunable");
  p.write("solutions/tunable/kernel.cc", "// a starting point\n");
  auto full = pack_manifest(p.dir());
  ASSERT_TRUE(full.ok()) << full.status().message();
  const Manifest judged = judged_part(*full);
  EXPECT_FALSE(judged.files.contains("holdout.jsonl"));
  EXPECT_FALSE(judged.files.contains("solutions/tunable/kernel.cc"));
  EXPECT_TRUE(judged.files.contains("reference/kernel.cc"));
  EXPECT_TRUE(judged.files.contains("workloads.jsonl"));
  EXPECT_EQ(judged.files.size() + 2, full->files.size());
  stdfs::remove(p.dir() / "holdout.jsonl");
  p.write("solutions/tunable/kernel.cc", "// another\n");
  auto sealed = pack_manifest(p.dir());
  ASSERT_TRUE(sealed.ok());
  EXPECT_EQ(judged_part(*sealed), judged);
  p.append("workloads.jsonl", "\n");
  auto changed = pack_manifest(p.dir());
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(manifest_diff(judged, judged_part(*changed)).changed, std::vector<std::string>{"workloads.jsonl"});
}

// A FlashInfer-Bench dataset's definition as a task: its workloads from workloads/**/<name>.jsonl,
// blobs under the dataset root, no reference solution (the Python reference judges), the candidate's
// backend, default settings; unknown names list the definitions there.
TEST(FibDefinition, LoadsADatasetDefinitionAsATask) {
  auto pack = load_fib_definition(kFixtures / "good_dataset", "vector_add_f32", Backend::kHost);
  ASSERT_TRUE(pack.ok()) << pack.status().message();
  EXPECT_EQ(pack->definition.name, "vector_add_f32");
  EXPECT_TRUE(pack->python_reference_only);
  EXPECT_EQ(pack->backend, Backend::kHost);
  EXPECT_EQ(pack->root, kFixtures / "good_dataset");
  EXPECT_EQ(pack->definition_file, kFixtures / "good_dataset/definitions/elementwise/vector_add_f32.json");
  EXPECT_EQ(pack->workloads.size(), 2u);
  EXPECT_EQ(pack->dev_uuids.size(), 2u);
  EXPECT_TRUE(pack->holdout.empty());
  EXPECT_EQ(pack->baseline(), nullptr);
  auto missing = load_fib_definition(kFixtures / "good_dataset", "softmax", Backend::kHost);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().kind(), ErrorKind::kNotFound);
  EXPECT_NE(missing.status().message().find("definitions: gemm_n64_k32, vector_add_f32"), std::string::npos)
      << missing.status().message();
  auto not_dataset = load_fib_definition(kFixtures / "pack_vector_add", "vector_add_f32", Backend::kHost);
  ASSERT_FALSE(not_dataset.ok());
  EXPECT_NE(not_dataset.status().message().find("no definitions/ directory"), std::string::npos);
  // Its workloads are checked like a pack's: the bad dataset's are refused with file, line and pointer.
  auto bad = load_fib_definition(kFixtures / "bad_dataset", "gemm_n64_k32", Backend::kHost);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().kind(), ErrorKind::kBadInput);
  EXPECT_NE(bad.status().message().find("gemm_n64_k32.jsonl:1: /workload/inputs/X: 'X' is not an input"),
            std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace kda::task
