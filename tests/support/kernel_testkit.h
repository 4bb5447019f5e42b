// Helpers of the kernel tests (bundled, exec, ...): deterministic random problems in random layouts with NaN
// padding, NaN-prefilled outputs, running forward then backward, and the comparison with the reference under the
// error model.
#pragma once

#include "attncheck/error_model.h"
#include "attncheck/kernel_call.h"
#include "attncheck/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace attncheck::testkit {

inline constexpr Layout kLayouts[] = {Layout::bhld, Layout::blhd, Layout::transposed, Layout::padded};
/// Elements of padding around (and, for Layout::padded, between) the tensors the tests build.
inline constexpr std::int64_t kPad = 3;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// A rank-4 tensor in a random layout, all storage NaN (so that reading padding shows).
inline Tensor random_layout_tensor(std::mt19937_64 &rng, Dtype dt, std::vector<std::int64_t> shape) {
  const Layout l = kLayouts[rng() % std::size(kLayouts)];
  Tensor t = Tensor::with_layout(dt, std::move(shape), l, kPad);
  t.fill_storage(kNaN);
  return t;
}

/// Fills the elements with N(0, σ²) values (rounded to the dtype by Tensor::assign, hence exactly stored).
inline void fill_normal(std::mt19937_64 &rng, Tensor &t, double sigma = 1.0) {
  std::normal_distribution<double> nd(0.0, sigma);
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  for (double &x : v) x = nd(rng);
  t.assign(v);
}

/// A problem of the given shape with N(0, 1) values, random layouts and dout.
inline Problem make_problem(std::mt19937_64 &rng, Dtype dt, const Shape &s, Mask mask, double scale) {
  Problem p;
  p.shape = s;
  p.params = Params{scale, mask};
  p.q = random_layout_tensor(rng, dt, {s.B, s.Hq, s.Lq, s.D});
  p.k = random_layout_tensor(rng, dt, {s.B, s.Hkv, s.Lk, s.D});
  p.v = random_layout_tensor(rng, dt, {s.B, s.Hkv, s.Lk, s.Dv});
  p.dout = random_layout_tensor(rng, dt, {s.B, s.Hq, s.Lq, s.Dv});
  for (Tensor *t : {&p.q, &p.k, &p.v, &*p.dout}) fill_normal(rng, *t);
  return p;
}

/// Same, with the contract's default scale 1/√D.
inline Problem make_problem(std::mt19937_64 &rng, Dtype dt, const Shape &s, Mask mask) {
  return make_problem(rng, dt, s, mask, default_scale(s.D));
}

/// A kernel's results for a problem, in random layouts, pre-filled with NaN.
struct Outputs {
  Tensor out, lse, dq, dk, dv;
  Outputs(std::mt19937_64 &rng, const Problem &p) {
    const Shape &s = p.shape;
    const Dtype dt = p.dtype();
    out = random_layout_tensor(rng, dt, {s.B, s.Hq, s.Lq, s.Dv});
    lse = make_lse(s);
    lse.fill_storage(kNaN);
    dq = random_layout_tensor(rng, dt, {s.B, s.Hq, s.Lq, s.D});
    dk = random_layout_tensor(rng, dt, {s.B, s.Hkv, s.Lk, s.D});
    dv = random_layout_tensor(rng, dt, {s.B, s.Hkv, s.Lk, s.Dv});
  }
};

/// Largest error ratio |got − exact| / bound of each result (error_ratio's conventions).
struct Ratios {
  double out = 0, lse = 0, dq = 0, dk = 0, dv = 0;
  double max() const { return std::max({out, lse, dq, dk, dv}); }
  std::string describe() const {
    return "out " + std::to_string(out) + ", lse " + std::to_string(lse) + ", dq " + std::to_string(dq) + ", dk " +
           std::to_string(dk) + ", dv " + std::to_string(dv);
  }
};

/// max over i of error_ratio(got[i], exact[i], bound[i]); +∞ (a failure) on a size mismatch.
inline double max_ratio(const std::vector<double> &got, const std::vector<double> &exact,
                        const std::vector<double> &bound) {
  if (got.size() != exact.size() || got.size() != bound.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double r = error_ratio(got[i], exact[i], bound[i]);
    if (!(r <= worst)) worst = r;  // NaN ratios (none expected) count as failures too
  }
  return worst;
}

/// The reference results and the error model's bounds for a problem (the expensive, MPFR part).
struct Expected {
  ExactForward fwd;
  ExactBackward bwd;
  ForwardBounds fwd_bound;
  BackwardBounds bwd_bound;
  explicit Expected(const Problem &p)
      : fwd(reference_forward(p)), bwd(reference_backward(p)),
        fwd_bound(forward_bounds(p, fwd, PrecisionProfile::for_storage(p.dtype()))),
        bwd_bound(backward_bounds(p, fwd, PrecisionProfile::for_storage(p.dtype()))) {}
};

inline Ratios ratios(const Outputs &o, const Expected &e) {
  Ratios r;
  r.out = max_ratio(o.out.to_vector(), e.fwd.out, e.fwd_bound.out);
  r.lse = max_ratio(o.lse.to_vector(), e.fwd.lse, e.fwd_bound.lse);
  r.dq = max_ratio(o.dq.to_vector(), e.bwd.dq, e.bwd_bound.dq);
  r.dk = max_ratio(o.dk.to_vector(), e.bwd.dk, e.bwd_bound.dk);
  r.dv = max_ratio(o.dv.to_vector(), e.bwd.dv, e.bwd_bound.dv);
  return r;
}

/// Runs forward, then backward on forward's out and lse; returns the first non-OK call result, or OK.
inline CallResult run(const attncheck_kernel &k, const Problem &p, Outputs &o) {
  CallResult r = call_forward(k, p, o.out, &o.lse);
  if (!r.ok()) return r;
  return call_backward(k, p, o.out, &o.lse, o.dq, o.dk, o.dv);
}

}  // namespace attncheck::testkit
