// The reference's double-valued API (reference.h) and the one instantiation of its templates (reference.hpp)
// for MPFR (round to nearest at `bits`) and MPFI (certified enclosures).
#include "attncheck/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
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
  return s;
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
