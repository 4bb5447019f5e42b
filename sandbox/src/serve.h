// The child side of the fork server: loads one plugin and runs its kernels on request until told to quit.
#pragma once

#include <sys/types.h>

#include <string>

namespace attncheck::sandbox {

/// Descriptors the server executable finds its socket and shared memory at.
constexpr int kServerSocketFd = 3;
constexpr int kServerMemFd = 4;

/// Sends the Hello (the plugin's kernels), then serves requests on `sock` with tensors in `memfd`; exits with
/// _exit() when the parent quits, goes away or dies (PR_SET_PDEATHSIG), never returns.
[[noreturn]] void serve(int sock, int memfd, const std::string &path, pid_t parent);

}  // namespace attncheck::sandbox
