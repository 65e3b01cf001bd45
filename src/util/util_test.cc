#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "util/diagnostics.h"
#include "util/fs.h"
#include "util/json_text.h"
#include "util/parallel.h"
#include "util/random.h"
#include "util/sha256.h"
#include "util/status.h"
#include "util/strings.h"

namespace kda {
namespace {

Result<int> half(int x) {
  if (x % 2 != 0) return Status::bad_input("odd");
  return x / 2;
}

Result<int> quarter(int x) {
  KDA_ASSIGN_OR_RETURN(int h, half(x));
  return half(h);
}

TEST(Parallel, RangesCoverEverythingOnceAligned) {
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{4095}, uint64_t{1} << 20, (uint64_t{1} << 26) + 13}) {
    auto r = util::split_ranges(n, 1 << 16, 4096);
    ASSERT_FALSE(r.empty());
    EXPECT_EQ(r.front().first, 0u);
    EXPECT_EQ(r.back().second, n);
    for (size_t k = 0; k + 1 < r.size(); ++k) {
      EXPECT_EQ(r[k].second, r[k + 1].first);
      EXPECT_EQ(r[k].second % 4096, 0u) << n;
    }
    if (n < (1 << 17)) {
      EXPECT_EQ(r.size(), 1u) << n;
    }
  }
  std::vector<uint8_t> seen((uint64_t{1} << 22) + 7, 0);
  util::run_ranges(util::split_ranges(seen.size(), 1 << 12), [&](size_t, uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) ++seen[i];
  });
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << i;
}

TEST(JsonText, NestingDepthCountsBracketsOutsideStringsOnly) {
  EXPECT_EQ(util::json_nesting_depth("3"), 0);
  EXPECT_EQ(util::json_nesting_depth(R"({"a": [1, {"b": []}]})"), 4);
  EXPECT_EQ(util::json_nesting_depth(R"({"a": "[[[{{{"})"), 1);            // brackets in a string
  EXPECT_EQ(util::json_nesting_depth(R"({"a": "\"[[[[", "b": [1]})"), 2);  // an escaped quote does not end it
  EXPECT_EQ(util::json_nesting_depth(std::string(1000, '[') + std::string(1000, ']')), 1000);
}

TEST(Strings, Utf8HelpersKeepWholeCharacters) {
  const std::string e_acute = "caf\xc3\xa9";  // "café": the last character is two bytes
  EXPECT_EQ(util::utf8_cut(e_acute, 4), 3u);  // not inside the two-byte sequence
  EXPECT_EQ(util::utf8_cut(e_acute, 5), 5u);
  EXPECT_EQ(util::utf8_cut(e_acute, 99), 5u);
  EXPECT_EQ(util::valid_utf8(e_acute), e_acute);
  EXPECT_EQ(util::valid_utf8("a\xff"
                             "b"),
            "a?b");                                                     // not a lead byte
  EXPECT_EQ(util::valid_utf8("\xc0\xaf"), "??");                        // overlong two-byte form
  EXPECT_EQ(util::valid_utf8("ok\xe2\x82"), "ok??");                    // truncated three-byte sequence
  EXPECT_EQ(util::valid_utf8("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");  // four bytes, kept
}

TEST(Strings, SplitListTrimsAndDropsEmptyItems) {
  using V = std::vector<std::string>;
  EXPECT_EQ(util::split_list("a,b , c"), (V{"a", "b", "c"}));
  EXPECT_EQ(util::split_list(",a,,\tb ,"), (V{"a", "b"}));
  EXPECT_EQ(util::split_list(""), V{});
  EXPECT_EQ(util::split_list(" , "), V{});
  EXPECT_EQ(util::split_list("x:y;z", ';'), (V{"x:y", "z"}));
  EXPECT_EQ(util::trim_blanks("  q r \t"), "q r");
}

TEST(Status, ResultPropagates) {
  EXPECT_EQ(*quarter(8), 2);
  auto r = quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput);
  EXPECT_EQ(r.status().with_context("x").message(), "x: odd");
}

// `*f()` on a temporary Result is the value moved out, so `for (auto& x : *f())` iterates a value the
// loop keeps alive, not a reference into the Result destroyed at the end of the range expression.
TEST(Status, DereferencingATemporaryResultYieldsItsValue) {
  using Words = std::vector<std::string>;
  static_assert(std::is_same_v<decltype(*std::declval<Result<Words>>()), Words>);
  static_assert(std::is_same_v<decltype(*std::declval<Result<Words>&>()), Words&>);
  auto words = []() -> Result<Words> { return Words{"alpha", "beta", std::string(64, 'g')}; };
  std::string joined;
  for (const auto& w : *words()) joined += w + ",";
  EXPECT_EQ(joined, "alpha,beta," + std::string(64, 'g') + ",");
  Result<std::unique_ptr<int>> owned = std::make_unique<int>(7);
  std::unique_ptr<int> moved = *std::move(owned);  // a move-only value moves out
  EXPECT_EQ(*moved, 7);
}

TEST(Random, HexOfTheAskedLengthAndNeverTheSameTwice) {
  const std::string a = util::random_hex(32), b = util::random_hex(32);
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
  EXPECT_EQ(util::random_hex(0), "");
}

TEST(Strings, ShellQuoteKeepsEveryCharacterLiteral) {
  EXPECT_EQ(util::shell_quote("plain"), "'plain'");
  EXPECT_EQ(util::shell_quote("it's $HOME"), "'it'\\''s $HOME'");
  EXPECT_EQ(util::shell_quote(""), "''");
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_NE(Sha256().update_field("ab").update_field("c").hex_digest(),
            Sha256().update_field("a").update_field("bc").hex_digest());
}

TEST(Fs, LexicallyCleanAndIsWithin) {
  EXPECT_EQ(fs::lexically_clean("/a/b/../c/"), std::filesystem::path("/a/c"));
  EXPECT_EQ(fs::lexically_clean("a/./b"), std::filesystem::path("a/b"));
  EXPECT_TRUE(fs::is_within("/w/src/k.cu", "/w"));
  EXPECT_TRUE(fs::is_within("/w", "/w"));
  EXPECT_FALSE(fs::is_within("/work", "/w"));  // a prefix of the name is not a parent
  EXPECT_FALSE(fs::is_within("/", "/w"));
  EXPECT_FALSE(fs::is_within("/x/w", "/w"));
}

TEST(Fs, AtomicWriteAndRead) {
  auto dir = fs::make_temp_dir(std::filesystem::temp_directory_path(), "kda-util-test");
  ASSERT_TRUE(dir.ok());
  auto file = *dir / "a.txt";
  ASSERT_TRUE(fs::write_file_atomic(file, "one").ok());
  ASSERT_TRUE(fs::write_file_atomic(file, "two").ok());
  EXPECT_EQ(*fs::read_file(file), "two");
  EXPECT_EQ(fs::read_file(*dir / "missing").status().kind(), ErrorKind::kNotFound);
  EXPECT_EQ(fs::read_file(*dir).status().kind(), ErrorKind::kBadInput);
  std::filesystem::remove_all(*dir);
}

TEST(Diagnostics, Formats) {
  Diagnostic d{"w.jsonl", 3, "/workload/inputs/x", "unknown input"};
  EXPECT_EQ(d.to_string(), "w.jsonl:3: /workload/inputs/x: unknown input");
  EXPECT_EQ(d.to_json()["line"], 3);
  EXPECT_EQ(json_pointer_token("a/b~c"), "a~1b~0c");
}

}  // namespace
}  // namespace kda
