// Calling an ABI kernel on attncheck tensors: builds the DLTensor views, passes the params, and returns the
// kernel's status with its last_error message.
#pragma once

#include "attncheck/kernel_abi.h"
#include "attncheck/problem.h"
#include "attncheck/tensor.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>
#include <string>

namespace attncheck {

struct CallResult {
  int status = ATTNCHECK_ERROR;  ///< ATTNCHECK_OK, ATTNCHECK_UNSUPPORTED or ATTNCHECK_ERROR (or whatever it returned)
  /// The kernel's last_error() for a non-OK status, or ""; "the kernel threw an exception: …" (status
  /// ATTNCHECK_ERROR) when a kernel of C++ code let one through the C ABI: its failed call, not attncheck's trouble.
  std::string message;
  bool ok() const { return status == ATTNCHECK_OK; }
};

/// Output tensors of the problem's shape and dtype, contiguous: out [B,Hq,Lq,Dv] and float32 lse [B,Hq,Lq].
Tensor make_out(const Shape &s, Dtype dt);
Tensor make_lse(const Shape &s);

/// A cap on the wall-clock limit the isolating runners (sandboxed plugins, exec kernels) put on the calls this thread
/// makes while a CallTimeout lives: each call gets the smaller of the runner's own timeout and the cap; innermost
/// scope wins. The property engine shortens it while it shrinks a hang, so that each candidate does not cost a full
/// timeout.
class CallTimeout {
 public:
  explicit CallTimeout(std::chrono::milliseconds limit);
  ~CallTimeout();
  CallTimeout(const CallTimeout &) = delete;
  CallTimeout &operator=(const CallTimeout &) = delete;
  /// The runner's own timeout `own`, raised to the innermost live CallAllowance of this thread, then capped by the
  /// innermost live CallTimeout.
  static std::chrono::milliseconds current(std::chrono::milliseconds own);

 private:
  std::optional<std::chrono::milliseconds> previous_;
};

/// A floor under the isolating runners' own timeout for the calls this thread makes while it lives: the property
/// engine sets it to a margin over what the kernel's own measured speed predicts for the case, so that a correct
/// kernel slower than the timeout assumes, or one slowed down by a loaded machine, gets the time its speed needs
/// and is judged on its answers (a slow kernel is not a hanging one). A CallTimeout cap still wins; innermost scope
/// wins.
class CallAllowance {
 public:
  explicit CallAllowance(std::chrono::milliseconds floor);
  ~CallAllowance();
  CallAllowance(const CallAllowance &) = delete;
  CallAllowance &operator=(const CallAllowance &) = delete;

 private:
  std::optional<std::chrono::milliseconds> previous_;
};

/// What the isolating runners observed on this thread's calls since the last reset: the engine reads it to tell a
/// hang (a call that hit its timeout) from other failures, and how long calls that returned took.
struct CallRecord {
  int timeouts = 0;                         ///< calls stopped at their timeout
  int memory_faults = 0;                    ///< calls that failed at the memory limit
  int unavailable = 0;  ///< calls refused without running: the runner gave up on the kernel (restarts spent)
  std::chrono::milliseconds longest_ok{0};  ///< the longest call that returned
  /// The kernel's speed on the calls that returned (per entry point, by the work B·Hq·Lq·Lk·(D+Dv) of the problem):
  /// the engine predicts from it how long a call that hit its timeout should have taken (a hang or a slow kernel).
  struct Timed {
    std::int64_t work = 0;               ///< of the largest call that returned
    std::chrono::nanoseconds time{0};    ///< and its wall time
    Shape shape;                         ///< and its problem's shape
    /// Keeps `o` in place of this one when its work is at least as large (the larger call predicts best).
    void keep_larger(const Timed &o) {
      if (o.work >= work && o.work > 0) *this = o;
    }
  };
  Timed forward, backward;
  /// The quickest call that returned: what a call costs whatever its work (the runner's transfer, the dispatch).
  std::optional<std::chrono::nanoseconds> quickest;
  /// The first call that hit its timeout: its problem's shape (nullopt: none), entry point, and the limit it had (set
  /// by the runner).
  std::optional<Shape> timed_out;
  bool timed_out_backward = false;
  std::chrono::milliseconds timeout_limit{0};
  /// A runner stopped a call at its timeout `limit`.
  void note_timeout(std::chrono::milliseconds limit) {
    if (timeouts++ == 0) timeout_limit = limit;
  }
  static CallRecord &of_this_thread();
  void reset() { *this = CallRecord{}; }
  /// Wall time of every kernel call this thread made (call_forward, call_backward), returned or not; never reset:
  /// the engine takes differences (the kernel's share of a property's time).
  static std::chrono::nanoseconds &kernel_time();
};

/// kernel.forward(params, q, k, v, out, lse); lse may be null. A problem with features (features.h) is sent with
/// params.features and params.args (ABI 1.2), its tensors in the layout the features name — a packed varlen batch, a
/// paged cache with its unused pages and the tail of its last pages NaN — and the results mapped back to the logical
/// out and lse (rows a sequence does not have: O = 0, LSE = −∞, what the reference gives them). Under FP8, q, k, v
/// go as float8 bits (uint8, same strides; padding NaN) of their values, which must be representable. With dropout, the mask
/// the kernel wrote ([B, Hq, Lq, Lk], 1 kept; kDropoutUnwritten where it wrote nothing) goes to *dropout_keep.
CallResult call_forward(const attncheck_kernel &kernel, const Problem &p, Tensor &out, Tensor *lse,
                        std::vector<std::uint8_t> *dropout_keep = nullptr);
/// kernel.backward(...) with the problem's dout; ATTNCHECK_UNSUPPORTED when the kernel has no backward, or for a
/// paged cache or FP8 inputs (inference: the ABI defines no gradient of them). With dropout the kernel gets the forward's
/// mask, p.features.dropout_keep. dq, dk, dv are logical (keys and rows a sequence does not have: 0).
CallResult call_backward(const attncheck_kernel &kernel, const Problem &p, const Tensor &out, const Tensor *lse,
                         Tensor &dq, Tensor &dk, Tensor &dv);
/// What the call layer leaves in a dropout mask element the kernel did not write.
inline constexpr std::uint8_t kDropoutUnwritten = 0xA5;

}  // namespace attncheck
