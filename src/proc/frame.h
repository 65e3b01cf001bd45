// A small framed protocol over pipe or socket fds (evaluator <-> runner).
//
// Wire format, little-endian: u32 magic 'KDAF' (0x4641444B), u32 type, u64 payload length,
// then the payload bytes. Types are the caller's; the protocol only moves bytes.
//
// A read that times out or fails in the middle of a frame leaves the stream out of sync: treat
// any error as the end of the channel (kill the peer).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "proc/deadline.h"
#include "util/status.h"

namespace kda::proc {

inline constexpr uint32_t kFrameMagic = 0x4641444B;  // "KDAF" in memory order
inline constexpr size_t kFrameHeaderBytes = 16;
inline constexpr uint64_t kDefaultMaxFrameBytes = uint64_t{1} << 32;  // 4 GiB

struct Frame {
  uint32_t type = 0;
  std::string payload;
};

enum class FrameError {
  kNone,
  kTimeout,    // the deadline passed before a whole frame arrived
  kEof,        // the peer closed (or died): before a frame, or in the middle of one
  kMalformed,  // bad magic
  kTooLarge,   // declared length exceeds max_bytes (nothing allocated)
  kIo,         // read(2)/poll(2) failed
};

const char* frame_error_name(FrameError e);

// The outcome of read_frame: a frame, or an error kind with a message.
struct FrameResult {
  std::optional<Frame> frame;
  FrameError error = FrameError::kNone;
  std::string message;

  bool ok() const { return frame.has_value(); }
  // kTimeout -> kFailed("timeout: ..."); kEof/kIo -> kIo; kMalformed/kTooLarge -> kBadInput.
  Status status() const;
};

// Writes one frame. Handles partial writes and EINTR. A closed peer (EPIPE) is an kIo error, not a
// SIGPIPE: the signal is blocked for this thread during the write and a pending one is consumed.
// With a finite deadline the fd is switched to non-blocking for the duration of the call and the
// write fails with kFailed("timeout ...") if the peer does not drain the frame in time.
Status write_frame(int fd, uint32_t type, std::string_view payload, Deadline deadline = Deadline::never());

// Reads one frame, waiting at most until `deadline` (poll), refusing frames longer than max_bytes.
FrameResult read_frame(int fd, Deadline deadline = Deadline::never(), uint64_t max_bytes = kDefaultMaxFrameBytes);

}  // namespace kda::proc
