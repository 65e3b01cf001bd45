// `kda wiki ...` through the real binary: exit codes, stdout/stderr split, --json.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "util/fs.h"

namespace {

namespace stdfs = std::filesystem;

struct Run {
  int code;
  std::string out;
};

// stdout (and stderr too with `with_stderr`) of `kda <args>`.
Run kda(const std::string& args, bool with_stderr = false) {
  std::string cmd = std::string(KDA_BINARY) + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

class WikiCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = *kda::fs::make_temp_dir(stdfs::temp_directory_path(), "kda-wiki-cli");
    stdfs::create_directories(dir_ / "src");
    std::ofstream(dir_ / "src" / "k.cu") << "__global__ void tma_kernel(float* x) { x[0] = 1; }\n";
    db_ = " --db " + (dir_ / "w.db").string();
    ::setenv("KDA_KNOWLEDGE_DIR", (dir_ / "none").c_str(), 1);  // keep these tests independent of knowledge/
  }
  void TearDown() override {
    ::unsetenv("KDA_KNOWLEDGE_DIR");
    stdfs::remove_all(dir_);
  }
  stdfs::path dir_;
  std::string db_;
};

TEST_F(WikiCli, IngestSearchShowGrepStats) {
  auto ing = kda("wiki ingest --repo demo --json " + (dir_ / "src").string() + db_);
  ASSERT_EQ(ing.code, 0) << ing.out;
  EXPECT_EQ(nlohmann::json::parse(ing.out)["chunks_added"], 1);
  auto s = kda("wiki search tma kernel --json" + db_);
  ASSERT_EQ(s.code, 0);
  auto j = nlohmann::json::parse(s.out);
  ASSERT_EQ(j["results"].size(), 1u);
  EXPECT_EQ(j["results"][0]["id"], "demo:k.cu:1");
  EXPECT_EQ(j["results"][0]["open_command"], "kda wiki show demo:k.cu:1");
  EXPECT_EQ(kda("wiki show demo:k.cu:1" + db_).code, 0);
  EXPECT_EQ(kda("wiki grep 'x\\[0\\]'" + db_).code, 0);
  EXPECT_EQ(kda("wiki grep nomatchanywhere" + db_).code, 1);
  auto st = kda("wiki stats --json" + db_);
  ASSERT_EQ(st.code, 0);
  EXPECT_EQ(nlohmann::json::parse(st.out)["chunks"], 1);
}

TEST_F(WikiCli, BadInputExitsTwo) {
  EXPECT_EQ(kda("wiki show no-such-id" + db_).code, 2);
  EXPECT_EQ(kda("wiki ingest " + (dir_ / "missing").string() + db_).code, 2);
  EXPECT_EQ(kda("wiki ingest --kind bogus " + (dir_ / "src").string() + db_).code, 2);
  EXPECT_EQ(kda("wiki search --limit x tma" + db_).code, 2);
  // An unknown kind is an error, not an empty result (it was exit 0 with no hits).
  const auto bogus = kda("wiki search --kind bogus tma" + db_, /*with_stderr=*/true);
  EXPECT_EQ(bogus.code, 2);
  EXPECT_NE(bogus.out.find("--kind: expected page, doc, code, pr, ncu or lesson, got 'bogus'"), std::string::npos)
      << bogus.out;
  EXPECT_EQ(kda("wiki grep --kind bogus tma" + db_).code, 2);
  EXPECT_EQ(kda("wiki search" + db_).code, 2);
  EXPECT_EQ(kda("wiki grep '('" + db_).code, 2);
  EXPECT_EQ(kda("wiki eval " + (dir_ / "nope.jsonl").string() + db_).code, 2);
}

TEST_F(WikiCli, EvalComputesHitRate) {
  ASSERT_EQ(kda("wiki ingest --repo demo " + (dir_ / "src").string() + db_).code, 0);
  std::ofstream(dir_ / "q.jsonl") << R"({"query": "tma kernel", "expect": ["demo/k.cu"]})"
                                  << "\n"
                                  << R"({"query": "nothing here", "expect": ["x.cu"]})"
                                  << "\n";
  auto r = kda("wiki eval --json --repeat 1 " + (dir_ / "q.jsonl").string() + db_);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["hits"], 1);
  EXPECT_EQ(kda("wiki eval --min-hit-rate 0.9 " + (dir_ / "q.jsonl").string() + db_).code, 1);
}

}  // namespace
