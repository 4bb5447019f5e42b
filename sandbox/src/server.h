// The fork server: a child process that dlopen()s one plugin and runs its kernels on request, and the parent's
// handle on it (start, call with timeout, restart after a crash, stop).
#pragma once

#include "attncheck/sandbox.h"
#include "staging.h"
#include "wire.h"

#include <sys/types.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace attncheck::sandbox {

/// A kernel as the server's plugin exports it.
struct KernelDesc {
  std::string name;
  std::uint32_t abi_version = 0;
  bool has_forward = false, has_backward = false, has_last_error = false;
  std::string contract;  ///< declared through attncheck_contracts (ABI 1.1), "" when none
};

/// "SIGSEGV (segmentation fault)".
std::string signal_name(int signo);

class Server {
 public:
  Server(std::string path, SandboxOptions options);
  ~Server();
  Server(const Server &) = delete;
  Server &operator=(const Server &) = delete;

  /// Forks a fresh child (killing a running one), which loads the plugin; returns its kernels. Throws SandboxError.
  std::vector<KernelDesc> start();
  bool running() const { return pid_ > 0; }
  int starts() const { return starts_; }

  struct Result {
    int status = ATTNCHECK_ERROR;  ///< the kernel's return when it returned
    std::string message;           ///< its last_error() for a non-OK status
    CallFault fault;               ///< set when the call did not end cleanly; status is then meaningless
  };
  /// Runs kernel `index` on `args` (q k v out lse [dout dq dk dv], then — when params.args is set, ABI 1.2 — the
  /// kMaxArgTensors tensors of *params.args at kMaxTensors …, in wire::kArgTensorNames order) in the child; restarts
  /// the child first when the previous call killed it. Never throws for what the kernel does.
  Result call(wire::Op op, int index, const attncheck_params &params, const std::vector<Arg> &args);

 private:
  void stop();          // asks the child to quit, kills it when it does not
  int reap(int grace_ms);  // waitpid with a grace period, then SIGKILL; returns the wait status
  /// SIGKILL to the server and every process the kernel started in its process group.
  void kill_group() const;
  /// The server's environment: this process's, with TMPDIR = tmpdir_ (created on first use).
  std::vector<std::string> child_environment();
  Result crashed(const wire::Reply *note, const Staging &staging);

  std::string path_;
  SandboxOptions options_;
  std::vector<KernelDesc> kernels_;  // of the first start; a restart must load the same
  pid_t pid_ = -1;
  int sock_ = -1, memfd_ = -1;
  int starts_ = 0;
  /// This side's mapping of memfd_, kept from call to call (a call's pages are then in place when staging writes
  /// them, rather than fresh ones faulted in and zeroed each time): grown to a larger call's size, shrunk back when
  /// a call needs less than a quarter of a mapping over kShmKeepBytes.
  std::byte *shm_ = nullptr;
  std::size_t shm_bytes_ = 0;
  /// memfd_ sized and mapped to hold `bytes`; nullptr (errno set) when it cannot be.
  std::byte *shared_memory(std::size_t bytes);
  void unmap_shared_memory();
  /// The kernel's private $TMPDIR: what it leaves there goes with the Server.
  std::string tmpdir_;
  /// The server's stdout and stderr, read by a thread that passes at most kMaxForwardedBytes of them (per start) to
  /// options_.on_output and drops the rest: a kernel cannot flood the gate.
  int output_fd_ = -1;
  std::thread drain_;
  std::atomic<bool> stop_drain_{false};
  void stop_draining();
};


}  // namespace attncheck::sandbox
