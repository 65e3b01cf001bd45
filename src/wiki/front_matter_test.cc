#include <gtest/gtest.h>

#include "wiki/document.h"
#include "wiki/front_matter.h"

namespace kda::wiki {
namespace {

TEST(FrontMatter, ParsesScalarsListsAndBlocks) {
  std::string text =
      "---\n"
      "id: technique/tma\n"
      "title: \"TMA: bulk tensor copies\"\n"
      "type: technique\n"
      "tags: [arch:sm90, 'technique:tma', op:gemm]\n"
      "related:\n"
      "  - hopper/mbarrier\n"
      "  - technique/swizzling\n"
      "sources:\n"
      "  - title: PTX ISA\n"
      "    url: https://docs.nvidia.com/cuda/parallel-thread-execution/\n"
      "summary: >\n"
      "  one\n"
      "  two\n"
      "---\n"
      "# Body\n";
  auto fm = parse_front_matter(text, "p.md");
  ASSERT_TRUE(fm.ok()) << fm.status().message();
  EXPECT_TRUE(fm->present);
  EXPECT_EQ(fm->scalar("id"), "technique/tma");
  EXPECT_EQ(fm->scalar("title"), "TMA: bulk tensor copies");
  EXPECT_EQ(fm->list("tags"), (std::vector<std::string>{"arch:sm90", "technique:tma", "op:gemm"}));
  EXPECT_EQ(fm->list("related"), (std::vector<std::string>{"hopper/mbarrier", "technique/swizzling"}));
  ASSERT_EQ(fm->list("sources").size(), 1u);
  EXPECT_EQ(fm->list("sources")[0], "title: PTX ISA url: https://docs.nvidia.com/cuda/parallel-thread-execution/");
  EXPECT_EQ(fm->scalar("summary"), "one two");
  EXPECT_EQ(fm->list("type"), (std::vector<std::string>{"technique"}));
  EXPECT_EQ(text.substr(fm->body_offset), "# Body\n");
  EXPECT_EQ(fm->body_line, 16);
}

TEST(FrontMatter, AbsentAndMalformed) {
  auto none = parse_front_matter("# Title\ntext\n", "a.md");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->present);
  EXPECT_EQ(none->body_offset, 0u);
  auto unclosed = parse_front_matter("---\nid: x\n", "b.md");
  ASSERT_FALSE(unclosed.ok());
  EXPECT_NE(unclosed.status().message().find("b.md"), std::string::npos);
  auto bad = parse_front_matter("---\nid: x\njust words\n---\n", "c.md");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("c.md:3"), std::string::npos);
  EXPECT_FALSE(parse_front_matter("---\ntags: [a, b\n---\n", "d.md").ok());
}

TEST(Document, PageIsOneChunkWithMetadata) {
  auto d =
      parse_document("technique/tma.md",
                     "---\nid: technique/tma\ntype: technique\ntags: [arch:sm90]\n---\n# TMA\n\n## Why\ntext\n", "");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kind, "page");
  ASSERT_EQ(d->chunks.size(), 1u);
  EXPECT_EQ(d->chunks[0].page_id, "technique/tma");
  EXPECT_EQ(d->chunks[0].chunk.title, "TMA");
  EXPECT_EQ(d->chunks[0].chunk.start_line, 6);
  EXPECT_EQ(d->tags, (std::vector<std::string>{"arch:sm90", "type:technique"}));
}

TEST(Document, PrRecords) {
  auto recs = parse_pr_records(
      R"({"repo":"o/r","number":7,"title":"Use TMA","body":"faster","merge_commit":"abc","changed_files":["a.cu"],"diff":"+x"})"
      "\n\n",
      "prs.jsonl");
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  ASSERT_EQ(recs->size(), 1u);
  EXPECT_EQ((*recs)[0].path, "pr/7");
  EXPECT_EQ((*recs)[0].commit, "abc");
  EXPECT_NE((*recs)[0].chunks[0].chunk.body.find("a.cu"), std::string::npos);
  auto bad = parse_pr_records("{\"repo\":\"o/r\"}\n", "prs.jsonl");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("prs.jsonl:1: /number"), std::string::npos);
}

}  // namespace
}  // namespace kda::wiki
