// ABI kernels backed by C++ callables: how exec children and Python functions become ordinary attncheck_kernels.
// The ABI's function pointers carry no state, so each bound kernel takes one of kMaxBoundKernels slots whose
// trampolines find its body; the slot is freed with the BoundKernel, and calls through a copy of its struct made
// before then fail with ATTNCHECK_ERROR instead of reaching freed state.
//
// Example:
//   attncheck::BoundKernel k("mine", [](const attncheck::KernelCall &c) -> attncheck::KernelAnswer {
//     if (c.backward) return {ATTNCHECK_UNSUPPORTED, "no backward"};
//     ... read c.in[0..2] (q, k, v), write c.out[0] (out) and c.out[1] (lse, may be null) ...
//     return {ATTNCHECK_OK, ""};
//   }, /*has_backward=*/false);
//   attncheck::CallResult r = attncheck::call_forward(k.kernel(), problem, out, &lse);
#pragma once

#include "attncheck/kernel_abi.h"

#include <cstddef>
#include <functional>
#include <span>
#include <string>

namespace attncheck {

/// One call of a bound kernel, as the ABI made it.
struct KernelCall {
  bool backward = false;
  const attncheck_params &params;
  std::span<const DLTensor *const> in;  ///< forward: q, k, v; backward: q, k, v, out, lse, dout (lse may be null)
  std::span<DLTensor *const> out;       ///< forward: out, lse (lse may be null); backward: dq, dk, dv
  /// The names of in[i] and out[i] ("q", …, "dv").
  std::span<const char *const> in_names, out_names;
};

/// A call's status (ATTNCHECK_OK, _UNSUPPORTED, _ERROR) and, for a non-OK status, the message last_error() returns.
struct KernelAnswer {
  int status = ATTNCHECK_ERROR;
  std::string message;
};

/// A bound kernel's body: runs every forward and backward call; an exception it throws is an ATTNCHECK_ERROR whose
/// message is what().
using KernelBody = std::function<KernelAnswer(const KernelCall &)>;

class BoundKernel {
 public:
  /// Kernels bound at once, process-wide.
  static constexpr std::size_t kMaxBoundKernels = 256;
  /// Takes a free slot; throws std::runtime_error when all kMaxBoundKernels are taken. Without `has_backward` the
  /// kernel's backward pointer is NULL (the body sees forward calls only).
  BoundKernel(std::string name, KernelBody body, bool has_backward);
  /// Frees the slot, after a call in flight on another thread returns.
  ~BoundKernel();
  BoundKernel(const BoundKernel &) = delete;
  BoundKernel &operator=(const BoundKernel &) = delete;

  const attncheck_kernel &kernel() const { return abi_; }

 private:
  std::string name_;
  std::size_t slot_;
  attncheck_kernel abi_{};
};

}  // namespace attncheck
