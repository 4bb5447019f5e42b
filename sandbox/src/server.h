// The fork server: a child process that dlopen()s one plugin and runs its kernels on request, and the parent's
// handle on it (start, call with timeout, restart after a crash, stop).
#pragma once

#include "attncheck/sandbox.h"
#include "staging.h"
#include "wire.h"

#include <sys/types.h>

#include <string>
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
  Result crashed(const wire::Reply *note, const Staging &staging);

  std::string path_;
  SandboxOptions options_;
  std::vector<KernelDesc> kernels_;  // of the first start; a restart must load the same
  pid_t pid_ = -1;
  int sock_ = -1, memfd_ = -1;
  int starts_ = 0;
};

}  // namespace attncheck::sandbox
