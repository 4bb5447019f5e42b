// The reference's templates: attention forward and backward over a number type Real, at full precision.
//
// reference.h is the light API (results rounded to double); this header is for code that wants the
// arbitrary-precision values themselves (tests, error analysis). It pulls in Boost.Multiprecision, MPFR and
// MPFI: a target that includes it links Boost::headers, MPFR, MPFI and GMP.
//
// Real is one of
//   boost::multiprecision::mpfr_float  — every value carries exactly `bits` of precision, round to nearest;
//   boost::multiprecision::mpfi_float  — intervals of `bits`-bit endpoints that enclose the exact values;
//   any built-in floating type (double, long double) — `bits` is ignored; handy for comparing formulas.
// The first two are instantiated once in reference.cpp (extern templates below).
//
// Features (Problem::features, SPEC.md §2.7: window, softcap, ALiBi, sinks, mask, per-sequence lengths, dropout)
// are part of the inputs (InputsT::features) and evaluated in Real with the helpers of features.h; forward_t and
// backward_t give the formulas. A problem without features is evaluated exactly as before they existed.
//
// Precision. Boost 1.74 keeps one *process-wide* default precision per variable-precision type (a static
// atomic, not thread_local) and counts it in decimal digits (digits10), which converts to bits only roughly.
// The templates here do not depend on it: each value is created with mpfr_set_prec/mpfi_set_prec to exactly
// `bits`, and all arithmetic calls MPFR/MPFI on the backends directly, so precision is exact in bits,
// concurrent calls with different `bits` are safe, and no temporary is allocated per scalar operation.
// Code that does its own Boost arithmetic on the results (e.g. `sum += P[j]`) should hold a
// ScopedDefaultPrecision for the duration, so that new numbers get at least `bits`.
//
// Example:
//   using boost::multiprecision::mpfr_float;
//   auto f = attncheck::forward_t<mpfr_float>(p, 256);   // out, lse, P at 256 bits
//   auto g = attncheck::backward_t<mpfr_float>(p, 256);  // dq, dk, dv at 256 bits
#pragma once

#include "attncheck/reference.h"

#include <boost/multiprecision/mpfi.hpp>
#include <boost/multiprecision/mpfr.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace attncheck {

/// The least precision a reference computation accepts: every input (≤ 24-bit significands) and the scale
/// (a double, 53 bits) is then exact in Real.
inline constexpr unsigned kMinReferenceBits = 53;

// ---------------------------------------------------------------------------------------------------------
// RealOps<Real>: the handful of operations the reference needs, each rounding once (MPFR: to nearest;
// MPFI: outward). Results may alias arguments. `tmp` is scratch space of the same precision for types without
// a fused multiply-add.

/// Built-in floating types: plain operators.
template <class Real>
struct RealOps {
  static_assert(std::is_floating_point_v<Real>, "RealOps: specialize it for this number type");
  static Real make(unsigned /*bits*/) { return Real(0); }
  static void set_d(Real &r, double x) { r = static_cast<Real>(x); }
  static void set(Real &r, const Real &a) { r = a; }
  static void add(Real &r, const Real &a, const Real &b) { r = a + b; }
  static void sub(Real &r, const Real &a, const Real &b) { r = a - b; }
  static void mul(Real &r, const Real &a, const Real &b) { r = a * b; }
  static void div(Real &r, const Real &a, const Real &b) { r = a / b; }
  static void mul_d(Real &r, const Real &a, double x) { r = a * static_cast<Real>(x); }
  /// acc ← acc + a·b.
  static void fma(Real &acc, const Real &a, const Real &b, Real & /*tmp*/) { acc = std::fma(a, b, acc); }
  /// r ← a + b, rounded so that a later rounding to double is correct (see the MPFR specialization).
  static void add_odd(Real &r, const Real &a, const Real &b) { r = a + b; }
  static void exp(Real &r, const Real &a) { r = std::exp(a); }
  static void log1p(Real &r, const Real &a) { r = std::log1p(a); }
  static void add_d(Real &r, const Real &a, double x) { r = a + static_cast<Real>(x); }
  static void div_d(Real &r, const Real &a, double x) { r = a / static_cast<Real>(x); }
  static void tanh(Real &r, const Real &a) { r = std::tanh(a); }
  /// r ← sech a = 1/cosh a (= 1 − tanh² a with full relative accuracy: the softcap derivative).
  static void sech(Real &r, const Real &a) { r = Real(1) / std::cosh(a); }
  /// r ← a point value (not an interval) near a; any point will do (used as the softmax shift). r ≠ a.
  static void point(Real &r, const Real &a) { r = a; }
  /// a < b, for point values.
  static bool less(const Real &a, const Real &b) { return a < b; }
  static double nearest(const Real &a) { return static_cast<double>(a); }
  /// Doubles lo ≤ exact ≤ hi (for a rounded type: the value itself, rounded outward).
  static double lower(const Real &a) {
    const double d = static_cast<double>(a);
    return static_cast<Real>(d) <= a ? d : std::nextafter(d, -std::numeric_limits<double>::infinity());
  }
  static double upper(const Real &a) {
    const double d = static_cast<double>(a);
    return static_cast<Real>(d) >= a ? d : std::nextafter(d, std::numeric_limits<double>::infinity());
  }
};

/// MPFR at exactly `bits`, round to nearest.
template <>
struct RealOps<boost::multiprecision::mpfr_float> {
  using Real = boost::multiprecision::mpfr_float;
  static mpfr_ptr raw(Real &x) { return x.backend().data(); }
  static mpfr_srcptr raw(const Real &x) { return x.backend().data(); }

  static Real make(unsigned bits) {
    Real x;
    mpfr_set_prec(raw(x), static_cast<mpfr_prec_t>(bits));
    mpfr_set_zero(raw(x), 1);
    return x;
  }
  static void set_d(Real &r, double x) { mpfr_set_d(raw(r), x, MPFR_RNDN); }
  static void set(Real &r, const Real &a) { mpfr_set(raw(r), raw(a), MPFR_RNDN); }
  static void add(Real &r, const Real &a, const Real &b) { mpfr_add(raw(r), raw(a), raw(b), MPFR_RNDN); }
  static void sub(Real &r, const Real &a, const Real &b) { mpfr_sub(raw(r), raw(a), raw(b), MPFR_RNDN); }
  static void mul(Real &r, const Real &a, const Real &b) { mpfr_mul(raw(r), raw(a), raw(b), MPFR_RNDN); }
  static void div(Real &r, const Real &a, const Real &b) { mpfr_div(raw(r), raw(a), raw(b), MPFR_RNDN); }
  static void mul_d(Real &r, const Real &a, double x) { mpfr_mul_d(raw(r), raw(a), x, MPFR_RNDN); }
  static void fma(Real &acc, const Real &a, const Real &b, Real & /*tmp*/) {
    mpfr_fma(raw(acc), raw(a), raw(b), raw(acc), MPFR_RNDN);
  }
  /// r ← a + b rounded to odd (toward zero, then the last bit set when inexact). A value rounded to odd at
  /// p ≥ 55 bits and then to nearest double is the correctly rounded double of a + b (Boldo & Melquiond,
  /// "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to odd", 2008). Used for
  /// LSE = m + log l: m can lie exactly halfway between two doubles and log l be below 2^-bits · m (a peaked
  /// softmax), where rounding to nearest twice would lose log l's sign and round the tie to even.
  static void add_odd(Real &r, const Real &a, const Real &b) {
    const int ternary = mpfr_add(raw(r), raw(a), raw(b), MPFR_RNDZ);
    const bool even = mpfr_min_prec(raw(r)) < mpfr_get_prec(raw(r));
    if (ternary == 0 || !even || !mpfr_number_p(raw(r))) return;
    if (ternary < 0)
      mpfr_nextabove(raw(r));  // r < a + b
    else
      mpfr_nextbelow(raw(r));
  }
  static void exp(Real &r, const Real &a) { mpfr_exp(raw(r), raw(a), MPFR_RNDN); }
  static void log1p(Real &r, const Real &a) { mpfr_log1p(raw(r), raw(a), MPFR_RNDN); }
  static void add_d(Real &r, const Real &a, double x) { mpfr_add_d(raw(r), raw(a), x, MPFR_RNDN); }
  static void div_d(Real &r, const Real &a, double x) { mpfr_div_d(raw(r), raw(a), x, MPFR_RNDN); }
  static void tanh(Real &r, const Real &a) { mpfr_tanh(raw(r), raw(a), MPFR_RNDN); }
  static void sech(Real &r, const Real &a) { mpfr_sech(raw(r), raw(a), MPFR_RNDN); }
  static void point(Real &r, const Real &a) { set(r, a); }
  static bool less(const Real &a, const Real &b) { return mpfr_less_p(raw(a), raw(b)) != 0; }
  static double nearest(const Real &a) { return mpfr_get_d(raw(a), MPFR_RNDN); }
  static double lower(const Real &a) { return mpfr_get_d(raw(a), MPFR_RNDD); }
  static double upper(const Real &a) { return mpfr_get_d(raw(a), MPFR_RNDU); }
};

/// MPFI intervals with `bits`-bit endpoints: every operation encloses the exact result.
template <>
struct RealOps<boost::multiprecision::mpfi_float> {
  using Real = boost::multiprecision::mpfi_float;
  static mpfi_ptr raw(Real &x) { return x.backend().data(); }
  static mpfi_srcptr raw(const Real &x) { return x.backend().data(); }

  static Real make(unsigned bits) {
    Real x;
    mpfi_set_prec(raw(x), static_cast<mpfr_prec_t>(bits));
    mpfi_set_si(raw(x), 0);
    return x;
  }
  static void set_d(Real &r, double x) {
    if (std::isinf(x)) {  // the point [x, x] (mpfi_set_d would not give a degenerate infinite interval)
      mpfr_set_d(&raw(r)->left, x, MPFR_RNDD);
      mpfr_set_d(&raw(r)->right, x, MPFR_RNDU);
    } else {
      mpfi_set_d(raw(r), x);
    }
  }
  static void set(Real &r, const Real &a) { mpfi_set(raw(r), raw(a)); }
  static void add(Real &r, const Real &a, const Real &b) { mpfi_add(raw(r), raw(a), raw(b)); }
  static void sub(Real &r, const Real &a, const Real &b) { mpfi_sub(raw(r), raw(a), raw(b)); }
  static void mul(Real &r, const Real &a, const Real &b) { mpfi_mul(raw(r), raw(a), raw(b)); }
  static void div(Real &r, const Real &a, const Real &b) { mpfi_div(raw(r), raw(a), raw(b)); }
  static void mul_d(Real &r, const Real &a, double x) { mpfi_mul_d(raw(r), raw(a), x); }
  static void fma(Real &acc, const Real &a, const Real &b, Real &tmp) {  // MPFI has no fused multiply-add
    mpfi_mul(raw(tmp), raw(a), raw(b));
    mpfi_add(raw(acc), raw(acc), raw(tmp));
  }
  static void add_odd(Real &r, const Real &a, const Real &b) { add(r, a, b); }  // enclosures need no care
  static void exp(Real &r, const Real &a) { mpfi_exp(raw(r), raw(a)); }
  static void log1p(Real &r, const Real &a) { mpfi_log1p(raw(r), raw(a)); }
  static void add_d(Real &r, const Real &a, double x) { mpfi_add_d(raw(r), raw(a), x); }
  static void div_d(Real &r, const Real &a, double x) { mpfi_div_d(raw(r), raw(a), x); }
  static void tanh(Real &r, const Real &a) { mpfi_tanh(raw(r), raw(a)); }
  static void sech(Real &r, const Real &a) { mpfi_sech(raw(r), raw(a)); }
  /// The degenerate interval [mid, mid] (r must not alias a).
  static void point(Real &r, const Real &a) {
    mpfi_mid(&raw(r)->left, raw(a));
    mpfr_set(&raw(r)->right, &raw(r)->left, MPFR_RNDN);
  }
  /// Compares left endpoints (exact for points).
  static bool less(const Real &a, const Real &b) { return mpfr_less_p(&raw(a)->left, &raw(b)->left) != 0; }
  static double nearest(const Real &a) {
    mpfr_t mid;
    mpfr_init2(mid, mpfi_get_prec(raw(a)));
    mpfi_mid(mid, raw(a));
    const double d = mpfr_get_d(mid, MPFR_RNDN);
    mpfr_clear(mid);
    return d;
  }
  static double lower(const Real &a) { return mpfr_get_d(&raw(a)->left, MPFR_RNDD); }
  static double upper(const Real &a) { return mpfr_get_d(&raw(a)->right, MPFR_RNDU); }
};

// ---------------------------------------------------------------------------------------------------------

/// Sets Number::default_precision (Boost: decimal digits, process-wide) to the fewest digits10 that give at
/// least `bits` bits, and restores the previous value on destruction. Not needed by the templates below;
/// for callers doing their own Boost arithmetic on their results. Not safe against another thread changing
/// the same default concurrently (Boost 1.74's default is not thread_local).
template <class Number>
class ScopedDefaultPrecision {
 public:
  explicit ScopedDefaultPrecision(unsigned bits) : old_(Number::default_precision()) {
    Number::default_precision(digits10_for_bits(bits));
  }
  ~ScopedDefaultPrecision() { Number::default_precision(old_); }
  ScopedDefaultPrecision(const ScopedDefaultPrecision &) = delete;
  ScopedDefaultPrecision &operator=(const ScopedDefaultPrecision &) = delete;

  /// The fewest decimal digits d with Boost's digits10 → bits conversion (d·1000/301 + 1 or 2) ≥ bits.
  static unsigned digits10_for_bits(unsigned bits) {
    unsigned d = 1;
    while (boost::multiprecision::detail::digits10_2_2(d) < bits) ++d;
    return d;
  }

 private:
  unsigned old_;
};

/// The inputs widened exactly to Real, contiguous row-major: q [B,Hq,Lq,D], k [B,Hkv,Lk,D], v [B,Hkv,Lk,Dv],
/// dout [B,Hq,Lq,Dv] (empty when the problem has none), and the problem's features (features.h; the logical view:
/// L is the longest sequence). Building them by hand (e.g. perturbing one value by less than a float's ulp) lets
/// forward_t/backward_t evaluate attention at any real inputs.
template <class Real>
struct InputsT {
  Shape shape;
  Params params;
  Features features;
  unsigned bits = kReferenceBits;  ///< precision of every value the computation creates
  std::vector<Real> q, k, v, dout;
};

/// Forward results at full precision. A row that sees no key and has no sink: out = 0, lse = −∞, P row = 0; a row
/// that does not exist (i ≥ Lq_b): the same.
template <class Real>
struct ForwardT {
  std::vector<Real> out;  ///< [B,Hq,Lq,Dv]: O_ic = Σ_j P_ij z_ij v_jc (z_ij = 1 without dropout)
  std::vector<Real> lse;  ///< [B,Hq,Lq]: LSE_i = log(Σ_j e^{s_ij} + e^{sink_h}) (no sink term without sinks)
  /// [B,Hq,Lq,Lk]: softmax weights P_ij = e^{s_ij − LSE_i} (before dropout), 0 for hidden keys; empty unless
  /// KeepP::yes. With sinks a row's weights sum to 1 − e^{sink_h − LSE_i}.
  std::vector<Real> P;
};

/// Backward results at full precision; dk, dv of a kv head sum over the query heads that read it.
template <class Real>
struct BackwardT {
  std::vector<Real> dq;  ///< [B,Hq,Lq,D]
  std::vector<Real> dk;  ///< [B,Hkv,Lk,D]
  std::vector<Real> dv;  ///< [B,Hkv,Lk,Dv]
};

/// Whether forward_t keeps the attention weights P (Lk reals per query row: large for long sequences).
enum class KeepP : bool { no, yes };

/// Offset of P_ij of query head (b, h) in ForwardT::P.
inline std::int64_t p_offset(const Shape &s, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
  return ((b * s.Hq + h) * s.Lq + i) * s.Lk + j;
}

namespace detail {

/// The shape of p's tensors; throws std::invalid_argument when they disagree with each other or with p.shape,
/// when the scale is not finite, when bits < kMinReferenceBits, or when p.features does not fit the shape
/// (check_features).
Shape checked_shape(const Problem &p, unsigned bits, bool need_dout);
/// Throws std::invalid_argument (one line naming the field) unless f fits shape s: alibi_slopes and sinks empty or
/// Hq finite entries; the mask [mask_B, mask_H, Lq, Lk] with mask_B ∈ {1, B}, mask_H ∈ {1, Hq}, no NaN (nor +∞ in
/// an additive mask); seqlens_q/seqlens_k empty or B entries in [0, Lq] / [0, Lk]; windows ≥ −1; softcap finite
/// and ≥ 0; dropout_p in [0, 1) and, when > 0, dropout_keep of B·Hq·Lq·Lk entries.
void check_features(const Features &f, const Shape &s);

template <class Real>
std::vector<Real> widen(const Tensor &t, unsigned bits) {
  using Ops = RealOps<Real>;
  std::vector<Real> out(static_cast<std::size_t>(t.numel()), Ops::make(bits));
  std::size_t n = 0;
  for_each_index(t.shape(), [&](std::span<const std::int64_t> idx) { Ops::set_d(out[n++], t.get(idx)); });
  return out;
}

/// Scratch values of one precision, reused across rows and heads.
template <class Real>
struct Scratch {
  Real acc, tmp, m, l, t, u;
  Real keep;              ///< 1 − dropout_p in Real (1 without dropout): z_ij = 1/keep for a kept entry
  std::vector<Real> row;  ///< Lk values
  Scratch(unsigned bits, std::int64_t Lk, const Features &f)
      : acc(RealOps<Real>::make(bits)), tmp(acc), m(acc), l(acc), t(acc), u(acc), keep(acc),
        row(static_cast<std::size_t>(Lk), acc) {
    RealOps<Real>::set_d(keep, 1.0);
    if (f.dropout_p > 0) RealOps<Real>::add_d(keep, keep, -f.dropout_p);
  }
};

/// Forward of query head (b, h): writes P_h [Lq,Lk], O_h [Lq,Dv], lse_h [Lq] (the slices of that head);
/// O is skipped when O_h is null. With softcap and Y_h not null, Y_h [Lq,Lk] receives y_ij = x_ij / softcap of the
/// visible entries (the argument of tanh; backward's chain rule needs sech² y_ij).
template <class Real>
void forward_head(const InputsT<Real> &in, std::int64_t b, std::int64_t h, Real *P_h, Real *O_h, Real *lse_h,
                  Real *Y_h, Scratch<Real> &w) {
  using Ops = RealOps<Real>;
  const Shape &s = in.shape;
  const Features &f = in.features;
  const bool softcap = f.softcap > 0, alibi = !f.alibi_slopes.empty(), sink = !f.sinks.empty(),
             additive = f.mask_kind == MaskKind::additive, dropout = f.dropout_p > 0;
  const double sink_h = sink ? f.sinks[static_cast<std::size_t>(h)] : 0.0;
  const std::int64_t kv = s.kv_head(h);
  const Real *q = in.q.data() + (b * s.Hq + h) * s.Lq * s.D;
  const Real *k = in.k.data() + (b * s.Hkv + kv) * s.Lk * s.D;
  const Real *v = in.v.data() + (b * s.Hkv + kv) * s.Lk * s.Dv;
  for (std::int64_t i = 0; i < s.Lq; ++i) {
    Real *P = P_h + i * s.Lk;
    Real *O = O_h ? O_h + i * s.Dv : nullptr;
    if (O)
      for (std::int64_t c = 0; c < s.Dv; ++c) Ops::set_d(O[c], 0.0);
    for (std::int64_t j = 0; j < s.Lk; ++j) Ops::set_d(P[j], 0.0);
    const RowFrame fr = row_frame(f, in.params.mask, b, i, s.Lq, s.Lk);
    if (!fr.exists) {  // i ≥ Lq_b: O = 0, P = 0, LSE = −∞
      Ops::set_d(lse_h[i], -std::numeric_limits<double>::infinity());
      continue;
    }
    auto seen = [&](std::int64_t j) { return sees(f, in.params.mask, fr, s.Lq, s.Lk, b, h, i, j); };
    // s_ij = scale · Σ_d q_id k_jd [then c·tanh(·/c)] [+ ALiBi] [+ additive mask], and m = a point at (or near) the
    // largest of the s_ij and the sink.
    std::int64_t jstar = -1;  // the key whose logit gave m; s.Lk when the sink gave it
    for (std::int64_t j = 0; j < s.Lk; ++j) {
      if (!seen(j)) continue;
      Real &sij = w.row[static_cast<std::size_t>(j)];
      Ops::set_d(w.acc, 0.0);
      for (std::int64_t d = 0; d < s.D; ++d) Ops::fma(w.acc, q[i * s.D + d], k[j * s.D + d], w.tmp);
      Ops::mul_d(sij, w.acc, in.params.scale);
      if (softcap) {
        Ops::div_d(w.t, sij, f.softcap);
        if (Y_h) Ops::set(Y_h[i * s.Lk + j], w.t);
        Ops::tanh(w.t, w.t);
        Ops::mul_d(sij, w.t, f.softcap);
      }
      if (alibi) Ops::add_d(sij, sij, alibi_bias(f, fr, h, j));
      if (additive) {
        const double mv = mask_value(f, s.Lq, s.Lk, b, h, i, j);
        if (std::isfinite(mv)) Ops::add_d(sij, sij, mv);
      }
      Ops::point(w.t, sij);
      if (jstar < 0 || Ops::less(w.m, w.t)) {
        Ops::set(w.m, w.t);
        jstar = j;
      }
    }
    if (sink) {  // the sink is one more logit, exact (a double), with no value
      Ops::set_d(w.t, sink_h);
      if (jstar < 0 || Ops::less(w.m, w.t)) {
        Ops::set(w.m, w.t);
        jstar = s.Lk;
      }
    }
    if (jstar < 0) {  // the row sees no key and has no sink: O = 0 (done), P = 0 (done), LSE = −∞
      Ops::set_d(lse_h[i], -std::numeric_limits<double>::infinity());
      continue;
    }
    // l = 1 + λ with λ = Σ_{j≠j*} exp(s_ij − m) + (exp(s_ij* − m) − 1) (the last term is exactly 0 for a point
    // type, where m = s_ij*; the sink is one of the terms, exactly 0 when it gave m); P_ij = exp(s_ij − m) / l;
    // O_ic = Σ_j P_ij z_ij v_jc; LSE = m + log1p(λ).
    // log1p(λ) rather than log(l): when the softmax is peaked, λ can be far below 2^-bits and l would round to 1.
    Ops::set_d(w.l, 0.0);
    for (std::int64_t j = 0; j < s.Lk; ++j) {
      if (!seen(j)) continue;
      Ops::sub(w.t, w.row[static_cast<std::size_t>(j)], w.m);
      Ops::exp(P[j], w.t);
      if (j == jstar) {
        Ops::add_d(w.t, P[j], -1.0);
        Ops::add(w.l, w.l, w.t);
      } else {
        Ops::add(w.l, w.l, P[j]);
      }
    }
    if (sink && jstar != s.Lk) {
      Ops::set_d(w.t, sink_h);
      Ops::sub(w.t, w.t, w.m);
      Ops::exp(w.t, w.t);
      Ops::add(w.l, w.l, w.t);
    }
    Ops::log1p(w.t, w.l);
    Ops::add_odd(lse_h[i], w.m, w.t);
    Ops::add_d(w.l, w.l, 1.0);
    for (std::int64_t j = 0; j < s.Lk; ++j) {
      if (!seen(j)) continue;
      Ops::div(P[j], P[j], w.l);
      if (!O) continue;
      if (dropout && dropout_factor(f, s.Hq, s.Lq, s.Lk, b, h, i, j) == 0) continue;  // z_ij = 0
      for (std::int64_t c = 0; c < s.Dv; ++c) Ops::fma(O[c], P[j], v[j * s.Dv + c], w.tmp);
    }
    if (O && dropout)  // the kept entries' z_ij = 1/(1 − p), applied once to their sum
      for (std::int64_t c = 0; c < s.Dv; ++c) Ops::div(O[c], O[c], w.keep);
  }
}

}  // namespace detail

/// q, k, v (and dout when present) widened exactly to `bits`-bit Real, and p.features. Throws
/// std::invalid_argument when the shapes disagree (shape_of's message), when p.shape is not the tensors' shape, when
/// the scale is not finite, when the features do not fit the shape (detail::check_features), or when
/// bits < kMinReferenceBits.
template <class Real>
InputsT<Real> load_inputs(const Problem &p, unsigned bits = kReferenceBits) {
  InputsT<Real> in;
  in.shape = detail::checked_shape(p, bits, false);
  in.params = p.params;
  in.features = p.features;
  in.bits = bits;
  in.q = detail::widen<Real>(p.q, bits);
  in.k = detail::widen<Real>(p.k, bits);
  in.v = detail::widen<Real>(p.v, bits);
  if (p.dout) in.dout = detail::widen<Real>(*p.dout, bits);
  // FP8: the stored values stand for descale · stored (exact in Real: a float32 times a float8 value).
  for (auto [xs, factor] : {std::pair{&in.q, descaled_q(p.features)}, std::pair{&in.k, descaled_k(p.features)},
                            std::pair{&in.v, descaled_v(p.features)}})
    if (factor != 1)
      for (Real &x : *xs) RealOps<Real>::mul_d(x, x, factor);
  return in;
}

/// Forward attention of `in` (spec §2, features §2.7), per batch entry b, query head h, row i, with
/// fr = row_frame(features, mask, b, i, Lq, Lk) and the keys j that row sees, sees(features, mask, fr, …):
///   x_ij = scale·Σ_d q_id k_jd,
///   s_ij = x_ij, or c·tanh(x_ij/c) with softcap c > 0; then s_ij += alibi_bias(…) [ALiBi] + mask_bhij [additive
///          mask, finite values] (each added in Real, exact doubles),
///   m_i = max(max_j s_ij, sink_h), l_i = Σ_j exp(s_ij − m_i) + exp(sink_h − m_i) [sinks],
///   P_ij = exp(s_ij − m_i)/l_i, LSE_i = m_i + log l_i = log(Σ_j e^{s_ij} + e^{sink_h}),
///   O_ic = Σ_j P_ij z_ij v_jc, z_ij = dropout_factor(…) ∈ {0, 1/(1 − p)} (1 without dropout; 1 − p in Real).
/// A row with no visible key has O = 0 and LSE = sink_h (−∞ without sinks); a row i ≥ Lq_b has O = 0, LSE = −∞.
/// For intervals m_i is a point (the largest midpoint): the result does not depend on it.
/// Evaluated as LSE_i = m_i + log1p(l_i − 1), the sum rounded to odd (RealOps::add_odd), so that LSE rounds
/// correctly to double even when the softmax is peaked (l_i − 1 ≪ 2^-bits) and m_i is a double midpoint.
/// Domain: finite inputs and scale. Without features the evaluation is exactly the featureless one.
template <class Real>
ForwardT<Real> forward_t(const InputsT<Real> &in, KeepP keep = KeepP::yes) {
  using Ops = RealOps<Real>;
  const Shape &s = in.shape;
  const Real zero = Ops::make(in.bits);
  ForwardT<Real> f;
  f.out.assign(static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Dv), zero);
  f.lse.assign(static_cast<std::size_t>(s.B * s.Hq * s.Lq), zero);
  const std::size_t head_P = static_cast<std::size_t>(s.Lq * s.Lk);
  if (keep == KeepP::yes) f.P.assign(static_cast<std::size_t>(s.B * s.Hq) * head_P, zero);
  std::vector<Real> P_scratch(keep == KeepP::yes ? 0 : head_P, zero);
  detail::Scratch<Real> w(in.bits, s.Lk, in.features);
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h) {
      Real *P_h = keep == KeepP::yes ? f.P.data() + p_offset(s, b, h, 0, 0) : P_scratch.data();
      detail::forward_head(in, b, h, P_h, f.out.data() + out_offset(s, b, h, 0, 0),
                           f.lse.data() + lse_offset(s, b, h, 0), static_cast<Real *>(nullptr), w);
    }
  return f;
}

/// forward_t of the problem's exact inputs at `bits` (throws like load_inputs).
template <class Real>
ForwardT<Real> forward_t(const Problem &p, unsigned bits = kReferenceBits, KeepP keep = KeepP::yes) {
  return forward_t(load_inputs<Real>(p, bits), keep);
}

/// Backward attention of `in` given in.dout (throws std::invalid_argument when it is empty), with the forward's
/// s_ij, P_ij, z_ij and visibility (forward_t):
///   dP_ij = z_ij Σ_c dO_ic v_jc, D_i = Σ_c dO_ic O_ic = Σ_j P_ij dP_ij, dS_ij = P_ij (dP_ij − D_i),
///   g_ij = 1 − tanh²(x_ij/c) = sech²(x_ij/c) with softcap c (∂s/∂x; 1 without softcap),
///   dQ_id = scale·Σ_j dS_ij g_ij k_jd, dK_jd = scale·Σ_{h,i} dS_ij g_ij q_id, dV_jc = Σ_{h,i} P_ij z_ij dO_ic
/// — the sums over h run over the query heads of kv head j's head. ALiBi, the additive mask and sinks add no
/// gradient to q, k, v (the sink's own gradient is not computed). Hidden keys, rows that see no key and rows
/// i ≥ Lq_b contribute nothing.
///
/// Evaluation: dP_ij − D_i is computed as (dP_ij − dP_ij*) + Σ_{k≠j*} P_ik (dP_ij* − dP_ik), j* = argmax_j P_ij,
/// which equals it exactly (D_i = Σ_k P_ik dP_ik and Σ_k P_ik = 1). The literal D_i cancels catastrophically
/// when the softmax is peaked (P_ij* = 1 − ε: dS_ij* ≈ ε, the difference of two O(1) values), losing
/// log2(1/ε) bits; the rewritten form keeps full relative accuracy and tight intervals. A sink is one more k with
/// P_sink = exp(sink_h − LSE_i) and dP_sink = 0 (its value is zero), and may be j*.
template <class Real>
BackwardT<Real> backward_t(const InputsT<Real> &in) {
  using Ops = RealOps<Real>;
  const Shape &s = in.shape;
  const Features &f = in.features;
  if (in.dout.size() != static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Dv))
    throw std::invalid_argument("backward needs dout of shape [B,Hq,Lq,Dv] (" + s.describe() + ")");
  const bool softcap = f.softcap > 0, sink = !f.sinks.empty(), dropout = f.dropout_p > 0;
  const Real zero = Ops::make(in.bits);
  BackwardT<Real> g;
  g.dq.assign(in.q.size(), zero);
  g.dk.assign(in.k.size(), zero);
  g.dv.assign(in.v.size(), zero);
  std::vector<Real> P(static_cast<std::size_t>(s.Lq * s.Lk), zero), lse(static_cast<std::size_t>(s.Lq), zero);
  std::vector<Real> Y(softcap ? static_cast<std::size_t>(s.Lq * s.Lk) : 0, zero);  // x_ij / c
  detail::Scratch<Real> w(in.bits, s.Lk, f);
  Real dS = zero, Psink = zero;
  const Real dPsink = zero;
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h) {
      detail::forward_head(in, b, h, P.data(), static_cast<Real *>(nullptr), lse.data(),
                           softcap ? Y.data() : static_cast<Real *>(nullptr), w);
      const std::int64_t kv = s.kv_head(h);
      const Real *q = in.q.data() + (b * s.Hq + h) * s.Lq * s.D;
      const Real *k = in.k.data() + (b * s.Hkv + kv) * s.Lk * s.D;
      const Real *v = in.v.data() + (b * s.Hkv + kv) * s.Lk * s.Dv;
      const Real *dO = in.dout.data() + out_offset(s, b, h, 0, 0);
      Real *dq = g.dq.data() + (b * s.Hq + h) * s.Lq * s.D;  // accumulates Σ_j dS_ij g_ij k_jd; scaled below
      Real *dk = g.dk.data() + (b * s.Hkv + kv) * s.Lk * s.D;
      Real *dv = g.dv.data() + (b * s.Hkv + kv) * s.Lk * s.Dv;
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        const RowFrame fr = row_frame(f, in.params.mask, b, i, s.Lq, s.Lk);
        if (!fr.exists) continue;  // i ≥ Lq_b: no gradient
        auto seen = [&](std::int64_t j) { return sees(f, in.params.mask, fr, s.Lq, s.Lk, b, h, i, j); };
        auto kept = [&](std::int64_t j) { return !dropout || dropout_factor(f, s.Hq, s.Lq, s.Lk, b, h, i, j) != 0; };
        const Real *dOi = dO + i * s.Dv;
        const Real *Pi = P.data() + i * s.Lk;
        // dP_ij = z_ij Σ_c dO_ic v_jc (in w.row) and j* = argmax_j P_ij over visible keys (and the sink).
        std::int64_t jstar = -1;
        for (std::int64_t j = 0; j < s.Lk; ++j) {
          if (!seen(j)) continue;
          Real &dPij = w.row[static_cast<std::size_t>(j)];
          Ops::set_d(dPij, 0.0);
          if (kept(j)) {
            for (std::int64_t c = 0; c < s.Dv; ++c) Ops::fma(dPij, dOi[c], v[j * s.Dv + c], w.tmp);
            if (dropout) Ops::div(dPij, dPij, w.keep);
          }
          Ops::point(w.t, Pi[j]);
          if (jstar < 0 || Ops::less(w.m, w.t)) {
            Ops::set(w.m, w.t);
            jstar = j;
          }
        }
        if (jstar < 0) continue;  // the row sees no key: no gradient
        if (sink) {               // P_sink = exp(sink_h − LSE_i)
          Ops::set_d(w.t, f.sinks[static_cast<std::size_t>(h)]);
          Ops::sub(w.t, w.t, lse[static_cast<std::size_t>(i)]);
          Ops::exp(Psink, w.t);
          Ops::point(w.t, Psink);
          if (Ops::less(w.m, w.t)) jstar = s.Lk;
        }
        // δ = dP_ij* − D_i = Σ_{k≠j*} P_ik (dP_ij* − dP_ik)   (as D_i = Σ_c dO_ic O_ic = Σ_k P_ik dP_ik, Σ_k P_ik = 1)
        const Real &dPstar = jstar == s.Lk ? dPsink : w.row[static_cast<std::size_t>(jstar)];
        Ops::set_d(w.l, 0.0);
        for (std::int64_t j = 0; j < s.Lk; ++j) {
          if (j == jstar || !seen(j)) continue;
          Ops::sub(w.t, dPstar, w.row[static_cast<std::size_t>(j)]);
          Ops::fma(w.l, Pi[j], w.t, w.tmp);
        }
        if (sink && jstar != s.Lk) Ops::fma(w.l, Psink, dPstar, w.tmp);  // P_sink (dP_ij* − 0)
        for (std::int64_t j = 0; j < s.Lk; ++j) {
          if (!seen(j)) continue;
          // dS_ij = P_ij (dP_ij − D_i) = P_ij ((dP_ij − dP_ij*) + δ)
          if (j == jstar) {
            Ops::mul(dS, Pi[j], w.l);
          } else {
            Ops::sub(w.t, w.row[static_cast<std::size_t>(j)], dPstar);
            Ops::add(w.t, w.t, w.l);
            Ops::mul(dS, Pi[j], w.t);
          }
          if (softcap) {  // ∂s/∂x = sech²(x/c)
            Ops::sech(w.t, Y[static_cast<std::size_t>(i * s.Lk + j)]);
            Ops::mul(w.t, w.t, w.t);
            Ops::mul(dS, dS, w.t);
          }
          for (std::int64_t d = 0; d < s.D; ++d) {
            Ops::fma(dq[i * s.D + d], dS, k[j * s.D + d], w.tmp);
            Ops::fma(dk[j * s.D + d], dS, q[i * s.D + d], w.tmp);
          }
          if (!dropout) {
            for (std::int64_t c = 0; c < s.Dv; ++c) Ops::fma(dv[j * s.Dv + c], Pi[j], dOi[c], w.tmp);
          } else if (kept(j)) {  // P_ij z_ij = P_ij / (1 − p)
            Ops::div(w.u, Pi[j], w.keep);
            for (std::int64_t c = 0; c < s.Dv; ++c) Ops::fma(dv[j * s.Dv + c], w.u, dOi[c], w.tmp);
          }
        }
      }
    }
  for (Real &x : g.dq) Ops::mul_d(x, x, in.params.scale);
  for (Real &x : g.dk) Ops::mul_d(x, x, in.params.scale);
  return g;
}

/// backward_t of the problem's exact inputs at `bits`; throws std::invalid_argument without p.dout.
template <class Real>
BackwardT<Real> backward_t(const Problem &p, unsigned bits = kReferenceBits) {
  detail::checked_shape(p, bits, true);
  return backward_t(load_inputs<Real>(p, bits));
}

// Instantiated once, in reference.cpp.
extern template InputsT<boost::multiprecision::mpfr_float> load_inputs(const Problem &, unsigned);
extern template ForwardT<boost::multiprecision::mpfr_float> forward_t(const InputsT<boost::multiprecision::mpfr_float> &,
                                                                      KeepP);
extern template BackwardT<boost::multiprecision::mpfr_float> backward_t(
    const InputsT<boost::multiprecision::mpfr_float> &);
extern template InputsT<boost::multiprecision::mpfi_float> load_inputs(const Problem &, unsigned);
extern template ForwardT<boost::multiprecision::mpfi_float> forward_t(const InputsT<boost::multiprecision::mpfi_float> &,
                                                                      KeepP);
extern template BackwardT<boost::multiprecision::mpfi_float> backward_t(
    const InputsT<boost::multiprecision::mpfi_float> &);

}  // namespace attncheck
