// `kda task validate`: datasets, packs and single files; a bounded fuzz run of every loader; the kda binary end
// to end on a good and a bad dataset.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "task/definition.h"
#include "task/expression.h"
#include "task/settings.h"
#include "task/solution.h"
#include "task/task_pack.h"
#include "task/trace.h"
#include "task/validate.h"
#include "tensor/safetensors.h"
#include "util/fs.h"

namespace kda::task {
namespace {

namespace stdfs = std::filesystem;

const stdfs::path kFixtures = stdfs::path(KDA_SOURCE_DIR) / "tests/fixtures/fib";

std::string all_problems(const Diagnostics& d) {
  std::string s;
  for (const auto& item : d.items()) s += "\n  " + item.to_string();
  return s;
}

bool names(const Diagnostics& d, const std::string& file_suffix, const std::string& pointer, int line = -1) {
  for (const auto& item : d.items())
    if (item.file.ends_with(file_suffix) && item.pointer == pointer && (line < 0 || item.line == line)) return true;
  ADD_FAILURE() << "no problem at " << file_suffix << " " << pointer << "; got:" << all_problems(d);
  return false;
}

stdfs::path copy_of(const std::string& fixture) {
  stdfs::path dir = *fs::make_temp_dir(stdfs::temp_directory_path(), "kda-validate") / fixture;
  stdfs::copy(kFixtures / fixture, dir, stdfs::copy_options::recursive);
  return dir;
}

TEST(Validate, GoodDatasetIsValid) {
  ValidationReport r = validate_paths({kFixtures / "good_dataset"});
  EXPECT_TRUE(r.valid()) << all_problems(r.problems);
  EXPECT_EQ(r.counts.definitions, 2);
  EXPECT_EQ(r.counts.workloads, 4);
  EXPECT_EQ(r.counts.solutions, 1);
  EXPECT_EQ(r.counts.traces, 3);
  EXPECT_EQ(r.counts.blobs, 1);
  nlohmann::json j = r.to_json();
  EXPECT_EQ(j["valid"], true);
  EXPECT_TRUE(j["problems"].empty());
  EXPECT_EQ(j["counts"]["workloads"], 4);
}

TEST(Validate, PackIsValid) {
  ValidationReport r = validate_paths({kFixtures / "pack_vector_add"});
  EXPECT_TRUE(r.valid()) << all_problems(r.problems);
  EXPECT_EQ(r.counts.packs, 1);
  EXPECT_EQ(r.counts.workloads, 4);
  EXPECT_EQ(r.counts.solutions, 2);
  EXPECT_EQ(r.counts.blobs, 1);
}

// A pack's generator and stresses are checked against the generators the caller knows (kda task validate
// passes eval::generator_stresses), each unknown name a problem at its key.
TEST(Validate, PackGeneratorAndStressesAreCheckedAgainstTheKnownOnes) {
  stdfs::path root = copy_of("pack_vector_add");
  const std::string base = *fs::read_file(root / "task.toml");
  ValidationOptions o;
  o.generator_stresses = [](std::string_view g) -> std::optional<std::vector<std::string>> {
    if (g != "vec") return std::nullopt;
    return std::vector<std::string>{"spikes", "zeros"};
  };
  ASSERT_TRUE(
      fs::write_file_atomic(root / "task.toml", base + "[inputs]\ngenerator = \"vec\"\nstress = [\"zeros\"]\n").ok());
  EXPECT_TRUE(validate_paths({root}, o).valid()) << all_problems(validate_paths({root}, o).problems);
  ASSERT_TRUE(
      fs::write_file_atomic(root / "task.toml", base + "[inputs]\ngenerator = \"vec\"\nstress = [\"ties\"]\n").ok());
  auto r = validate_paths({root}, o);
  EXPECT_TRUE(names(r.problems, "task.toml", "/inputs/stress"));
  EXPECT_NE(all_problems(r.problems).find("known: spikes, zeros"), std::string::npos) << all_problems(r.problems);
  ASSERT_TRUE(fs::write_file_atomic(root / "task.toml", base + "[inputs]\ngenerator = \"vek\"\n").ok());
  EXPECT_TRUE(names(validate_paths({root}, o).problems, "task.toml", "/inputs/generator"));
  EXPECT_TRUE(validate_paths({root}).valid()) << "without the registries nothing is checked";
}

TEST(Validate, BadDatasetListsEveryProblem) {
  ValidationReport r = validate_paths({kFixtures / "bad_dataset"});
  EXPECT_FALSE(r.valid());
  EXPECT_TRUE(names(r.problems, "bad_dataset/definitions/vector_add_f32.json", "/outputs/out/shape/0"));
  EXPECT_TRUE(names(r.problems, "bad_dataset/workloads/gemm_n64_k32.jsonl", "/workload/inputs/X", 1));
  EXPECT_TRUE(names(r.problems, "bad_dataset/traces/gemm.jsonl", "/evaluation/performance", 1));
  nlohmann::json j = r.to_json();
  EXPECT_EQ(j["valid"], false);
  EXPECT_EQ(j["problems"].size(), r.problems.size());
  EXPECT_EQ(j["problems"][0].count("pointer"), 1u);
}

TEST(Validate, DatasetCrossChecks) {
  stdfs::path root = copy_of("good_dataset");
  // Unknown definition, duplicate names, unknown solution in a trace.
  ASSERT_TRUE(
      fs::write_file_atomic(
          root / "workloads/extra.jsonl",
          R"({"definition": "nope", "workload": {"uuid": "x", "axes": {}, "inputs": {}}, "solution": null, "evaluation": null})"
          "\n")
          .ok());
  stdfs::copy(root / "definitions/gemm/gemm_n64_k32.json", root / "definitions/gemm/copy.json");
  stdfs::copy(root / "solutions/elementwise/vector_add_f32/vector_add_cpp_naive.json", root / "solutions/copy.json");
  std::string traces = *fs::read_file(root / "traces/elementwise/vector_add_f32.jsonl");
  traces.replace(traces.find("\"solution\": \"vector_add_cpp_naive\""), 34, "\"solution\": \"ghost\"");
  ASSERT_TRUE(fs::write_file_atomic(root / "traces/elementwise/vector_add_f32.jsonl", traces).ok());
  ValidationReport r = validate_paths({root});
  EXPECT_TRUE(names(r.problems, "workloads/extra.jsonl", "/definition", 1));
  EXPECT_TRUE(names(r.problems, "definitions/gemm/gemm_n64_k32.json", "/name"));
  EXPECT_TRUE(names(r.problems, "solutions/elementwise/vector_add_f32/vector_add_cpp_naive.json", "/name"));
  EXPECT_TRUE(names(r.problems, "traces/elementwise/vector_add_f32.jsonl", "/solution", 1));
  stdfs::remove_all(root.parent_path());
}

TEST(Validate, DatasetBlobsRelativeToRoot) {
  stdfs::path root = copy_of("good_dataset");
  stdfs::path blob =
      root /
      "blob/workloads/elementwise/vector_add_f32/vector_add_f32_11111111-0000-4000-8000-000000000002.safetensors";
  tensor::Tensor wrong(tensor::DType::kFloat32, {2, 2});
  ASSERT_TRUE(tensor::write_safetensors(blob, {{"a", &wrong}}).ok());
  ValidationReport r = validate_paths({root});
  EXPECT_TRUE(names(r.problems, "workloads/elementwise/vector_add_f32.jsonl", "/workload/inputs/a/tensor_key", 2));
  stdfs::remove(blob);
  r = validate_paths({root});
  EXPECT_TRUE(names(r.problems, "workloads/elementwise/vector_add_f32.jsonl", "/workload/inputs/a/path", 2));
  stdfs::remove_all(root.parent_path());
}

// A dataset without its blobs validates with --schema-only (every safetensors input unopened), and
// fails without it, naming the missing file.
TEST(Validate, SchemaOnlySkipsTheBlobs) {
  stdfs::path root = copy_of("good_dataset");
  stdfs::remove_all(root / "blob");
  ValidationReport full = validate_paths({root});
  EXPECT_TRUE(names(full.problems, "workloads/elementwise/vector_add_f32.jsonl", "/workload/inputs/a/path", 2));
  ValidationReport schema = validate_paths({root}, {.schema_only = true});
  EXPECT_TRUE(schema.valid()) << all_problems(schema.problems);
  EXPECT_EQ(schema.counts.blobs, 0);
  EXPECT_EQ(schema.counts.workloads, 4);
  stdfs::remove_all(root.parent_path());
}

// A solution that is valid FlashInfer-Bench but that kda eval cannot evaluate is a warning (the
// report stays valid): a language kda does not build, a torch binding of a Python solution, tvm-ffi
// without destination passing.
TEST(Validate, WarnsWhereKdaCannotEvaluateAValidSolution) {
  stdfs::path root = copy_of("good_dataset");
  const stdfs::path sol = root / "solutions/elementwise/vector_add_f32/vector_add_cpp_naive.json";
  auto base = nlohmann::json::parse(*fs::read_file(sol));
  ValidationReport clean = validate_paths({root});
  EXPECT_TRUE(clean.warnings.empty()) << all_problems(clean.warnings);
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"tilelang", [](nlohmann::json& j) { j["spec"]["language"] = "tilelang"; }, "language \"tilelang\" is not built"},
      {"torch for python",
       [](nlohmann::json& j) {
         j["spec"]["language"] = "python";
         j["spec"]["binding"] = "torch";
       },
       "binding \"torch\" is for cpp and cuda solutions"},
      {"tvm-ffi, no DPS",
       [](nlohmann::json& j) {
         j["spec"]["binding"] = "tvm-ffi";
         j["spec"]["destination_passing_style"] = false;
       },
       "destination_passing_style false"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = base;
    c.edit(j);
    ASSERT_TRUE(fs::write_file_atomic(sol, j.dump(2)).ok());
    ValidationReport r = validate_paths({root});
    EXPECT_TRUE(r.valid()) << c.what << all_problems(r.problems);
    ASSERT_EQ(r.warnings.size(), 1u) << c.what << all_problems(r.warnings);
    EXPECT_NE(r.warnings.items()[0].message.find(c.says), std::string::npos) << r.warnings.items()[0].message;
    EXPECT_EQ(r.to_json()["warnings"].size(), 1u);
  }
  stdfs::remove_all(root.parent_path());
}

// binding "torch" with no PYBIND11_MODULE in any source is a problem (neither kda nor FlashInfer-Bench
// could call it); kda's own torch-binding solution is clean.
TEST(Validate, ATorchBindingWithoutPybindModuleIsAProblem) {
  const stdfs::path good = stdfs::path(KDA_SOURCE_DIR) / "solutions/cuda_rmsnorm_bf16/torch_binding";
  ValidationReport clean = validate_paths({good});
  EXPECT_TRUE(clean.valid()) << all_problems(clean.problems);
  auto tmp = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-validate-torch");
  ASSERT_TRUE(tmp.ok());
  const stdfs::path bad = *tmp / "torch_binding";
  stdfs::copy(good, bad, stdfs::copy_options::recursive);
  auto text = fs::read_file(bad / "kernel.cu");
  ASSERT_TRUE(text.ok());
  ASSERT_TRUE(fs::write_file_atomic(bad / "kernel.cu", text->substr(0, text->find("PYBIND11_MODULE"))).ok());
  ValidationReport r = validate_paths({bad});
  EXPECT_FALSE(r.valid());
  EXPECT_NE(all_problems(r.problems).find("binding \"torch\" needs PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)"),
            std::string::npos)
      << all_problems(r.problems);
  stdfs::remove_all(*tmp);
}

// A build.toml kda eval would refuse is a problem (the file, then the line and field in the message);
// a good one is nothing to report.
TEST(Validate, ABuildTomlKdaWouldRefuseIsAProblem) {
  stdfs::path root = copy_of("good_dataset");
  const stdfs::path sol = root / "solutions/elementwise/vector_add_f32/vector_add_cpp_naive.json";
  auto base = nlohmann::json::parse(*fs::read_file(sol));
  auto with = [&](const std::string& toml) {
    nlohmann::json j = base;
    j["sources"].push_back({{"path", "build.toml"}, {"content", toml}});
    EXPECT_TRUE(fs::write_file_atomic(sol, j.dump(2)).ok());
    return validate_paths({root});
  };
  ValidationReport good = with("flags = [\"-ffast-math\"]\n");
  EXPECT_TRUE(good.valid()) << all_problems(good.problems);
  ValidationReport bad = with("flags = [\"-include/etc/passwd\"]\n");
  EXPECT_FALSE(bad.valid());
  EXPECT_TRUE(names(bad.problems, sol.string(), "/sources", 0)) << all_problems(bad.problems);
  EXPECT_NE(all_problems(bad.problems).find("build.toml:1: flags: '-include/etc/passwd' is not allowed for cpp"),
            std::string::npos)
      << all_problems(bad.problems);
  stdfs::remove_all(root.parent_path());
}

// A build.toml beside solution.json that is not among its sources is read by nothing: a warning
// that says how to list it, and nothing once it is listed.
TEST(Validate, AnUnlistedBuildTomlIsAWarning) {
  stdfs::path root = copy_of("pack_vector_add");
  const stdfs::path dir = root / "baselines/naive";
  ASSERT_TRUE(fs::write_file_atomic(dir / "build.toml", "defines = [\"FAST=1\"]\n").ok());
  for (const stdfs::path& path : {dir, dir / "solution.json"}) {
    ValidationReport r = validate_paths({path});
    EXPECT_TRUE(r.valid()) << all_problems(r.problems);
    // The second warning: the directory form lacks the content FlashInfer-Bench requires.
    ASSERT_EQ(r.warnings.size(), 2u) << all_problems(r.warnings);
    EXPECT_NE(r.warnings.items()[1].message.find("kda solution export"), std::string::npos);
    EXPECT_TRUE(names(r.warnings, path.string(), "/sources", 0)) << all_problems(r.warnings);
    EXPECT_NE(r.warnings.items()[0].message.find("build.toml lies beside solution.json but is not among its sources"),
              std::string::npos)
        << r.warnings.items()[0].message;
  }
  auto j = nlohmann::json::parse(*fs::read_file(dir / "solution.json"));
  j["sources"].push_back({{"path", "build.toml"}});
  ASSERT_TRUE(fs::write_file_atomic(dir / "solution.json", j.dump(2)).ok());
  ValidationReport listed = validate_paths({dir});
  EXPECT_TRUE(listed.valid()) << all_problems(listed.problems);
  ASSERT_EQ(listed.warnings.size(), 1u) << all_problems(listed.warnings);  // only FIB's missing content
  EXPECT_NE(listed.warnings.items()[0].message.find("/sources/0/content"), std::string::npos);
  stdfs::remove_all(root.parent_path());
}

TEST(Validate, DetectsKinds) {
  EXPECT_EQ(detect_path_kind(kFixtures / "good_dataset"), PathKind::kDataset);
  EXPECT_EQ(detect_path_kind(kFixtures / "pack_vector_add"), PathKind::kTaskPack);
  EXPECT_EQ(detect_path_kind(kFixtures / "pack_vector_add/reference"), PathKind::kSolutionDir);
  EXPECT_EQ(detect_path_kind(kFixtures / "pack_vector_add/definition.json"), PathKind::kDefinition);
  EXPECT_EQ(detect_path_kind(kFixtures / "pack_vector_add/workloads.jsonl"), PathKind::kWorkloads);
  EXPECT_EQ(detect_path_kind(kFixtures / "pack_vector_add/task.toml"), PathKind::kSettings);
  EXPECT_EQ(detect_path_kind(kFixtures / "good_dataset/traces/elementwise/vector_add_f32.jsonl"), PathKind::kTraces);
  EXPECT_EQ(detect_path_kind(kFixtures / "good_dataset/solutions/elementwise/vector_add_f32/vector_add_cpp_naive.json"),
            PathKind::kSolution);
  EXPECT_EQ(detect_path_kind(kFixtures), PathKind::kUnknown);
  ValidationReport r = validate_paths({kFixtures, kFixtures / "missing.json"});
  EXPECT_EQ(r.problems.size(), 2u);
}

TEST(Validate, SingleFilesUseTheirDatasetOrPack) {
  ValidationReport ok = validate_paths(
      {kFixtures / "good_dataset/workloads/elementwise/vector_add_f32.jsonl",
       kFixtures / "good_dataset/traces/elementwise/vector_add_f32.jsonl",
       kFixtures / "pack_vector_add/workloads.jsonl", kFixtures / "pack_vector_add/reference",
       kFixtures / "pack_vector_add/task.toml", kFixtures / "good_dataset/definitions/gemm/gemm_n64_k32.json"});
  EXPECT_TRUE(ok.valid()) << all_problems(ok.problems);
  EXPECT_EQ(ok.counts.blobs, 2);  // checked against the dataset root and the pack directory
  ValidationReport bad = validate_paths({kFixtures / "bad_dataset/workloads/gemm_n64_k32.jsonl"});
  EXPECT_TRUE(names(bad.problems, "gemm_n64_k32.jsonl", "/workload/inputs/X", 1));
}

// A solution kept beside its pack rather than in it (kda's solutions/<pack>/<name>/): a repository with a
// solutions/ folder is no dataset, so alone it is checked without a definition; with its pack named in the same
// call its definition is checked against the pack's.
TEST(Validate, ASolutionBesideItsPackUsesThePackNamedWithIt) {
  const stdfs::path root = stdfs::temp_directory_path() / ("kda-validate-beside-" + std::to_string(getpid()));
  stdfs::remove_all(root);
  stdfs::create_directories(root / "solutions/vector_add/mine");
  stdfs::copy(kFixtures / "pack_vector_add/reference", root / "solutions/vector_add/mine");
  const stdfs::path sol = root / "solutions/vector_add/mine", pack = kFixtures / "pack_vector_add";
  ValidationReport alone = validate_paths({sol});
  EXPECT_TRUE(alone.valid()) << all_problems(alone.problems);
  ValidationReport beside = validate_paths({pack, sol});
  EXPECT_TRUE(beside.valid()) << all_problems(beside.problems);
  auto json = fs::read_file(sol / "solution.json");
  ASSERT_TRUE(json.ok());
  auto j = nlohmann::json::parse(*json);
  j["definition"] = "not_this_pack";
  ASSERT_TRUE(fs::write_file_atomic(sol / "solution.json", j.dump()).ok());
  ValidationReport wrong = validate_paths({pack, sol});
  EXPECT_TRUE(names(wrong.problems, "mine", "/definition"));
  stdfs::remove_all(root);
}

// Every solution kda ships (solutions/<pack>/<name>/) against its contest or CUDA pack.
// The built-in packs by definition name (solutions/<definition>/ names a pack by its definition:
// the contest packs' directories have that name, the host and CUDA ones a short one).
std::map<std::string, stdfs::path> packs_by_definition(const stdfs::path& repo) {
  std::map<std::string, stdfs::path> out;
  for (const char* family : {"tasks/contest", "tasks/cuda", "tasks/host"})
    for (const auto& d : stdfs::directory_iterator(repo / family)) {
      auto text = fs::read_file(d.path() / "definition.json");
      if (!text.ok()) continue;
      const auto j = nlohmann::json::parse(*text, nullptr, false);
      if (j.is_object() && j.contains("name")) out[j["name"].get<std::string>()] = d.path();
    }
  return out;
}

TEST(Validate, KdasOwnSolutionsMatchTheirPacks) {
  const stdfs::path repo = KDA_SOURCE_DIR;
  const auto packs = packs_by_definition(repo);
  int checked = 0;
  for (const auto& pack_dir : stdfs::directory_iterator(repo / "solutions")) {
    if (!pack_dir.is_directory()) continue;
    auto found = packs.find(pack_dir.path().filename().string());
    ASSERT_NE(found, packs.end()) << "no task pack of definition " << pack_dir.path().filename() << " for "
                                  << pack_dir.path();
    const stdfs::path pack = found->second;
    for (const auto& sol : stdfs::directory_iterator(pack_dir.path())) {
      if (!sol.is_directory()) continue;
      ValidationReport r = validate_paths({pack, sol.path()});
      EXPECT_TRUE(r.valid()) << sol.path() << all_problems(r.problems);
      EXPECT_EQ(r.counts.packs, 1);
      ++checked;
    }
  }
  EXPECT_GE(checked, 4);  // GDN decode and prefill, the host numpy solutions
}

// Issue 43: every solution the project ships (solutions/, each pack's reference, baselines and
// tunable solutions) exports as a Solution FlashInfer-Bench's schema loads (content inline); the
// directory form as written lacks the content FIB requires, and kda task validate says so.
TEST(Validate, EveryShippedSolutionExportsAsAFlashInferBenchSolution) {
  const stdfs::path repo = KDA_SOURCE_DIR;
  int checked = 0;
  std::vector<stdfs::path> dirs;
  for (const char* root : {"solutions", "tasks"})
    for (const auto& e : stdfs::recursive_directory_iterator(repo / root))
      if (e.path().filename() == "solution.json") dirs.push_back(e.path().parent_path());
  for (const auto& dir : dirs) {
    SCOPED_TRACE(dir.string());
    auto sol = load_solution(dir);
    ASSERT_TRUE(sol.ok()) << sol.status().message();
    const auto errors = fib_solution_errors(sol->to_json());
    EXPECT_TRUE(errors.empty()) << errors.front();
    ++checked;
  }
  EXPECT_GE(checked, 25);
  // The directory form as written: FIB would refuse it for the missing content, and validate warns.
  const stdfs::path numpy = repo / "solutions/host_rmsnorm_f32/numpy";
  auto raw = nlohmann::json::parse(*fs::read_file(numpy / "solution.json"));
  const auto errors = fib_solution_errors(raw);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("/sources/0/content"), std::string::npos) << errors[0];
  ValidationReport r = validate_paths({numpy});
  EXPECT_TRUE(r.valid());
  bool warned = false;
  for (const auto& w : r.warnings.items()) warned |= w.message.find("kda solution export") != std::string::npos;
  EXPECT_TRUE(warned);
  // What else FIB's schema refuses.
  auto bad = raw;
  bad["spec"]["language"] = "rust";
  bad["spec"]["target_hardware"] = nlohmann::json::array();
  bad["spec"]["entry_point"] = "other.py::run";
  bad["sources"][0]["path"] = "../rmsnorm.py";
  bad["sources"][0]["content"] = "x = 1\n";
  const auto many = fib_solution_errors(bad);
  EXPECT_EQ(many.size(), 4u);
}

// ---- fuzz -------------------------------------------------------------------------------------------------

// Deterministic mutations: byte flips, structural characters, deletions, duplications, truncation.
class Mutator {
 public:
  explicit Mutator(uint32_t seed) : rng_(seed) {}
  std::string mutate(std::string s) {
    static const std::string kChars = "{}[]\":,\\ \n0-9.eE+-truefalsnl#=/~\x01\xff";
    int edits = 1 + static_cast<int>(rng_() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = s.empty() ? 0 : rng_() % s.size();
      switch (rng_() % 6) {
        case 0:
          if (!s.empty()) s[pos] = static_cast<char>(rng_() % 256);
          break;
        case 1: s.insert(pos, 1, kChars[rng_() % kChars.size()]); break;
        case 2:
          if (!s.empty()) s.erase(pos, 1 + rng_() % 16);
          break;
        case 3:
          if (!s.empty()) s.insert(pos, s.substr(rng_() % s.size(), rng_() % 64));
          break;
        case 4: s.resize(pos); break;
        case 5:
          if (!s.empty()) std::swap(s[pos], s[rng_() % s.size()]);
          break;
      }
    }
    return s;
  }

 private:
  std::mt19937 rng_;
};

constexpr int kFuzzIterations = 1500;

template <typename F>
void fuzz(const std::string& seed_text, uint32_t seed, F&& load) {
  Mutator m(seed);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kFuzzIterations; ++i) {
    std::string text = m.mutate(seed_text);
    load(text);  // must return (a value or problems), never crash or throw
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) break;  // bounded on slow machines
  }
}

TEST(Fuzz, JsonAndJsonlLoaders) {
  std::string def = *fs::read_file(kFixtures / "good_dataset/definitions/gemm/gemm_n64_k32.json");
  std::string sol =
      *fs::read_file(kFixtures / "good_dataset/solutions/elementwise/vector_add_f32/vector_add_cpp_naive.json");
  std::string wl = *fs::read_file(kFixtures / "good_dataset/workloads/elementwise/vector_add_f32.jsonl");
  std::string tr = *fs::read_file(kFixtures / "good_dataset/traces/elementwise/vector_add_f32.jsonl");
  Definition parsed_def = *load_definition(kFixtures / "good_dataset/definitions/elementwise/vector_add_f32.json");
  size_t accepted = 0;
  fuzz(def, 1, [&](const std::string& t) {
    Diagnostics d;
    if (auto j = parse_json_text(t, "f.json", 0, d)) accepted += definition_from_json(*j, "f.json", d).has_value();
  });
  fuzz(sol, 2, [&](const std::string& t) {
    Diagnostics d;
    if (auto j = parse_json_text(t, "s.json", 0, d))
      if (auto s = solution_from_json(*j, "s.json", d)) {
        (void)solution_hash(*s);
        (void)s->to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
  });
  fuzz(wl + tr, 3, [&](const std::string& t) {
    Diagnostics d;
    for (const auto& [line, trace] : trace_lines_from_jsonl(t, "w.jsonl", d)) {
      check_workload(parsed_def, trace.workload, "w.jsonl", line, "/workload", d, nullptr);
      (void)trace.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  });
  EXPECT_GT(accepted, 0u);  // some mutations keep the document valid
}

TEST(Fuzz, DeepNestingIsRefused) {
  Diagnostics d;
  std::string deep =
      R"({"definition": "x", "workload": {"uuid": "u", "axes": {}, "inputs": {}}, "solution": "s", "evaluation": {"kda": )" +
      std::string(100000, '[') + std::string(100000, ']') + "}}";
  EXPECT_TRUE(trace_lines_from_jsonl(deep, "deep.jsonl", d).empty());
  EXPECT_TRUE(names(d, "deep.jsonl", "", 1));
}

TEST(Fuzz, TomlAndExpressions) {
  std::string toml = *fs::read_file(kFixtures / "pack_vector_add/task.toml") +
                     "[reference]\ncpu_solution = \"x\"\n[inputs]\ngenerator = \"g\"\n";
  fuzz(toml, 4, [&](const std::string& t) {
    Diagnostics d;
    if (auto s = settings_from_toml(t, "task.toml", d))
      (void)s->to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  });
  fuzz("min(ceil_div(max(seq_len - 7, 0), 16), 32) * 44050944 + (n / 2)", 5, [&](const std::string& t) {
    if (auto e = Expression::parse(t); e.ok()) (void)e->evaluate({{"seq_len", 9}, {"n", 0}});
  });
}

TEST(Fuzz, TaskPackLoader) {
  stdfs::path root = copy_of("pack_vector_add");
  Mutator m(6);
  const std::vector<std::string> files{"definition.json", "workloads.jsonl",         "holdout.jsonl",
                                       "task.toml",       "reference/solution.json", "blob/a4.safetensors"};
  std::map<std::string, std::string> originals;
  for (const auto& f : files) originals[f] = *fs::read_file(root / f);
  for (int i = 0; i < 120; ++i) {
    const std::string& f = files[i % files.size()];
    ASSERT_TRUE(fs::write_file_atomic(root / f, m.mutate(originals[f])).ok());
    Diagnostics d;
    (void)load_task_pack(root, d);
    (void)validate_paths({root});
    ASSERT_TRUE(fs::write_file_atomic(root / f, originals[f]).ok());
  }
  Diagnostics d;
  EXPECT_TRUE(load_task_pack(root, d).has_value()) << all_problems(d);
  stdfs::remove_all(root.parent_path());
}

// ---- the kda binary end to end ----------------------------------------------------------------------------

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

RunResult run_kda(const std::vector<std::string>& args) {
  stdfs::path tmp = *fs::make_temp_dir(stdfs::temp_directory_path(), "kda-e2e");
  std::string bin = std::string(KDA_BINARY_DIR) + "/kda";
  pid_t pid = fork();
  if (pid == 0) {
    int out = open((tmp / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open((tmp / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> argv{bin.data()};
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (auto out = fs::read_file(tmp / "out"); out.ok()) r.out = *out;
  if (auto err = fs::read_file(tmp / "err"); err.ok()) r.err = *err;
  stdfs::remove_all(tmp);
  return r;
}

TEST(Cli, ValidateExitCodesAndMessages) {
  if (!stdfs::exists(std::string(KDA_BINARY_DIR) + "/kda")) GTEST_SKIP() << "kda binary not built";
  RunResult good =
      run_kda({"task", "validate", (kFixtures / "good_dataset").string(), (kFixtures / "pack_vector_add").string()});
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_NE(good.out.find("valid: "), std::string::npos);

  RunResult bad = run_kda({"task", "validate", (kFixtures / "bad_dataset").string()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("bad_dataset/definitions/vector_add_f32.json: /outputs/out/shape/0: "), std::string::npos)
      << bad.err;
  EXPECT_NE(bad.err.find("bad_dataset/workloads/gemm_n64_k32.jsonl:1: /workload/inputs/X: "), std::string::npos)
      << bad.err;
  EXPECT_NE(bad.err.find("bad_dataset/traces/gemm.jsonl:1: /evaluation/performance: "), std::string::npos) << bad.err;

  RunResult js = run_kda({"task", "validate", "--json", (kFixtures / "bad_dataset").string()});
  EXPECT_EQ(js.exit_code, 2);
  auto j = nlohmann::json::parse(js.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << js.out;
  EXPECT_EQ(j["valid"], false);
  EXPECT_GE(j["problems"].size(), 3u);
  EXPECT_TRUE(j["counts"].contains("definitions"));
}

TEST(Cli, ListAndShow) {
  if (!stdfs::exists(std::string(KDA_BINARY_DIR) + "/kda")) GTEST_SKIP() << "kda binary not built";
  RunResult list = run_kda({"task", "list", "--json", kFixtures.string()});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  auto j = nlohmann::json::parse(list.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << list.out;
  ASSERT_EQ(j["packs"].size(), 1u);
  EXPECT_EQ(j["packs"][0]["name"], "vector_add_f32");
  EXPECT_EQ(j["packs"][0]["backend"], "host");

  RunResult show = run_kda({"task", "show", (kFixtures / "pack_vector_add").string()});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("alpha"), std::string::npos);
  EXPECT_EQ(show.out.find("33333333-0000-4000-8000-000000000004"), std::string::npos);  // holdout never shown

  RunResult one = run_kda({"task", "show", "--json", "--workload", "33333333-0000-4000-8000-000000000002",
                           (kFixtures / "pack_vector_add").string()});
  EXPECT_EQ(one.exit_code, 0) << one.err;
  auto w = nlohmann::json::parse(one.out, nullptr, false);
  ASSERT_FALSE(w.is_discarded()) << one.out;
  EXPECT_EQ(w["roofline"]["bytes"], 48.0);
  EXPECT_EQ(w["tensors"][0]["resolved_shape"], nlohmann::json::array({4}));

  RunResult hidden = run_kda(
      {"task", "show", "--workload", "33333333-0000-4000-8000-000000000004", (kFixtures / "pack_vector_add").string()});
  EXPECT_EQ(hidden.exit_code, 2);
  RunResult broken = run_kda({"task", "show", (kFixtures / "bad_dataset").string()});
  EXPECT_EQ(broken.exit_code, 2);
}

// The contest packs are what a serving engine adopts kernels from: each requires the CUDA graph contract
// and names stress inputs (issue 47), so a candidate that breaks either is rejected there, not reported.
TEST(Validate, EveryContestPackRequiresTheGraphContractAndHasStresses) {
  int packs = 0;
  for (const auto& d : stdfs::directory_iterator(stdfs::path(KDA_SOURCE_DIR) / "tasks/contest")) {
    if (!stdfs::exists(d.path() / "task.toml")) continue;
    SCOPED_TRACE(d.path().filename().string());
    auto pack = load_task_pack(d.path());
    ASSERT_TRUE(pack.ok()) << pack.status().message();
    EXPECT_TRUE(pack->settings.graph_contract);
    EXPECT_FALSE(pack->settings.stress.empty());
    ++packs;
  }
  EXPECT_EQ(packs, 5);
}

}  // namespace
}  // namespace kda::task
