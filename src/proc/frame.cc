#include "proc/frame.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>

namespace kda::proc {

const char* frame_error_name(FrameError e) {
  switch (e) {
    case FrameError::kNone: return "none";
    case FrameError::kTimeout: return "timeout";
    case FrameError::kEof: return "eof";
    case FrameError::kMalformed: return "malformed";
    case FrameError::kTooLarge: return "too large";
    case FrameError::kIo: return "io";
  }
  return "?";
}

Status FrameResult::status() const {
  switch (error) {
    case FrameError::kNone: return {};
    case FrameError::kTimeout: return Status::failed("timeout: " + message);
    case FrameError::kEof:
    case FrameError::kIo: return Status::io(message);
    case FrameError::kMalformed:
    case FrameError::kTooLarge: return Status::bad_input(message);
  }
  return Status::internal(message);
}

namespace {

void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Blocks SIGPIPE in this thread for its lifetime; on exit consumes a SIGPIPE our write raised.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_set_);
    sigaddset(&pipe_set_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_set_, &old_);
  }
  ~SigpipeGuard() {
    if (got_epipe_ && !was_pending_) {
      struct timespec zero = {0, 0};
      while (sigtimedwait(&pipe_set_, nullptr, &zero) < 0 && errno == EINTR) {}
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  void saw_epipe() { got_epipe_ = true; }

 private:
  sigset_t pipe_set_;
  sigset_t old_;
  bool was_pending_ = false;
  bool got_epipe_ = false;
};

// Sets O_NONBLOCK for the guard's lifetime when `enable`, restoring the old flags after.
class NonBlockGuard {
 public:
  NonBlockGuard(int fd, bool enable) : fd_(fd) {
    if (!enable) return;
    old_flags_ = ::fcntl(fd, F_GETFL);
    if (old_flags_ >= 0 && (old_flags_ & O_NONBLOCK) == 0) {
      ::fcntl(fd, F_SETFL, old_flags_ | O_NONBLOCK);
      changed_ = true;
    }
  }
  ~NonBlockGuard() {
    if (changed_) ::fcntl(fd_, F_SETFL, old_flags_);
  }

 private:
  int fd_;
  int old_flags_ = -1;
  bool changed_ = false;
};

// Waits until fd has `events` or the deadline passes. Returns 1 ready, 0 timeout, -1 error.
int wait_fd(int fd, short events, const Deadline& deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, deadline.poll_timeout_ms());
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) return 0;
    return 1;  // POLLHUP/POLLERR also count: the next read/write reports what happened
  }
}

// Reads exactly n bytes unless EOF/timeout/error. Returns kNone on success.
FrameError read_exact(int fd, char* dst, size_t n, const Deadline& deadline, size_t& got, int& err) {
  got = 0;
  while (got < n) {
    int w = wait_fd(fd, POLLIN, deadline);
    if (w == 0) return FrameError::kTimeout;
    if (w < 0) {
      err = errno;
      return FrameError::kIo;
    }
    ssize_t r = ::read(fd, dst + got, n - got);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return FrameError::kEof;
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    err = errno;
    return FrameError::kIo;
  }
  return FrameError::kNone;
}

FrameResult fail(FrameError e, std::string message) {
  FrameResult r;
  r.error = e;
  r.message = std::move(message);
  return r;
}

}  // namespace

Status write_frame(int fd, uint32_t type, std::string_view payload, Deadline deadline) {
  unsigned char header[kFrameHeaderBytes];
  put_u32(header, kFrameMagic);
  put_u32(header + 4, type);
  put_u64(header + 8, payload.size());

  SigpipeGuard sigpipe;
  NonBlockGuard nonblock(fd, !deadline.is_never());
  const size_t total = kFrameHeaderBytes + payload.size();
  size_t done = 0;
  while (done < total) {
    iovec iov[2];
    int cnt = 0;
    if (done < kFrameHeaderBytes) {
      iov[cnt++] = {header + done, kFrameHeaderBytes - done};
      if (!payload.empty()) iov[cnt++] = {const_cast<char*>(payload.data()), payload.size()};
    } else {
      size_t off = done - kFrameHeaderBytes;
      iov[cnt++] = {const_cast<char*>(payload.data()) + off, payload.size() - off};
    }
    ssize_t n = ::writev(fd, iov, cnt);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int w = wait_fd(fd, POLLOUT, deadline);
      if (w == 0)
        return Status::failed("timeout writing frame (" + std::to_string(done) + " of " + std::to_string(total) +
                              " bytes sent)");
      if (w < 0) return Status::io(std::string("poll: ") + std::strerror(errno));
      continue;
    }
    if (n < 0 && errno == EPIPE) {
      sigpipe.saw_epipe();
      return Status::io("peer closed the channel while writing a frame");
    }
    return Status::io(std::string("write frame: ") + (n < 0 ? std::strerror(errno) : "wrote nothing"));
  }
  return {};
}

FrameResult read_frame(int fd, Deadline deadline, uint64_t max_bytes) {
  unsigned char header[kFrameHeaderBytes];
  size_t got = 0;
  int err = 0;
  FrameError e = read_exact(fd, reinterpret_cast<char*>(header), kFrameHeaderBytes, deadline, got, err);
  if (e == FrameError::kEof)
    return fail(e, got == 0 ? "peer closed the channel"
                            : "peer closed the channel in a frame header (" + std::to_string(got) + " of 16 bytes)");
  if (e == FrameError::kTimeout)
    return fail(e, got == 0 ? "no frame before the deadline" : "frame header incomplete at the deadline");
  if (e == FrameError::kIo) return fail(e, std::string("read frame: ") + std::strerror(err));

  uint32_t magic = get_u32(header);
  if (magic != kFrameMagic) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "bad frame magic 0x%08x", magic);
    return fail(FrameError::kMalformed, buf);
  }
  uint32_t type = get_u32(header + 4);
  uint64_t length = get_u64(header + 8);
  if (length > max_bytes)
    return fail(FrameError::kTooLarge,
                "frame of " + std::to_string(length) + " bytes exceeds the limit of " + std::to_string(max_bytes));

  Frame frame;
  frame.type = type;
  // Grow the buffer as bytes arrive (doubling from 1 MiB), so a peer that announces a huge frame
  // and sends nothing does not make us commit that much memory.
  uint64_t have = 0;
  e = FrameError::kNone;
  while (have < length && e == FrameError::kNone) {
    uint64_t step = std::min<uint64_t>(length - have, std::max<uint64_t>(uint64_t{1} << 20, have));
    frame.payload.resize(static_cast<size_t>(have + step));
    e = read_exact(fd, frame.payload.data() + have, static_cast<size_t>(step), deadline, got, err);
    have += got;
  }
  got = static_cast<size_t>(have);
  std::string progress = std::to_string(got) + " of " + std::to_string(length) + " payload bytes";
  if (e == FrameError::kEof) return fail(e, "peer closed the channel in a frame (" + progress + ")");
  if (e == FrameError::kTimeout) return fail(e, "frame incomplete at the deadline (" + progress + ")");
  if (e == FrameError::kIo) return fail(e, std::string("read frame: ") + std::strerror(err));
  FrameResult r;
  r.frame = std::move(frame);
  return r;
}

}  // namespace kda::proc
