#include "llm/sse_parser.h"

#include <gtest/gtest.h>

namespace kda::llm {
namespace {

std::vector<SseEvent> feed_in_pieces(const std::string& text, size_t piece) {
  SseParser p;
  std::vector<SseEvent> all;
  for (size_t i = 0; i < text.size(); i += piece) {
    for (auto& e : p.feed(std::string_view(text).substr(i, piece))) all.push_back(std::move(e));
  }
  return all;
}

TEST(SseParser, EventAndData) {
  SseParser p;
  auto evs = p.feed("event: ping\ndata: {\"a\":1}\n\n");
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].event, "ping");
  EXPECT_EQ(evs[0].data, "{\"a\":1}");
}

TEST(SseParser, MultiLineDataJoinedWithNewline) {
  SseParser p;
  auto evs = p.feed("data: one\ndata:two\ndata:  three\n\n");
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].data, "one\ntwo\n three");  // only one leading space is stripped
  EXPECT_EQ(evs[0].event, "");
}

TEST(SseParser, CommentsAndUnknownFieldsIgnored) {
  SseParser p;
  auto evs = p.feed(": keep-alive\nretry: 100\nfoo: bar\nid: 7\ndata: x\n\n: another\n\n");
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].data, "x");
  EXPECT_EQ(evs[0].id, "7");
}

TEST(SseParser, CrLfAndLoneCr) {
  SseParser p;
  auto evs = p.feed("event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\r");
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs[0].event, "a");
  EXPECT_EQ(evs[0].data, "1");
  EXPECT_EQ(evs[1].event, "b");
  EXPECT_EQ(evs[1].data, "2");
}

TEST(SseParser, CrLfSplitAcrossChunks) {
  SseParser p;
  auto a = p.feed("data: 1\r");
  auto b = p.feed("\n\r");
  auto c = p.feed("\ndata: 2\r\n\r\n");
  EXPECT_TRUE(a.empty());
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].data, "1");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].data, "2");
}

TEST(SseParser, SplitAnywhereGivesSameEvents) {
  const std::string text =
      "event: message_start\r\ndata: {\"type\":\"message_start\"}\r\n\r\n: c\n"
      "event: content_block_delta\ndata: {\"d\":\"h\\u00e9llo\"}\n\nevent: x\ndata: a\ndata: b\n\n";
  auto whole = feed_in_pieces(text, text.size());
  ASSERT_EQ(whole.size(), 3u);
  for (size_t piece = 1; piece < 12; ++piece) {
    auto split = feed_in_pieces(text, piece);
    ASSERT_EQ(split.size(), whole.size()) << "piece " << piece;
    for (size_t i = 0; i < whole.size(); ++i) {
      EXPECT_EQ(split[i].event, whole[i].event);
      EXPECT_EQ(split[i].data, whole[i].data);
    }
  }
}

TEST(SseParser, EventWithoutDataNotDispatched) {
  SseParser p;
  EXPECT_TRUE(p.feed("event: lonely\n\n").empty());
  auto evs = p.feed("data: y\n\n");
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].event, "");  // the event name does not leak into the next event
}

TEST(SseParser, UnterminatedEventIsDiscardedAndReported) {
  SseParser p;
  EXPECT_TRUE(p.feed("event: message_stop\ndata: {}").empty());
  EXPECT_TRUE(p.finish());
  SseParser q;
  q.feed("data: {}\n\n");
  EXPECT_FALSE(q.finish());
}

TEST(SseParser, FieldWithoutColonAndEmptyData) {
  SseParser p;
  auto evs = p.feed("data\n\ndata:\n\n");
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs[0].data, "");
  EXPECT_EQ(evs[1].data, "");
}

TEST(SseParser, ByteOrderMarkSkipped) {
  SseParser p;
  auto evs = p.feed(
      "\xEF\xBB\xBF"
      "data: z\n\n");
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].data, "z");
}

}  // namespace
}  // namespace kda::llm
