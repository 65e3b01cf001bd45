#include "proc/frame.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "proc/unique_fd.h"

namespace kda::proc {
namespace {

using std::chrono::milliseconds;

TEST(Frame, RoundTripOverPipe) {
  auto p = make_pipe();
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(write_frame(p->write.get(), 7, "hello").ok());
  ASSERT_TRUE(write_frame(p->write.get(), 9, "").ok());
  std::string binary("a\0b\xff", 4);
  ASSERT_TRUE(write_frame(p->write.get(), 0xFFFFFFFF, binary).ok());
  auto a = read_frame(p->read.get(), Deadline::after_seconds(5));
  ASSERT_TRUE(a.ok()) << a.message;
  EXPECT_EQ(a.frame->type, 7u);
  EXPECT_EQ(a.frame->payload, "hello");
  auto b = read_frame(p->read.get(), Deadline::after_seconds(5));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.frame->type, 9u);
  EXPECT_EQ(b.frame->payload, "");
  auto c = read_frame(p->read.get(), Deadline::after_seconds(5));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.frame->type, 0xFFFFFFFFu);
  EXPECT_EQ(c.frame->payload, binary);
}

TEST(Frame, WireFormatIsLittleEndian) {
  auto p = make_pipe();
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(write_frame(p->write.get(), 0x01020304, "xyz").ok());
  unsigned char buf[19];
  ASSERT_EQ(::read(p->read.get(), buf, sizeof buf), 19);
  const unsigned char expect[16] = {'K', 'D', 'A', 'F', 4, 3, 2, 1, 3, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(std::memcmp(buf, expect, 16), 0);
}

TEST(Frame, LargePayload64MiB) {
  auto sp = make_socket_pair();
  ASSERT_TRUE(sp.ok());
  std::string big(64u << 20, '\0');
  for (size_t i = 0; i < big.size(); i += 4093) big[i] = static_cast<char>(i * 31);
  Status ws;
  std::thread writer([&] { ws = write_frame(sp->first.get(), 1, big); });
  auto r = read_frame(sp->second.get(), Deadline::after_seconds(60));
  writer.join();
  ASSERT_TRUE(ws.ok()) << ws.message();
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.frame->payload.size(), big.size());
  EXPECT_TRUE(r.frame->payload == big);
}

TEST(Frame, ByteByByteWriterStillYieldsOneFrame) {
  auto p = make_pipe();
  ASSERT_TRUE(p.ok());
  auto other = make_pipe();
  ASSERT_TRUE(write_frame(other->write.get(), 5, "partial").ok());
  char raw[23];
  ASSERT_EQ(::read(other->read.get(), raw, sizeof raw), 23);
  std::thread writer([&] {
    for (char ch : raw) {
      ASSERT_EQ(::write(p->write.get(), &ch, 1), 1);
      std::this_thread::sleep_for(milliseconds(1));
    }
  });
  auto r = read_frame(p->read.get(), Deadline::after_seconds(10));
  writer.join();
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.frame->payload, "partial");
}

TEST(Frame, TimeoutWhenNothingArrives) {
  auto p = make_pipe();
  ASSERT_TRUE(p.ok());
  auto start = std::chrono::steady_clock::now();
  auto r = read_frame(p->read.get(), Deadline::after(milliseconds(150)));
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error, FrameError::kTimeout);
  EXPECT_EQ(r.status().kind(), ErrorKind::kFailed);
  EXPECT_GE(took, milliseconds(140));
  EXPECT_LT(took, milliseconds(5000));
}

TEST(Frame, TimeoutInTheMiddleOfAFrame) {
  auto p = make_pipe();
  ASSERT_TRUE(p.ok());
  unsigned char header[16] = {'K', 'D', 'A', 'F', 1, 0, 0, 0, 100, 0, 0, 0, 0, 0, 0, 0};
  ASSERT_EQ(::write(p->write.get(), header, 16), 16);
  ASSERT_EQ(::write(p->write.get(), "0123456789", 10), 10);
  auto r = read_frame(p->read.get(), Deadline::after(milliseconds(100)));
  EXPECT_EQ(r.error, FrameError::kTimeout);
  EXPECT_NE(r.message.find("10 of 100"), std::string::npos) << r.message;
}

TEST(Frame, CleanEofBetweenFrames) {
  auto p = make_pipe();
  ASSERT_TRUE(p.ok());
  p->write.reset();
  auto r = read_frame(p->read.get(), Deadline::after_seconds(5));
  EXPECT_EQ(r.error, FrameError::kEof);
  EXPECT_EQ(r.message, "peer closed the channel");
  EXPECT_EQ(r.status().kind(), ErrorKind::kIo);
}

TEST(Frame, PeerClosesMidFrame) {
  auto p = make_pipe();
  ASSERT_TRUE(p.ok());
  unsigned char header[16] = {'K', 'D', 'A', 'F', 1, 0, 0, 0, 100, 0, 0, 0, 0, 0, 0, 0};
  ASSERT_EQ(::write(p->write.get(), header, 16), 16);
  ASSERT_EQ(::write(p->write.get(), "0123456789", 10), 10);
  p->write.reset();
  auto r = read_frame(p->read.get(), Deadline::after_seconds(5));
  EXPECT_EQ(r.error, FrameError::kEof);
  EXPECT_NE(r.message.find("in a frame"), std::string::npos) << r.message;

  auto q = make_pipe();
  ASSERT_EQ(::write(q->write.get(), "KDA", 3), 3);
  q->write.reset();
  auto h = read_frame(q->read.get(), Deadline::after_seconds(5));
  EXPECT_EQ(h.error, FrameError::kEof);
  EXPECT_NE(h.message.find("header"), std::string::npos);
}

TEST(Frame, HugeAnnouncedFrameThatNeverArrives) {
  auto p = make_pipe();
  ASSERT_TRUE(p.ok());
  unsigned char header[16] = {'K', 'D', 'A', 'F', 1, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0};  // 1 GiB
  ASSERT_EQ(::write(p->write.get(), header, 16), 16);
  ASSERT_EQ(::write(p->write.get(), "0123456789", 10), 10);
  p->write.reset();
  auto r = read_frame(p->read.get(), Deadline::after_seconds(5), uint64_t{2} << 30);
  EXPECT_EQ(r.error, FrameError::kEof);
  EXPECT_NE(r.message.find("10 of 1073741824"), std::string::npos) << r.message;
}

TEST(Frame, GarbageMagicIsMalformed) {
  auto p = make_pipe();
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(::write(p->write.get(), "GET / HTTP/1.1\r\n", 16), 16);
  auto r = read_frame(p->read.get(), Deadline::after_seconds(5));
  EXPECT_EQ(r.error, FrameError::kMalformed);
  EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput);
}

TEST(Frame, OversizedFrameIsRefusedWithoutAllocating) {
  auto p = make_pipe();
  ASSERT_TRUE(p.ok());
  unsigned char header[16] = {'K', 'D', 'A', 'F', 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0};  // 2^40 bytes
  ASSERT_EQ(::write(p->write.get(), header, 16), 16);
  auto r = read_frame(p->read.get(), Deadline::after_seconds(5), 1 << 20);
  EXPECT_EQ(r.error, FrameError::kTooLarge);
}

TEST(Frame, WriteToClosedPeerIsAnErrorNotSigpipe) {
  auto p = make_pipe();
  ASSERT_TRUE(p.ok());
  p->read.reset();
  // SIGPIPE at its default would kill this test process.
  ASSERT_EQ(::signal(SIGPIPE, SIG_DFL), ::signal(SIGPIPE, SIG_DFL));
  Status s = write_frame(p->write.get(), 1, "nobody listens");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.kind(), ErrorKind::kIo);
  sigset_t pending;
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0) << "SIGPIPE left pending";
}

TEST(Frame, WriteDeadlineWhenPeerDoesNotRead) {
  auto p = make_pipe();
  ASSERT_TRUE(p.ok());
  std::string big(8u << 20, 'x');  // far more than a pipe buffer
  auto start = std::chrono::steady_clock::now();
  Status s = write_frame(p->write.get(), 1, big, Deadline::after(milliseconds(150)));
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.kind(), ErrorKind::kFailed);
  EXPECT_NE(s.message().find("timeout"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace kda::proc
