// Isolation: every call of a plugin kernel runs in a child process, so a kernel that crashes, hangs, allocates
// without bound or writes where it must not becomes one failing call with a clear message, and the caller goes on.
//
// A SandboxedPlugin loads a plugin in a fork server (one child process per plugin, forked and exec()ing
// attncheck-sandbox-server, which dlopen()s the plugin and serves calls over a socket; tensors travel in shared
// memory; a call that kills it has the next call start a fresh one) and presents each of its kernels as an ordinary
// attncheck_kernel: the same struct, whose forward/backward run the real kernel in the child and copy the results
// back to the caller's tensors. A faulting call returns ATTNCHECK_ERROR and last_error() gives the one-line fault
// description; last_fault() gives it structured. In the child every tensor sits between PROT_NONE guard pages, its
// last byte right before the trailing guard, with the storage in front and the padding between elements filled
// with NaN (all-ones bytes), which is checked after the call. A call with ABI 1.2 features carries params->features
// and every scalar of params->args, and each args tensor in the shared memory like the others (between guard pages,
// checked like an input; forward's dropout_mask like an output, copied back): a fault in one names it ("sinks",
// "dropout_mask", …). A call without args is carried exactly as before ABI 1.2. Linux only.
#pragma once

#include "attncheck/kernel_abi.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <functional>
#include <string>
#include <string_view>

namespace attncheck::sandbox {

struct SandboxOptions {
  /// Wall-clock limit of one call (and of starting the server); the child is killed when it passes.
  std::chrono::milliseconds timeout{10'000};
  /// Memory the kernel may add to the child during a call, above what the child holds for the tensors: its data
  /// segment (RLIMIT_DATA: the heap, anonymous and private writable mappings, so thread stacks and malloc arenas a
  /// kernel creates count too), not its address space (PROT_NONE reservations and mapped files do not).
  std::uint64_t memory_limit_mib = 4096;
  /// The server executable (attncheck-sandbox-server) the forked child exec()s, so that each server is a fresh
  /// process; "" looks in $ATTNCHECK_SANDBOX_SERVER, beside the running executable, then in the build. When none is
  /// found the forked child serves without exec (fine unless this process ran OpenMP and the plugin uses it too:
  /// libgomp's thread pool does not survive fork()).
  std::string server_executable;
  /// Receives each line the kernel's process writes to stdout or stderr (without the newline), at most
  /// kMaxForwardedBytes per server start: the rest is dropped and counted in one last line. Empty: the lines go to
  /// std::cerr with the prefix "[plugin] ". Called on a thread of the sandbox's own.
  std::function<void(std::string_view line)> on_output;
};

/// What the sandbox passes on of a server's stdout and stderr per start, before it only counts what it drops.
inline constexpr std::size_t kMaxForwardedBytes = 64 * 1024;

/// What went wrong in a sandboxed call, beyond what the kernel itself returned.
struct CallFault {
  enum Kind {
    none,           ///< the call ran to its end (the kernel's status and message are in the call's result)
    signal,         ///< the child died of a signal (crash, abort, a read or write into a guard page)
    timeout,        ///< no return within SandboxOptions::timeout; the child was killed
    memory,         ///< an allocation failed under the memory limit (or the system killed the child)
    wrote_input,    ///< the kernel changed an input tensor (or its padding)
    wrote_outside,  ///< the kernel wrote an output's padding or the storage before/after it
    protocol,       ///< the server could not be (re)started, exited during the call, or answered nonsense
  };
  Kind kind = none;
  std::string message;        ///< one line, e.g. "wrote input k at element 17"; "" for none
  int signal_number = 0;      ///< the fatal signal for Kind::signal (and memory, when a signal ended the call)
  std::string tensor;         ///< the tensor the fault is attributed to, "" when none
  std::int64_t element = 0;   ///< storage offset in elements from the tensor's first element, when `tensor` is set
  explicit operator bool() const { return kind != none; }
};
std::string_view fault_kind_name(CallFault::Kind k);

/// The plugin could not be loaded; what() is one line saying what is wrong and what to do.
struct SandboxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class SandboxedPlugin {
 public:
  /// Starts a fork server that dlopen()s `path` (a path: resolve "builtin" before) and checks its kernels as the
  /// CLI's loader does (ABI version, names, forward). Throws SandboxError, with the child's reason when it died.
  static SandboxedPlugin load(const std::string &path, SandboxOptions options = {});
  SandboxedPlugin(SandboxedPlugin &&) noexcept;
  SandboxedPlugin &operator=(SandboxedPlugin &&) noexcept;
  ~SandboxedPlugin();  ///< stops the server; the kernels' function pointers must not be called after this

  /// The plugin's kernels, in its order, as ordinary ABI kernels (valid while this object lives).
  std::span<const attncheck_kernel> kernels() const;
  /// The kernel named `name`; throws SandboxError listing the names there are.
  const attncheck_kernel &find(const std::string &name) const;
  /// The contract text kernel `index` declares through the plugin's attncheck_contracts (ABI 1.1); "" when none.
  /// Validated at load: a plugin whose contracts do not parse does not load.
  const std::string &contract(std::size_t index) const;
  /// The fault of kernel `index`'s last call (Kind::none when it had none).
  const CallFault &last_fault(std::size_t index) const;
  const std::string &path() const;
  /// How many times the server was started (1 after load; each call after a crash, hang or exit restarts it).
  int server_starts() const;

  struct Impl;

 private:
  explicit SandboxedPlugin(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The last fault of a kernel that a live SandboxedPlugin presents, found by its function pointers; nullptr for
/// any other kernel. For reports that hold only the attncheck_kernel.
const CallFault *last_fault(const attncheck_kernel &kernel);

}  // namespace attncheck::sandbox
