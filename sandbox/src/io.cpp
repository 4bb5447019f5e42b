#include "io.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace attncheck::sandbox {

bool send_all(int fd, const void *buf, std::size_t n) {
  const char *p = static_cast<const char *>(buf);
  while (n > 0) {
    // MSG_NOSIGNAL: a dead child must not raise SIGPIPE in the parent.
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

Read recv_all(int fd, void *buf, std::size_t n, const Clock::time_point *deadline) {
  char *p = static_cast<char *>(buf);
  while (n > 0) {
    if (deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      if (left <= 0) return Read::timeout;
      pollfd pfd{fd, POLLIN, 0};
      const int r = poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Read::error;
      if (r == 0) return Read::timeout;
    }
    const ssize_t got = recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Read::error;
    if (got == 0) return Read::eof;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return Read::ok;
}

}  // namespace attncheck::sandbox
