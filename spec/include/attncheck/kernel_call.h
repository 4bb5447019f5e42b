// Calling an ABI kernel on attncheck tensors: builds the DLTensor views, passes the params, and returns the
// kernel's status with its last_error message.
#pragma once

#include "attncheck/kernel_abi.h"
#include "attncheck/problem.h"
#include "attncheck/tensor.h"

#include <string>

namespace attncheck {

struct CallResult {
  int status = ATTNCHECK_ERROR;  ///< ATTNCHECK_OK, ATTNCHECK_UNSUPPORTED or ATTNCHECK_ERROR (or whatever it returned)
  std::string message;           ///< the kernel's last_error() for a non-OK status, or ""
  bool ok() const { return status == ATTNCHECK_OK; }
};

/// Output tensors of the problem's shape and dtype, contiguous: out [B,Hq,Lq,Dv] and float32 lse [B,Hq,Lq].
Tensor make_out(const Shape &s, Dtype dt);
Tensor make_lse(const Shape &s);

/// kernel.forward(params, q, k, v, out, lse); lse may be null.
CallResult call_forward(const attncheck_kernel &kernel, const Problem &p, Tensor &out, Tensor *lse);
/// kernel.backward(...) with the problem's dout; ATTNCHECK_UNSUPPORTED when the kernel has no backward.
CallResult call_backward(const attncheck_kernel &kernel, const Problem &p, const Tensor &out, const Tensor *lse,
                         Tensor &dq, Tensor &dk, Tensor &dv);

}  // namespace attncheck
