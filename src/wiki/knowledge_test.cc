// The authored knowledge in knowledge/ parses, indexes, and answers canonical queries.
#include <gtest/gtest.h>

#include "util/fs.h"
#include "wiki/front_matter.h"
#include "wiki/wiki.h"

namespace kda::wiki {
namespace {

namespace stdfs = std::filesystem;

const stdfs::path kKnowledge = stdfs::path(KDA_SOURCE_DIR) / "knowledge";

TEST(Knowledge, PagesHaveFrontMatterAndSubstance) {
  int pages = 0;
  for (const auto& e : stdfs::recursive_directory_iterator(kKnowledge)) {
    if (e.path().extension() != ".md" || e.path().filename() == "README.md") continue;
    auto text = fs::read_file(e.path());
    ASSERT_TRUE(text.ok());
    auto fm = parse_front_matter(*text, e.path().string());
    ASSERT_TRUE(fm.ok()) << fm.status().message();
    EXPECT_FALSE(fm->scalar("id").empty()) << e.path();
    EXPECT_FALSE(fm->scalar("type").empty()) << e.path();
    EXPECT_FALSE(fm->list("tags").empty()) << e.path();
    EXPECT_FALSE(fm->list("sources").empty()) << e.path();
    size_t words = 0;
    bool in_word = false;
    for (char c : text->substr(fm->body_offset)) {
      bool w = !std::isspace(static_cast<unsigned char>(c));
      if (w && !in_word) ++words;
      in_word = w;
    }
    EXPECT_GE(words, 280u) << e.path() << " is too thin";
    ++pages;
  }
  EXPECT_GE(pages, 30);
  auto aliases = AliasTable::load(kKnowledge / "aliases.txt");
  ASSERT_TRUE(aliases.ok()) << aliases.status().message();
  EXPECT_EQ(aliases->canonical("H200"), "sm90");
}

class KnowledgeSearch : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-wiki-knowledge");
    ASSERT_TRUE(d.ok());
    dir_ = new stdfs::path(*d);
    ::setenv(kKnowledgeDirEnv, kKnowledge.c_str(), 1);
    auto idx = open_index(*dir_ / "wiki.db");  // indexes knowledge/ on first use
    ::unsetenv(kKnowledgeDirEnv);
    ASSERT_TRUE(idx.ok()) << idx.status().message();
    index_ = idx->release();
  }
  static void TearDownTestSuite() {
    delete index_;
    stdfs::remove_all(*dir_);
    delete dir_;
  }
  static int rank_of(const std::string& query, const std::string& id) {
    auto hits = index_->search({query, 5, {}});
    EXPECT_TRUE(hits.ok()) << hits.status().message();
    if (!hits.ok()) return 0;
    for (size_t i = 0; i < hits->size(); ++i)
      if ((*hits)[i].id == id) return static_cast<int>(i) + 1;
    return 0;
  }
  static stdfs::path* dir_;
  static Index* index_;
};
stdfs::path* KnowledgeSearch::dir_ = nullptr;
Index* KnowledgeSearch::index_ = nullptr;

TEST_F(KnowledgeSearch, CanonicalQueriesFindTheirPage) {
  EXPECT_GT(rank_of("TMA bulk tensor copy", "hopper/tma"), 0);
  EXPECT_GT(rank_of("wgmma warpgroup", "hopper/wgmma"), 0);
  EXPECT_GT(rank_of("shared memory bank conflicts", "diagnosis/bank-conflicts"), 0);
  EXPECT_GT(rank_of("uncoalesced global loads", "diagnosis/memory-bound-uncoalesced"), 0);
  EXPECT_GT(rank_of("gated delta net decode", "kernels/gdn_decode"), 0);
  EXPECT_GT(rank_of("DSA top-k indexer", "kernels/dsa_topk_indexer"), 0);
  EXPECT_GT(rank_of("setmaxnreg register reallocation", "hopper/setmaxnreg"), 0);
}

// The ncu skill (src/ncu/analyze.cc) and the brief link to these ids; each must open a page, directly or
// through a page's `aliases`.
TEST_F(KnowledgeSearch, LinkedIdsResolve) {
  for (const char* id : {"diagnosis/compute-bound",
                         "diagnosis/latency-bound",
                         "diagnosis/load-imbalance",
                         "diagnosis/low-occupancy",
                         "diagnosis/memory-bound",
                         "diagnosis/memory-bound-uncoalesced",
                         "diagnosis/register-spills",
                         "diagnosis/shared-bank-conflicts",
                         "diagnosis/tail-effect",
                         "diagnosis/bank-conflicts",
                         "diagnosis/launch-bound",
                         "diagnosis/low-occupancy-registers",
                         "diagnosis/long-scoreboard-stalls",
                         "technique/async-copy-pipelining",
                         "technique/coalesced-access",
                         "technique/grid-sizing",
                         "technique/instruction-level-parallelism",
                         "technique/kernel-fusion",
                         "technique/launch-bounds",
                         "technique/occupancy-tuning",
                         "technique/persistent-kernels",
                         "technique/shared-memory-padding",
                         "technique/shared-memory-swizzle",
                         "technique/tensor-cores-wgmma",
                         "technique/vectorized-access",
                         "kernels/dsa_topk_indexer",
                         "kernels/dsa_sparse_attention",
                         "kernels/gdn_decode",
                         "kernels/gdn_prefill",
                         "kernels/moe_fp8_block_scale"}) {
    auto page = index_->show(id);
    EXPECT_TRUE(page.ok()) << id << ": " << page.status().message();
  }
}

TEST_F(KnowledgeSearch, ArchFilterUsesAliases) {
  auto hits = index_->search({"warp specialization producer consumer", 5, {.arch = "H200"}});
  ASSERT_TRUE(hits.ok());
  ASSERT_FALSE(hits->empty());
  EXPECT_EQ((*hits)[0].id, "technique/warp-specialization");
}

}  // namespace
}  // namespace kda::wiki
