// The arbitrary-precision reference: attention forward (O, LSE) and backward (dQ, dK, dV) exactly as
// spec/SPEC.md defines them, evaluated in MPFR (Boost.Multiprecision mpfr_float) at a caller-chosen precision,
// or in MPFI intervals that enclose the exact result (certified mode).
//
// Inputs are the exact values stored in the (possibly float16/bfloat16) tensors, widened, never rounded.
// Results are contiguous row-major arrays:
//   out [B,Hq,Lq,Dv], lse [B,Hq,Lq], dq [B,Hq,Lq,D], dk [B,Hkv,Lk,D], dv [B,Hkv,Lk,Dv].
// A query row that sees no key has out = 0, lse = −∞ and zero gradients.
//
// Features (spec/SPEC.md §2.7, Problem::features; the logical view of features.h: the tensors stay [B,H,L,D] with
// L the longest sequence). Per batch entry b, query head h, row i, with fr = row_frame(f, mask, b, i, Lq, Lk):
//   visible keys: sees(f, mask, fr, Lq, Lk, b, h, i, j) (causal alignment, window, per-sequence lengths, mask);
//   x_ij = scale·q_i·k_j;  s_ij = c·tanh(x_ij/c) with softcap c > 0 (else x_ij), + alibi_bias (ALiBi),
//          + mask_bhij (additive mask, finite values);
//   l_i = Σ_j e^{s_ij} + e^{sink_h} (sinks);  P_ij = e^{s_ij}/l_i;  LSE_i = log l_i;
//   O_ic = Σ_j P_ij z_ij v_jc, z_ij = dropout_factor(…) ∈ {0, 1/(1 − p)} (dropout; 1 otherwise);
//   dP_ij = z_ij Σ_c dO_ic v_jc, D_i = Σ_c dO_ic O_ic, dS_ij = P_ij (dP_ij − D_i), g_ij = 1 − tanh²(x_ij/c)
//          (softcap; else 1): dQ_id = scale Σ_j dS_ij g_ij k_jd, dK_jd = scale Σ_{h,i} dS_ij g_ij q_id,
//          dV_jc = Σ_{h,i} P_ij z_ij dO_ic.
// A row i ≥ Lq_b: out = 0, lse = −∞, dq = 0. A row that sees no key but has a sink: out = 0, lse = sink_h.
// ALiBi, the additive mask and sinks add no gradient to q, k, v (the sink's own gradient is not computed).
//
// Example:
//   attncheck::Problem p = ...;                       // q, k, v tensors and params
//   auto exact = attncheck::reference_forward(p);     // 128-bit MPFR, rounded once to double
//   double o = exact.out[attncheck::out_offset(p.shape, b, h, i, c)];
#pragma once

#include "attncheck/problem.h"

#include <vector>

namespace attncheck {

/// Default MPFR precision in bits: rounding a 128-bit result to double is exact in practice.
inline constexpr unsigned kReferenceBits = 128;

/// Forward results rounded once (to nearest) to double.
struct ExactForward {
  std::vector<double> out;  ///< [B,Hq,Lq,Dv]
  std::vector<double> lse;  ///< [B,Hq,Lq]; −∞ for a row that sees no key and has no sink, or i ≥ Lq_b
};

/// Backward results rounded once to double.
struct ExactBackward {
  std::vector<double> dq;  ///< [B,Hq,Lq,D]
  std::vector<double> dk;  ///< [B,Hkv,Lk,D]
  std::vector<double> dv;  ///< [B,Hkv,Lk,Dv]
};

/// O and LSE of the problem (shape and features checked: throws std::invalid_argument with a clear message, e.g.
/// when alibi_slopes/sinks do not have Hq entries, the mask is not [1|B, 1|Hq, Lq, Lk], seqlens are not B lengths
/// within Lq/Lk, or dropout_p > 0 without a dropout_keep of B·Hq·Lq·Lk entries).
ExactForward reference_forward(const Problem &p, unsigned bits = kReferenceBits);
/// dQ, dK, dV of the problem given p.dout (required; throws std::invalid_argument without it).
/// GQA: dK, dV of a kv head sum over the query heads that read it.
ExactBackward reference_backward(const Problem &p, unsigned bits = kReferenceBits);

/// An enclosure [lo, hi] (outward-rounded to double) of every exact value.
struct Enclosure {
  std::vector<double> lo, hi;
  /// Largest hi − lo (0 for an entry with lo = hi, infinite ones included).
  double max_width() const;
  /// Largest (hi − lo) / ulp(mid) over finite entries: the width in units of double's last place. 1 means lo and
  /// hi are adjacent doubles — as tight as a double enclosure of a value that is not a double can be; 0 means
  /// the exact value is the double lo = hi. ulp(x) is the spacing of doubles just above |x|.
  double max_width_ulps() const;
  bool contains(std::size_t i, double x) const { return lo[i] <= x && x <= hi[i]; }
};
struct CertifiedForward {
  Enclosure out, lse;
};
struct CertifiedBackward {
  Enclosure dq, dk, dv;
};

/// The same computations in MPFI interval arithmetic: each exact value lies in its enclosure.
CertifiedForward certified_forward(const Problem &p, unsigned bits = kReferenceBits);
CertifiedBackward certified_backward(const Problem &p, unsigned bits = kReferenceBits);

}  // namespace attncheck
