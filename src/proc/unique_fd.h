// UniqueFd: an owned file descriptor, closed on destruction; pipes created close-on-exec.
#pragma once

#include <utility>

#include "util/status.h"

namespace kda::proc {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

// pipe2(O_CLOEXEC): neither end leaks into children unless mapped explicitly.
Result<Pipe> make_pipe();

// socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC): a bidirectional channel.
Result<std::pair<UniqueFd, UniqueFd>> make_socket_pair();

}  // namespace kda::proc
