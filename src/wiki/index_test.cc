#include <gtest/gtest.h>

#include <fstream>

#include "util/fs.h"
#include "wiki/index.h"
#include "wiki/source_info.h"

namespace kda::wiki {
namespace {

namespace stdfs = std::filesystem;

void write(const stdfs::path& p, const std::string& s) {
  stdfs::create_directories(p.parent_path());
  std::ofstream(p) << s;
}

class IndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-wiki-test");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
    src_ = dir_ / "src";
    write(src_ / "pages/tma.md",
          "---\nid: technique/tma\ntype: technique\ntags: [arch:sm90, technique:tma]\nrelated: [hopper/mbarrier]\n---\n"
          "# TMA bulk tensor copies\n\nThe tensor memory accelerator copies tiles with cp.async.bulk.tensor and "
          "signals an mbarrier.\n");
    write(src_ / "pages/splitk.md",
          "---\nid: technique/split-k\ntags: [technique:split-k, op:gemm]\n---\n# Split-K\n\nSplit the K loop of a "
          "GEMM across CTAs and reduce partial sums.\n");
    std::string kernels;
    for (int i = 0; i < 3; ++i)
      kernels += "__global__ void tma_copy_kernel" + std::to_string(i) +
                 "(float* x) {\n  // tma copy tile with cp.async.bulk.tensor\n  x[0] = 1;\n}\n\n";
    write(src_ / "kernels/copy_sm90.cu", kernels);
    write(src_ / "kernels/gemm.py", "def split_k_gemm(a, b):\n    # split k reduction\n    return a @ b\n");
    auto idx = Index::open(dir_ / "db" / "wiki.db");
    ASSERT_TRUE(idx.ok()) << idx.status().message();
    index_ = std::move(*idx);
  }
  void TearDown() override {
    index_.reset();
    stdfs::remove_all(dir_);
  }
  IngestStats ingest() {
    IngestOptions o;
    o.repo = "demo";
    auto st = index_->ingest({src_}, o, nullptr);
    EXPECT_TRUE(st.ok()) << st.status().message();
    return st.ok() ? *st : IngestStats{};
  }
  std::vector<SearchHit> search(const std::string& q, Filters f = {}, int limit = 10) {
    auto r = index_->search({q, limit, f});
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : std::vector<SearchHit>{};
  }
  stdfs::path dir_, src_;
  std::unique_ptr<Index> index_;
};

TEST_F(IndexTest, SearchFindsPagesAndCodeWithLocations) {
  IngestStats st = ingest();
  EXPECT_EQ(st.files_seen, 4);
  EXPECT_EQ(st.files_indexed, 4);
  auto hits = search("TMA");
  ASSERT_GE(hits.size(), 2u);
  EXPECT_EQ(hits[0].id, "technique/tma");
  EXPECT_EQ(hits[0].open_command, "kda wiki show technique/tma");
  EXPECT_NE(hits[0].location.find("demo@worktree:pages/tma.md:7-"), std::string::npos) << hits[0].location;
  EXPECT_EQ(hits[0].tags, (std::vector<std::string>{"arch:sm90", "technique:tma", "type:technique"}));
  EXPECT_EQ(hits[0].matched_terms,
            (std::vector<std::string>{"tma", "tensor memory accelerator", "cp.async.bulk", "cp.async.bulk.tensor"}));
  EXPECT_NE(hits[0].snippet.find("cp.async.bulk.tensor"), std::string::npos);
}

TEST_F(IndexTest, AliasesAndIdentifierParts) {
  ingest();
  // "tensor memory accelerator" is an alias of TMA; the code only says cp.async.bulk.tensor.
  auto hits = search("tensor memory accelerator", {.kind = "code"});
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].path, "kernels/copy_sm90.cu");
  // Sub-word match inside an identifier.
  hits = search("copy kernel1");
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits[0].path, "kernels/copy_sm90.cu");
  EXPECT_FALSE(index_->search({"   ;; ", 5, {}}).ok());
}

TEST_F(IndexTest, CollapsesHitsPerFile) {
  ingest();
  auto hits = search("tma copy", {.kind = "code"});
  ASSERT_EQ(hits.size(), 1u);  // three kernels, one file
  EXPECT_EQ(hits[0].file_hits, 3);
}

TEST_F(IndexTest, Filters) {
  ingest();
  auto hits = search("split k");
  ASSERT_EQ(hits.size(), 2u);
  hits = search("split k", {.language = "python"});
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].path, "kernels/gemm.py");
  EXPECT_EQ(search("split k", {.kind = "page"}).size(), 1u);
  EXPECT_EQ(search("split k", {.repo = "other"}).size(), 0u);
  // Facets: the alias H200 maps to sm90; only the TMA page and the sm90 file are sm90.
  hits = search("tma", {.arch = "H200"});
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_EQ(search("split", {.technique = "split-k"}).size(), 2u);
  EXPECT_EQ(search("split", {.op = "gemm"}).size(), 2u);
}

TEST_F(IndexTest, IncrementalReingest) {
  ingest();
  IngestStats again = ingest();
  EXPECT_EQ(again.files_unchanged, 4);
  EXPECT_EQ(again.files_indexed, 0);
  EXPECT_EQ(again.chunks_added, 0);
  write(src_ / "pages/splitk.md", "---\nid: technique/split-k\n---\n# Split-K\n\nStream-K balances work.\n");
  stdfs::remove(src_ / "kernels/gemm.py");
  IngestStats changed = ingest();
  EXPECT_EQ(changed.files_indexed, 1);
  EXPECT_EQ(changed.files_unchanged, 2);
  EXPECT_EQ(changed.files_removed, 1);
  EXPECT_TRUE(search("partial sums").empty());
  EXPECT_EQ(search("stream").size(), 1u);
  EXPECT_EQ(search("split_k_gemm").size(), 0u);
  auto stats = index_->stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->files, 3);
  EXPECT_EQ(stats->chunks_by_kind["page"], 2);
}

TEST_F(IndexTest, ShowAndGrep) {
  ingest();
  auto page = index_->show("technique/tma");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->related, (std::vector<std::string>{"hopper/mbarrier"}));
  EXPECT_EQ(page->arch, "sm90");
  EXPECT_NE(page->body.find("tensor memory accelerator"), std::string::npos);
  auto code = index_->show("demo:kernels/copy_sm90.cu:6");
  ASSERT_TRUE(code.ok()) << code.status().message();
  EXPECT_EQ(code->title, "tma_copy_kernel1");
  auto missing = index_->show("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().kind(), ErrorKind::kNotFound);
  auto g = index_->grep("tma_copy_kernel[12]", {}, 10);
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->size(), 2u);
  EXPECT_EQ((*g)[0].line, 6);
  EXPECT_FALSE(index_->grep("(", {}, 10).ok());
}

TEST_F(IndexTest, AliasIdsAndMalformedFiles) {
  write(src_ / "pages/bad.md", "---\nid: x\nnot yaml\n---\n");
  write(src_ / "pages/bank.md",
        "---\nid: diagnosis/bank-conflicts\naliases: [diagnosis/shared-bank-conflicts]\n---\n# Bank conflicts\ntext\n");
  IngestStats st = ingest();
  EXPECT_EQ(st.files_failed, 1);  // skipped with a warning, the rest is indexed
  EXPECT_EQ(st.files_indexed, 5);
  auto p = index_->show("diagnosis/shared-bank-conflicts");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->id, "diagnosis/bank-conflicts");
}

TEST_F(IndexTest, PrRecordsAndGitCommit) {
  write(
      dir_ / "prs.jsonl",
      R"({"repo":"o/r","number":12,"title":"Pingpong schedule","body":"KernelTmaWarpSpecializedPingpong","merge_commit":"deadbeef","changed_files":["x.cu"],"diff":""})"
      "\n");
  auto st = index_->ingest({dir_ / "prs.jsonl"}, {}, nullptr);
  ASSERT_TRUE(st.ok()) << st.status().message();
  auto hits = search("warp specialized pingpong");
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].kind, "pr");
  EXPECT_EQ(hits[0].location, "o/r@deadbeef:pr/12:1-6");
  auto again = index_->ingest({dir_ / "prs.jsonl"}, {}, nullptr);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->files_unchanged, 1);
  // A git checkout records its commit.
  stdfs::path repo = dir_ / "gitrepo";
  write(repo / "k.cu", "__global__ void k() {}\n");
  write(repo / "LICENSE", "\nBSD 3-Clause License\n");
  std::string cmd = "git -C " + repo.string() + " init -q && git -C " + repo.string() +
                    " -c user.email=a@b -c user.name=t commit -q --allow-empty -m x";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "git unavailable";
  std::string head = git_head(repo);
  EXPECT_EQ(head.size(), 40u);
  EXPECT_EQ(license_of(repo), "BSD 3-Clause License");
  ASSERT_TRUE(index_->ingest({repo}, {}, nullptr).ok());
  auto code = index_->show("gitrepo:k.cu:1");
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(code->commit, head);
  EXPECT_EQ(code->license, "BSD 3-Clause License");
}

}  // namespace
}  // namespace kda::wiki
