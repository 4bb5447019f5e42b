// The arbitrary-precision reference: attention forward (O, LSE) and backward (dQ, dK, dV) exactly as
// spec/SPEC.md defines them, evaluated in MPFR (Boost.Multiprecision mpfr_float) at a caller-chosen precision,
// or in MPFI intervals that enclose the exact result (certified mode).
//
// Inputs are the exact values stored in the (possibly float16/bfloat16) tensors, widened, never rounded.
// Results are contiguous row-major arrays:
//   out [B,Hq,Lq,Dv], lse [B,Hq,Lq], dq [B,Hq,Lq,D], dk [B,Hkv,Lk,D], dv [B,Hkv,Lk,Dv].
// A query row that sees no key has out = 0, lse = −∞ and zero gradients.
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
  std::vector<double> lse;  ///< [B,Hq,Lq]; −∞ for a row that sees no key
};

/// Backward results rounded once to double.
struct ExactBackward {
  std::vector<double> dq;  ///< [B,Hq,Lq,D]
  std::vector<double> dk;  ///< [B,Hkv,Lk,D]
  std::vector<double> dv;  ///< [B,Hkv,Lk,Dv]
};

/// O and LSE of the problem (shape checked: throws std::invalid_argument with a clear message).
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
