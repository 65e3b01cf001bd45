#include <gtest/gtest.h>

#include "wiki/aliases.h"
#include "wiki/query.h"
#include "wiki/tokenizer.h"

namespace kda::wiki {
namespace {

std::vector<std::string> texts(std::string_view s) {
  std::vector<std::string> v;
  for (const auto& t : terms_of(s)) v.push_back(t.colocated ? "+" + t.text : t.text);
  return v;
}

TEST(Tokenizer, SplitsPtxMnemonicAndKeepsWhole) {
  EXPECT_EQ(texts("cp.async.bulk.tensor.2d.shared::cluster"),
            (std::vector<std::string>{"cp", "+cp_async_bulk_tensor_2d_shared_cluster", "+2d", "async", "bulk", "tensor",
                                      "2", "d", "shared", "cluster"}));
}

TEST(Tokenizer, SplitsCamelCase) {
  EXPECT_EQ(identifier_parts("KernelTmaWarpSpecializedPingpong"),
            (std::vector<std::string>{"kernel", "tma", "warp", "specialized", "pingpong"}));
  EXPECT_EQ(whole_term("KernelTmaWarpSpecializedPingpong"), "kerneltmawarpspecializedpingpong");
  EXPECT_EQ(identifier_parts("HTTPServer"), (std::vector<std::string>{"http", "server"}));
  EXPECT_EQ(identifier_parts("sm_90a"), (std::vector<std::string>{"sm", "90", "a"}));
  EXPECT_EQ(identifier_parts("e4m3"), (std::vector<std::string>{"e", "4", "m", "3"}));
}

TEST(Tokenizer, UnderscoresScopesAndPunctuation) {
  EXPECT_EQ(texts("__global__ void gdn_decode(int)"),
            (std::vector<std::string>{"global", "void", "gdn", "+gdn_decode", "decode", "int"}));
  EXPECT_EQ(texts("cute::TMA end."), (std::vector<std::string>{"cute", "+cute_tma", "tma", "end"}));
  // Offsets point at the word in the input.
  auto t = terms_of("  fooBar");
  ASSERT_FALSE(t.empty());
  EXPECT_EQ(t[0].begin, 2u);
  EXPECT_EQ(t[0].end, 8u);
}

TEST(Tokenizer, PluralsAreStemmedWithTheOriginalColocated) {
  EXPECT_EQ(texts("bank conflicts"), (std::vector<std::string>{"bank", "conflict", "+conflicts"}));
  EXPECT_EQ(light_stem("entries"), "entry");
  EXPECT_EQ(light_stem("access"), "access");
  EXPECT_EQ(light_stem("bus"), "bus");
  EXPECT_EQ(light_stem("sms"), "sms");
}

TEST(Aliases, ParsesAndCanonicalises) {
  auto t = AliasTable::parse("# c\nsm90: Hopper, H200, sm_90a\ntma: cp.async.bulk, tensor memory accelerator\n", "x");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->canonical("H200"), "sm90");
  EXPECT_EQ(t->canonical("SM_90A"), "sm90");
  EXPECT_EQ(t->canonical("gemm"), "gemm");
  EXPECT_EQ(t->max_parts(), 3u);
  EXPECT_FALSE(AliasTable::parse("no colon here\n", "x").ok());
}

TEST(Aliases, BuiltinHasTheRequiredGroups) {
  const auto& b = AliasTable::builtin();
  EXPECT_EQ(b.canonical("Blackwell"), "sm100");
  EXPECT_EQ(b.canonical("tcgen05"), "umma");
  EXPECT_EQ(b.canonical("gated delta net"), "gdn");
  EXPECT_EQ(b.canonical("warpgroup mma"), "wgmma");
}

TEST(Query, ExpandsAliasesAndIdentifiers) {
  auto t = AliasTable::parse("sm90: hopper, h200\ntma: cp.async.bulk\ngdn: gated delta net\n", "x");
  ASSERT_TRUE(t.ok());
  QueryPlan p = build_query("how to use TMA on H200", *t);
  ASSERT_EQ(p.groups.size(), 2u);  // "how", "to", "use", "on" are stop words
  // The typed word matches whole or by parts; other alias members only by their whole term.
  EXPECT_EQ(p.groups[0].expr, "(\"tma\" OR \"cp_async_bulk\")");
  EXPECT_EQ(p.groups[1].expr, "(\"sm90\" OR \"hopper\" OR (\"h200\" OR \"h 200\"))");
  EXPECT_EQ(p.strict, p.groups[0].expr + " AND " + p.groups[1].expr);
  QueryPlan g = build_query("gated delta net decode", *t);
  ASSERT_EQ(g.groups.size(), 2u);
  EXPECT_EQ(g.groups[0].members[0], "gdn");
  EXPECT_EQ(g.groups[1].expr, "\"decode\"");
  QueryPlan w = build_query("KernelTmaWarpSpecialized", *t);
  ASSERT_EQ(w.groups.size(), 1u);
  EXPECT_EQ(w.groups[0].expr, "(\"kerneltmawarpspecialized\" OR \"kernel tma warp specialized\")");
}

}  // namespace
}  // namespace kda::wiki
