// A FlashInfer-Bench dataset's definition as the task (issue 22 item 4): `kda eval <solution> --task
// <dataset> --definition NAME`, with no task pack and no hand-written reference solution. The
// definition's Python reference judges through the torch oracle: where python3 has torch the naive
// solution of tests/fixtures/fib/good_dataset PASSES every workload (its blob-backed one included);
// where it has not, the command says so before anything is built and exits 2. Asking for the
// pack's reference, an unknown definition and a dataset without definitions/ are exit 2 with what
// is wrong.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "eval/torch_oracle.h"
#include "proc/subprocess.h"

namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

const stdfs::path kSource = KDA_SOURCE_DIR;
const stdfs::path kDataset = kSource / "tests/fixtures/fib/good_dataset";
const stdfs::path kSolution = kDataset / "solutions/elementwise/vector_add_f32/vector_add_cpp_naive.json";

struct Outcome {
  int rc = -1;
  std::string out, err;
};

Outcome kda_eval(std::vector<std::string> extra) {
  kda::proc::RunOptions o;
  o.argv = {KDA_BINARY, "eval", kSolution.string(), "--task", kDataset.string(), "--quiet"};
  o.argv.insert(o.argv.end(), extra.begin(), extra.end());
  o.timeout_seconds = 300;
  auto r = kda::proc::run(o);
  EXPECT_TRUE(r.ok());
  if (!r.ok()) return {};
  return {r->exit.exit_code, r->stdout_text, r->stderr_text};
}

TEST(FibDefinition, EvaluatesAgainstThePythonReferenceOrSaysWhyNot) {
  Outcome r = kda_eval({"--definition", "vector_add_f32", "--workloads", "all", "--json"});
  if (!kda::eval::torch_importable()) {
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_NE(r.err.find("judged by its Python reference, which needs python3 with torch"), std::string::npos) << r.err;
    return;
  }
  ASSERT_EQ(r.rc, 0) << r.err;
  json report = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << r.out;
  ASSERT_EQ(report["traces"].size(), 2u);  // both workloads of the dataset, the safetensors one too
  for (const auto& t : report["traces"]) {
    EXPECT_EQ(t["definition"], "vector_add_f32");
    EXPECT_EQ(t["evaluation"]["status"], "PASSED") << t["evaluation"].dump();
  }
}

TEST(FibDefinition, WrongRequestsAreExitTwoWithTheReason) {
  Outcome pack_ref = kda_eval({"--definition", "vector_add_f32", "--reference", "pack"});
  EXPECT_EQ(pack_ref.rc, 2);
  EXPECT_NE(pack_ref.err.find("has no reference solution, only its Python reference"), std::string::npos)
      << pack_ref.err;
  Outcome unknown = kda_eval({"--definition", "nope"});
  EXPECT_EQ(unknown.rc, 2);
  EXPECT_NE(unknown.err.find("no definition 'nope' (definitions: gemm_n64_k32, vector_add_f32)"), std::string::npos)
      << unknown.err;
  kda::proc::RunOptions o;
  o.argv = {KDA_BINARY, "eval", kSolution.string(), "--task", (kSource / "tasks/host").string(), "--definition", "x"};
  o.timeout_seconds = 60;
  auto r = kda::proc::run(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.exit_code, 2);
  EXPECT_NE(r->stderr_text.find("not a FlashInfer-Bench dataset (no definitions/ directory)"), std::string::npos)
      << r->stderr_text;
}

}  // namespace
