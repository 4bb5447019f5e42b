// Whole-message socket I/O for both sides of the fork server.
#pragma once

#include <chrono>
#include <cstddef>

namespace attncheck::sandbox {

using Clock = std::chrono::steady_clock;

/// Sends all n bytes; false when the peer is gone (never SIGPIPE).
bool send_all(int fd, const void *buf, std::size_t n);

enum class Read { ok, eof, timeout, error };
/// Reads exactly n bytes; deadline == nullptr blocks.
Read recv_all(int fd, void *buf, std::size_t n, const Clock::time_point *deadline);

}  // namespace attncheck::sandbox
