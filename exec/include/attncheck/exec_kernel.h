// Exec kernels: an attention kernel in any language, run as a persistent child process that speaks the exec
// protocol (spec/EXEC_PROTOCOL.md) on its stdin/stdout and exchanges tensors as .npy files. An ExecKernel starts
// the command, performs the handshake and presents each kernel the child offers as an ordinary attncheck_kernel
// (the ABI of spec/SPEC.md §3), so every check that takes a plugin kernel takes an exec kernel too. A call with
// ABI 1.2 features (params->features, params->args) reaches the child as spec/EXEC_PROTOCOL.md §4.1 says — tokens
// and .npy files — only when the kernel's hello declares those features; any other is ATTNCHECK_UNSUPPORTED without
// the child.
//
// Example:
//   attncheck::ExecKernel exec("python3 examples/exec/numpy_kernel.py");   // throws ExecError
//   const attncheck_kernel &k = exec.find("numpy");
//   attncheck::CallResult r = attncheck::call_forward(k, problem, out, &lse); // r.message on a non-OK status
#pragma once

#include "attncheck/kernel_abi.h"
#include "attncheck/shell_quote.h"  // shell_quote, for COMMAND strings

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace attncheck {

/// A child that cannot be started or breaks the protocol at start-up; what() is one line saying what is wrong
/// and what to do.
struct ExecError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The exec protocol version this attncheck speaks (the hello's `attncheck-exec <version>`).
inline constexpr int kExecProtocolVersion = 1;

struct ExecOptions {
  /// From starting the command to its `ready` line (importing NumPy or a framework counts).
  std::chrono::milliseconds start_timeout{30'000};
  /// From sending a request to its answer line (the same default as `attncheck check --timeout`).
  std::chrono::milliseconds call_timeout{10'000};
  /// The same for the first call of each (request, dtype, mask, features, input shapes): a kernel behind a JIT
  /// compiler (XLA, torch.compile, Triton autotuning) compiles then. Used when longer than call_timeout.
  std::chrono::milliseconds first_call_timeout{60'000};
  /// Receives each line the child writes to stderr (without the newline). Empty: lines go to std::cerr with the
  /// prefix "[exec] ". The last lines are kept for error messages either way.
  std::function<void(std::string_view line)> on_stderr;
  /// Parent of the exchange directory; empty: $TMPDIR, else /tmp.
  std::string temp_root;
  /// Memory the child (and each process it starts) may write, in MiB: its data segment (RLIMIT_DATA, set by the
  /// shell's `ulimit -d` before the command runs — the heap, anonymous and other private writable mappings, thread
  /// stacks), not its address space: a framework's mapped libraries and PROT_NONE reservations (a CUDA build of
  /// torch maps gigabytes even on the CPU) do not count. 0 = no limit. A kernel past it sees its allocations fail.
  std::uint64_t memory_limit_mib = 0;
};

class ExecKernel {
 public:
  /// Starts `/bin/sh -c command` and reads its hello. Throws ExecError (command not found, exited, no or bad hello
  /// within start_timeout, no free registry slot, temp directory not creatable).
  explicit ExecKernel(std::string command, ExecOptions options = {});
  /// Sends `quit`, waits briefly, then stops the child's process group; removes the exchange directory. The
  /// kernels() structs stay callable but every call then fails with ATTNCHECK_ERROR.
  ~ExecKernel();
  ExecKernel(const ExecKernel &) = delete;
  ExecKernel &operator=(const ExecKernel &) = delete;

  /// The kernels the child announced, as ABI kernels (backward is NULL for a forward-only kernel). Calls are
  /// serialized: one child answers one request at a time.
  std::span<const attncheck_kernel> kernels() const;
  /// The kernel named `name`; throws ExecError listing the names there are.
  const attncheck_kernel &find(std::string_view name) const;
  /// The contract kernel `index` declares in the hello: its `key=value` tokens, space-separated ("" when none);
  /// validated at start (an invalid one is an ExecError).
  const std::string &contract(std::size_t index) const;
  const std::string &command() const;
  /// How many times the child has been started (1 unless a call timed out or broke the protocol).
  int starts() const;
  /// Process id of the running child, or -1 when none runs.
  long pid() const;

  /// Wall time of the calls that answered, split into first calls per shape (compilation, for a JIT kernel) and
  /// the rest.
  struct CallTimes {
    int first_calls = 0, other_calls = 0;
    double first_seconds = 0, other_seconds = 0;
    CallTimes &operator+=(const CallTimes &o) {  // several kernels' (--jobs workers')
      first_calls += o.first_calls, other_calls += o.other_calls;
      first_seconds += o.first_seconds, other_seconds += o.other_seconds;
      return *this;
    }
  };
  CallTimes call_times() const;

  struct State;  ///< the child, its pipes and the registry slots (exec_kernel.cpp)

 private:
  std::shared_ptr<State> state_;
};


}  // namespace attncheck
