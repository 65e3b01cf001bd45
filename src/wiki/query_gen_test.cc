// Query sets generated from a tree: a definition's comment (above it or at the top of its body) and a
// file's opening comment become queries answered by the file; licence headers and comments with too
// few words give none; the definition's own name and stop words are not in its query; a definition's
// name of three parts or more is a query too; the same seed gives the same set.
#include "wiki/query_gen.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "util/fs.h"

namespace kda::wiki {
namespace {

namespace stdfs = std::filesystem;

class QueryGen : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = *fs::make_temp_dir(stdfs::temp_directory_path(), "kda-querygen");
    stdfs::create_directories(root_ / "include/barriers");
    stdfs::create_directories(root_ / "build");
    write("include/barriers/named_barrier.hpp",
          "// Copyright 2025 Someone. Licensed under the BSD license.\n"
          "\n"
          "// Named barrier ids reserved for each warpgroup of a warp-specialized kernel.\n"
          "#pragma once\n"
          "// Synchronise the producer and consumer warpgroups on a named hardware barrier.\n"
          "inline void sync_named_barrier(int id, int threads) { asm volatile(\"bar.sync %0, %1;\" :: \"r\"(id), "
          "\"r\"(threads)); }\n");
    write("softmax.cu",
          "#include <cuda_runtime.h>\n"
          "__global__ void online_softmax(float* x, int n) {\n"
          "  // Rescale the running maximum and the running sum when a larger score arrives.\n"
          "  x[0] = n;\n"
          "}\n"
          "// ok\n"
          "__global__ void tiny(float* x) { x[0] = 1; }\n");
    write("build/generated.cu",
          "// Rescale the running maximum and the running sum again here please.\n__global__ void g() {}\n");
  }
  void TearDown() override { stdfs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    ASSERT_TRUE(fs::write_file_atomic(root_ / rel, text).ok());
  }
  stdfs::path root_;
};

TEST_F(QueryGen, CommentsBecomeQueriesAnsweredByTheirFile) {
  QueryGenOptions o;
  o.repo = "demo";
  auto qs = generate_queries(root_, o);
  ASSERT_TRUE(qs.ok()) << qs.status().message();
  std::set<std::pair<std::string, std::string>> kinds;  // (kind, expect)
  for (const auto& q : *qs) {
    kinds.insert({q.kind, q.expect});
    EXPECT_EQ(q.query.find("the "), std::string::npos) << q.query;       // stop words out
    EXPECT_EQ(q.query.find("copyright"), std::string::npos) << q.query;  // the licence is skipped
    if (q.kind != "definition_name") {
      EXPECT_EQ(q.query.find("sync"), std::string::npos) << q.query;  // not its own name
    }
    EXPECT_EQ(q.expect.find("build/"), std::string::npos) << "build directories are skipped";
    if (q.kind != "definition_name") {
      EXPECT_GE(std::count(q.query.begin(), q.query.end(), ' ') + 1, 4) << q.query;
    }
  }
  EXPECT_TRUE(kinds.count({"file_comment", "demo/include/barriers/named_barrier.hpp"}));
  EXPECT_TRUE(kinds.count({"definition_comment", "demo/include/barriers/named_barrier.hpp"}));
  EXPECT_TRUE(kinds.count({"definition_comment", "demo/softmax.cu"}));  // the comment at the top of the body
  // The name of sync_named_barrier, in words; online_softmax and tiny are too short a name to ask by.
  EXPECT_TRUE(std::any_of(qs->begin(), qs->end(), [](const GeneratedQuery& q) {
    return q.kind == "definition_name" && q.query == "sync named barrier" &&
           q.expect == "demo/include/barriers/named_barrier.hpp";
  }));
  EXPECT_EQ(qs->size(), 4u) << "'// ok' has too few words; the build/ file is skipped";
  auto again = generate_queries(root_, o);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), qs->size());
  for (size_t i = 0; i < qs->size(); ++i) EXPECT_EQ((*again)[i].query, (*qs)[i].query);
  EXPECT_NE(query_jsonl(qs->front()).find("\"expect\":[\"demo/"), std::string::npos) << query_jsonl(qs->front());
}

TEST_F(QueryGen, BadInputIsAnError) {
  QueryGenOptions o;
  EXPECT_FALSE(generate_queries(root_, o).ok());  // no repo name
  o.repo = "demo";
  EXPECT_FALSE(generate_queries(root_ / "missing", o).ok());
}

}  // namespace
}  // namespace kda::wiki
