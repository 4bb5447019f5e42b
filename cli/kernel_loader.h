// The loader of the kernels under check, from the record of where they come from (reporting::KernelSource): a
// plugin (the bundled one included), run in a sandbox, or an exec command speaking the exec protocol. Either way
// they are ordinary ABI kernels.
#pragma once

#include "attncheck/exec_kernel.h"
#include "attncheck/run.h"
#include "attncheck/report_io.h"
#include "attncheck/sandbox.h"

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace attncheck::cli {

/// A configuration problem (bad plugin, exec command that does not start, unknown kernel); one line.
struct LoaderError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct LoaderOptions {
  std::chrono::milliseconds call_timeout{10'000};  ///< per kernel call (sandbox) or per request (exec)
  std::chrono::milliseconds first_call_timeout{60'000};  ///< exec: the first call of each shape (JIT compilation)
  std::uint64_t memory_limit_mib = 4096;           ///< memory (data segment) a kernel's process may write
};

/// Path of the bundled kernels' plugin (libattncheck_builtin.so).
std::string builtin_plugin_path();

class KernelLoader {
 public:
  /// Loads `source` (kind builtin, plugin or exec). Throws LoaderError.
  explicit KernelLoader(const reporting::KernelSource &source, const LoaderOptions &options = {});
  std::span<const attncheck_kernel> kernels() const;
  /// The kernel named `name`; throws LoaderError listing the names there are.
  const attncheck_kernel &find(const std::string &name) const;
  /// The contract `kernel` (one of kernels()) declares: through the plugin's attncheck_contracts, or the tokens of
  /// its exec hello line; "" when it declares none. Validated when the source loaded.
  const std::string &declared_contract(const attncheck_kernel &kernel) const;
  /// The kernels a check of this source takes: every one, or the one named `name` (LoaderError when none is), with
  /// their declared contracts.
  gate::Kernels kernels_of_check(const std::string &name = "") const;
  const reporting::KernelSource &source() const { return source_; }
  /// An exec kernel's call times, first calls per shape (compilation) apart; nullopt for a plugin.
  std::optional<ExecKernel::CallTimes> exec_call_times() const;

 private:
  reporting::KernelSource source_;
  std::optional<sandbox::SandboxedPlugin> plugin_;
  std::unique_ptr<ExecKernel> exec_;
};

}  // namespace attncheck::cli
