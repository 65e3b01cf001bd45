#include "proc/unique_fd.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kda::proc {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0 && fd_ != fd) ::close(fd_);  // close(2) errors are not actionable here
  fd_ = fd;
}

Result<Pipe> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::io(std::string("pipe2: ") + std::strerror(errno));
  Pipe p;
  p.read.reset(fds[0]);
  p.write.reset(fds[1]);
  return p;
}

Result<std::pair<UniqueFd, UniqueFd>> make_socket_pair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return Status::io(std::string("socketpair: ") + std::strerror(errno));
  return std::pair<UniqueFd, UniqueFd>(UniqueFd(fds[0]), UniqueFd(fds[1]));
}

}  // namespace kda::proc
