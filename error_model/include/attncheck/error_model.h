// The error model: how far a correct kernel's result may be from the exact one, per element.
//
// Derivation and the table of budgets: spec/SPEC.md §4. In short, with u_a the accumulation unit roundoff (softmax,
// P·V, backward), u_qk that of the logits' arithmetic (PrecisionProfile::accumulate_qk), u_s the storage one,
// s_ij = scale·q_i·k_j, P_ij = exp(s_ij − LSE_i), M_i = max_j |s_ij| over visible keys:
//   θ_ij  = γ_{D+2}(u_qk)·scale·Σ_d|q_id k_jd| + kShiftUlps·u_a·(|s_ij| + M_i) + kExpUlps·u_a   (log-space error)
//   |ΔO_ic| ≤ min(Σ_j P_ij ρ_ij |v_jc − O_ic|, max_j |v_jc − O_ic|) + γ_{2Lk+2}(Σ_j P_ij|v_jc| + |O_ic|)
//            + [round_p] Σ_j (u_s P_ij + η_s/2)|v_jc| + kDivUlps·u_a|O_ic| + u_s|O_ic| + η_s/2
// with ρ_ij = max(expm1(θ_ij + θ̄_i), 1 − e^{−θ_ij}/A_i), θ̄_i = Σ_j P_ij θ_ij, A_i = Σ_j P_ij e^{θ_ij};
// [rowsum_rounded_p] the P-rounding term may instead be centered, Σ_j (u_s P_ij + η_s/2)|v_jc − O_ic| (the bound
// takes the larger path), and the LSE gains −ln(1 − u_s − n·η_s/2); [lse = storage] the LSE one more storage
// rounding; [grad_per_head, G > 1] dK, dV may be G per-head parts rounded to storage, then summed.
// [tanh, exp approximations] softcap's tanh and the softmax's exp each carry their declared accuracy
// (approximation()): a relative and absolute error, the argument rounded to float16/bfloat16, results flushed.
// [fp32_precision] every matrix product's operands (q, k, v, dO; P and dS) rounded to TF32, bfloat16 or float16
// first: |x̃ − x| ≤ u·|x| + η per operand (u one ulp: a conversion may chop), so the logit gains
// u(2 + u)·scale·Σ_d|q_id k_jd| (+ η terms), P's rounding joins round_p's, and v's adds u·Σ_j P̂_ij|v_jc|.
// LSE, dQ, dK and dV follow by the same running-error propagation (SPEC.md §4.3–4.4).
// The bound holds whatever the summation order: naive, blocked, online softmax, split-KV.
//
// Example:
//   auto exact = attncheck::reference_forward(p);
//   auto bound = attncheck::forward_bounds(p, exact, attncheck::PrecisionProfile::for_storage(p.dtype()));
//   double ratio = std::abs(kernel_out - exact.out[i]) / bound.out[i];   // ≤ 1 for a correct kernel
#pragma once

#include "attncheck/contract.h"
#include "attncheck/dtype.h"
#include "attncheck/problem.h"
#include "attncheck/reference.h"

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace attncheck {

/// The error budgets of a correct kernel (one table, SPEC.md §4.1): ulps of the accumulation dtype.
struct Budgets {
  static constexpr double kExpUlps = 4;    ///< exp/exp2, vectorized polynomial approximations included
  static constexpr double kLogUlps = 4;    ///< log/log2 of the row sum
  static constexpr double kShiftUlps = 4;  ///< s·log2e folding, max subtraction, rescale arguments
  static constexpr double kDivUlps = 2;    ///< normalization: a division, or a reciprocal and a multiply
  static constexpr double kTanhUlps = 4;   ///< softcap's tanh (SPEC.md §2.7), like exp
  static constexpr double kBiasUlps = 2;   ///< adding ALiBi and an additive mask to the logit
  static constexpr double kDropoutUlps = 2;  ///< dropout's factor 1/(1 − p) rounded, and its product
  static constexpr double kDescaleUlps = 2;  ///< FP8 descales folded into the scale (q, k) or applied to v or O
  // The hardware approximations a contract may declare (tanh=…, exp=…; PTX ISA's stated maxima), each on top of the
  // accurate budget above (which also covers converting the result into the accumulation dtype):
  static constexpr double kTanhApproxRel = 4.9271e-4;      ///< tanh.approx.f32: relative 2^-10.987
  static constexpr double kTanhApproxF16Abs = 4.9271e-4;   ///< tanh.approx.f16: absolute 2^-10.987
  static constexpr double kTanhApproxBf16Abs = 0x1p-8;     ///< tanh.approx.bf16: absolute 2^-8
  static constexpr double kExpApproxF16Rel = 1.0467e-3;    ///< ex2.approx.f16: relative 2^-9.9
  static constexpr double kExpApproxBf16Rel = 0x1p-7;      ///< ex2.approx.ftz.bf16: relative 2^-7
};

/// The accuracy of one evaluation of a transcendental function beyond its accurate budget (kTanhUlps, kExpUlps),
/// as a contract declares it (SPEC.md §4.1): |f̃ − f| ≤ rel·|f| + abs, where the argument is first rounded to
/// `argument` when set (the float16/bfloat16 instructions), and results below `flush` may be flushed to zero or
/// lose their relative accuracy (a float16 result's subnormals).
struct Approximation {
  double rel = 0, abs = 0;
  std::optional<Dtype> argument;
  double flush = 0;
};
/// Softcap's tanh: nothing beyond kTanhUlps for Tanh::accurate.
Approximation approximation(Tanh t);
/// The softmax's exp: nothing beyond kExpUlps for Exp::accurate and Exp::approx (ex2.approx.f32's 2 ulps).
Approximation approximation(Exp e);

/// γ_n(u) = n·u / (1 − n·u); +∞ when n·u ≥ 1.
double gamma_n(double n, double u);

/// Per-element bounds on |kernel − exact|, in the layout of ExactForward / ExactBackward.
/// 0 means the value must be exact (a row that sees no key: O = 0, LSE = −∞, zero gradients).
struct ForwardBounds {
  std::vector<double> out, lse;
};
struct BackwardBounds {
  std::vector<double> dq, dk, dv;
};

/// What the `exact` values given to the bounds are.
enum class BoundsFrom {
  exact,        ///< reference_forward(p): the thresholds below apply as stated
  approximate,  ///< the fast reference's values (fast_reference.h), within a tiny relative error of the exact ones:
                ///< every overflow threshold that makes a bound +∞ fires kApproximateMargin earlier, so a bound that
                ///< is finite from approximate values is finite from the exact ones (SPEC.md §5.1)
};
/// How much earlier (relative) the overflow thresholds fire for BoundsFrom::approximate: far above the fast values'
/// relative error (≤ 2⁻²⁹ of a bound, SPEC.md §5.1), far below anything a kernel's verdict could hinge on.
inline constexpr double kApproximateMargin = 0x1p-20;

/// Called with the query rows forward_bounds and backward_bounds have just bounded on this thread (a head's rows at a
/// time): a long judgment's progress (given.h). Set for the duration of a call and cleared after; empty: none.
std::function<void(std::int64_t rows)> &bounded_rows_hook();

/// Bounds for forward outputs. `exact` is reference_forward(p) (or, with BoundsFrom::approximate, fast values).
ForwardBounds forward_bounds(const Problem &p, const ExactForward &exact, const PrecisionProfile &profile,
                             BoundsFrom from = BoundsFrom::exact);

/// Keys a row of a longer problem sees besides the problem's own (a stretched problem's filler, SPEC.md §7
/// `long_rows`), as one class: `count` keys whose logits s_ij are at most `max_logit`, with |s_ij| ≤ `max_abs_logit`,
/// scale·Σ_d|q_id k_jd| ≤ `max_abs_dot` and |v_jc| ≤ `max_abs_v`.
struct FillerKeys {
  double count = 0;
  double max_logit = -std::numeric_limits<double>::infinity();
  double max_abs_logit = 0, max_abs_dot = 0, max_abs_v = 0;
  /// Σ_d |k_jd| of a filler key: what rounding its operands adds under fp32-precision (SPEC.md §4.1); +∞ unknown.
  double max_k_l1 = std::numeric_limits<double>::infinity();
};
/// Bounds on |kernel − exact| where the kernel computes each row of `p` with `filler[row]` (row = lse_offset) more
/// keys and `exact` is reference_forward(p) — the answer WITHOUT the filler: with the filler's weight relative to the
/// row, δ_i = count·exp(max_logit − LSE_i), the long row's exact O differs by at most δ(max_abs_v + |O|)/(1 − δ) and
/// its LSE by at most δ, and both are added. The filler counts in n (every γ term), in M_i and in the max |v|;
/// its weight enters the sums as one key of weight δ (SPEC.md §4.2, §7). A row with δ ≥ 1/2 is unbounded (+∞).
ForwardBounds forward_bounds(const Problem &p, const ExactForward &exact, const PrecisionProfile &profile,
                             const std::vector<FillerKeys> &filler, BoundsFrom from = BoundsFrom::exact);
/// Bounds for dQ, dK, dV of a backward that consumes the kernel's own forward out and lse (each within its
/// forward bound). `exact` is reference_forward(p); p.dout is required.
BackwardBounds backward_bounds(const Problem &p, const ExactForward &exact, const PrecisionProfile &profile,
                               BoundsFrom from = BoundsFrom::exact);

/// |got − exact| / bound with the conventions of the checks: 0 when got == exact (−∞ == −∞ included),
/// +∞ when got is NaN or the bound is 0 and got differs. An infinite bound means the model cannot bound the
/// element (a logit error past exp's range, or a magnitude that may overflow the accumulation dtype): the ratio is
/// then 0 whatever got is, and checks count the element as undecided.
double error_ratio(double got, double exact, double bound);

}  // namespace attncheck
