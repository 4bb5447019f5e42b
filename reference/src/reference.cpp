// The reference's double-valued API (reference.h) and the one instantiation of its templates (reference.hpp)
// for MPFR (round to nearest at `bits`) and MPFI (certified enclosures).
#include "attncheck/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

namespace attncheck {

using boost::multiprecision::mpfi_float;
using boost::multiprecision::mpfr_float;

template InputsT<mpfr_float> load_inputs(const Problem &, unsigned);
template ForwardT<mpfr_float> forward_t(const InputsT<mpfr_float> &, KeepP);
template BackwardT<mpfr_float> backward_t(const InputsT<mpfr_float> &);
template InputsT<mpfi_float> load_inputs(const Problem &, unsigned);
template ForwardT<mpfi_float> forward_t(const InputsT<mpfi_float> &, KeepP);
template BackwardT<mpfi_float> backward_t(const InputsT<mpfi_float> &);

namespace detail {

Shape checked_shape(const Problem &p, unsigned bits, bool need_dout) {
  if (bits < kMinReferenceBits)
    throw std::invalid_argument("reference: precision of " + std::to_string(bits) + " bits is below the minimum " +
                                std::to_string(kMinReferenceBits) + " (inputs and scale must be exact)");
  if (need_dout && !p.dout)
    throw std::invalid_argument("reference backward needs p.dout (the output gradient dO [B,Hq,Lq,Dv]); it is empty");
  const Shape s = shape_of(p.q, p.k, p.v, p.dout ? &*p.dout : nullptr);  // throws with the disagreeing dims
  if (!(s == p.shape))
    throw std::invalid_argument("reference: Problem::shape (" + p.shape.describe() + ") is not the shape of its tensors (" +
                                s.describe() + ")");
  if (!std::isfinite(p.params.scale))
    throw std::invalid_argument("reference: the scale must be finite; got " + std::to_string(p.params.scale));
  check_features(p.features, s);
  return s;
}

namespace {

[[noreturn]] void bad_feature(const std::string &what) {
  throw std::invalid_argument("reference: features: " + what);
}

std::string num(std::int64_t n) { return std::to_string(n); }
std::string num(std::size_t n) { return std::to_string(n); }
std::string num(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

/// A per-head vector (alibi_slopes, sinks): empty or Hq finite entries.
void check_per_head(const std::vector<double> &xs, const char *name, const Shape &s) {
  if (xs.empty()) return;
  if (static_cast<std::int64_t>(xs.size()) != s.Hq)
    bad_feature(std::string(name) + " has " + num(xs.size()) + " entries; it needs Hq = " + num(s.Hq) + " (one per query head)");
  for (std::size_t h = 0; h < xs.size(); ++h)
    if (!std::isfinite(xs[h])) bad_feature(std::string(name) + "[" + num(h) + "] = " + num(xs[h]) + " is not finite");
}

/// seqlens_q / seqlens_k: empty or B entries in [0, L].
void check_lengths(const std::vector<std::int64_t> &xs, const char *name, const char *dim, std::int64_t L,
                   const Shape &s) {
  if (xs.empty()) return;
  if (static_cast<std::int64_t>(xs.size()) != s.B)
    bad_feature(std::string(name) + " has " + num(xs.size()) + " entries; it needs B = " + num(s.B));
  for (std::size_t b = 0; b < xs.size(); ++b)
    if (xs[b] < 0 || xs[b] > L)
      bad_feature(std::string(name) + "[" + num(b) + "] = " + num(xs[b]) + " is outside [0, " + dim + " = " + num(L) + "]");
}

}  // namespace

void check_features(const Features &f, const Shape &s) {
  if (f.window_left < -1 || f.window_right < -1)
    bad_feature("window_left, window_right must be >= -1 (-1: unbounded); got " + num(f.window_left) + ", " +
                num(f.window_right));
  if (!(f.softcap >= 0) || !std::isfinite(f.softcap))
    bad_feature("softcap must be finite and >= 0 (0: off); got " + num(f.softcap));
  check_per_head(f.alibi_slopes, "alibi_slopes", s);
  check_per_head(f.sinks, "sinks", s);
  if (f.mask_kind != MaskKind::none) {
    if (f.mask_B != 1 && f.mask_B != s.B)
      bad_feature("mask_B = " + num(f.mask_B) + " must be 1 or B = " + num(s.B));
    if (f.mask_H != 1 && f.mask_H != s.Hq)
      bad_feature("mask_H = " + num(f.mask_H) + " must be 1 or Hq = " + num(s.Hq));
    const std::int64_t n = f.mask_B * f.mask_H * s.Lq * s.Lk;
    if (static_cast<std::int64_t>(f.mask.size()) != n)
      bad_feature("mask has " + num(f.mask.size()) + " entries; [mask_B, mask_H, Lq, Lk] = [" + num(f.mask_B) + ", " +
                  num(f.mask_H) + ", " + num(s.Lq) + ", " + num(s.Lk) + "] needs " + num(n));
    for (std::size_t e = 0; e < f.mask.size(); ++e)
      if (std::isnan(f.mask[e]) || (f.mask_kind == MaskKind::additive && f.mask[e] == INFINITY))
        bad_feature("mask[" + num(e) + "] = " + num(f.mask[e]) + " is not allowed (NaN, or +inf in an additive mask)");
  }
  check_lengths(f.seqlens_q, "seqlens_q", "Lq", s.Lq, s);
  check_lengths(f.seqlens_k, "seqlens_k", "Lk", s.Lk, s);
  if (!(f.dropout_p >= 0 && f.dropout_p < 1)) bad_feature("dropout_p must be in [0, 1); got " + num(f.dropout_p));
  if (f.dropout_p > 0) {
    const std::int64_t n = s.B * s.Hq * s.Lq * s.Lk;
    if (static_cast<std::int64_t>(f.dropout_keep.size()) != n)
      bad_feature("dropout_keep has " + num(f.dropout_keep.size()) + " entries; dropout_p > 0 needs B*Hq*Lq*Lk = " +
                  num(n) + " (the mask the kernel applied)");
  }
  if (f.fp8)
    for (double d : {f.descale_q, f.descale_k, f.descale_v})
      if (!std::isfinite(d) || d == 0 || static_cast<double>(static_cast<float>(d)) != d)
        bad_feature("FP8 descale factors must be finite, nonzero float32 values; got " + num(d));
}

}  // namespace detail

namespace {

template <class Real>
std::vector<double> round_nearest(const std::vector<Real> &xs) {
  std::vector<double> out(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) out[i] = RealOps<Real>::nearest(xs[i]);
  return out;
}

template <class Real>
Enclosure enclose(const std::vector<Real> &xs) {
  Enclosure e;
  e.lo.resize(xs.size());
  e.hi.resize(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    e.lo[i] = RealOps<Real>::lower(xs[i]);
    e.hi[i] = RealOps<Real>::upper(xs[i]);
  }
  return e;
}

/// hi − lo, and 0 when lo == hi (also for equal infinities, e.g. the LSE −∞ of a row that sees no key).
double width(double lo, double hi) { return lo == hi ? 0.0 : hi - lo; }

/// Spacing of doubles just above |x| (the smallest subnormal at 0).
double ulp(double x) {
  const double a = std::fabs(x);
  return std::nextafter(a, std::numeric_limits<double>::infinity()) - a;
}

}  // namespace

ExactForward reference_forward(const Problem &p, unsigned bits) {
  const ForwardT<mpfr_float> f = forward_t<mpfr_float>(p, bits, KeepP::no);
  return ExactForward{round_nearest(f.out), round_nearest(f.lse)};
}

ExactBackward reference_backward(const Problem &p, unsigned bits) {
  const BackwardT<mpfr_float> g = backward_t<mpfr_float>(p, bits);
  return ExactBackward{round_nearest(g.dq), round_nearest(g.dk), round_nearest(g.dv)};
}

CertifiedForward certified_forward(const Problem &p, unsigned bits) {
  const ForwardT<mpfi_float> f = forward_t<mpfi_float>(p, bits, KeepP::no);
  return CertifiedForward{enclose(f.out), enclose(f.lse)};
}

CertifiedBackward certified_backward(const Problem &p, unsigned bits) {
  const BackwardT<mpfi_float> g = backward_t<mpfi_float>(p, bits);
  return CertifiedBackward{enclose(g.dq), enclose(g.dk), enclose(g.dv)};
}

double Enclosure::max_width() const {
  double w = 0;
  for (std::size_t i = 0; i < lo.size(); ++i) w = std::max(w, width(lo[i], hi[i]));
  return w;
}

double Enclosure::max_width_ulps() const {
  double w = 0;
  for (std::size_t i = 0; i < lo.size(); ++i) {
    if (!std::isfinite(lo[i]) || !std::isfinite(hi[i])) continue;
    const double mid = lo[i] / 2 + hi[i] / 2;  // halves first: no overflow
    w = std::max(w, width(lo[i], hi[i]) / ulp(mid));
  }
  return w;
}

}  // namespace attncheck
