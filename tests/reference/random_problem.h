// Test-local problem builders for the reference tests: deterministic random problems (std::mt19937_64) and
// problems from explicit values. Every value is exactly representable in the dtype: a double is drawn and
// Tensor::set rounds it, and the reference reads back what was stored.
#pragma once

#include "attncheck/problem.h"

#include <cstdint>
#include <random>
#include <vector>

namespace attncheck::test {

/// How to draw a random problem.
struct RandomSpec {
  Shape shape;
  Dtype dtype = Dtype::f32;
  Mask mask = Mask::none;
  double spread = 1.0;  ///< q, k, v, dout uniform in [−spread, spread] before rounding to the dtype
  Layout layout = Layout::bhld;
  std::int64_t pad = 0;  ///< padding elements (Tensor::with_layout)
  bool with_dout = true;
};

/// Fills t in row-major order of its logical shape (so the values do not depend on its layout).
inline void fill_uniform(Tensor &t, std::mt19937_64 &rng, double spread) {
  std::uniform_real_distribution<double> u(-spread, spread);
  for_each_index(t.shape(), [&](std::span<const std::int64_t> idx) { t.set(idx, u(rng)); });
}

/// A random problem with scale = default_scale(D); the same seed gives the same values in every layout.
inline Problem random_problem(const RandomSpec &r, std::uint64_t seed) {
  const Shape &s = r.shape;
  Problem p;
  p.shape = s;
  p.params.scale = default_scale(s.D);
  p.params.mask = r.mask;
  p.q = Tensor::with_layout(r.dtype, {s.B, s.Hq, s.Lq, s.D}, r.layout, r.pad);
  p.k = Tensor::with_layout(r.dtype, {s.B, s.Hkv, s.Lk, s.D}, r.layout, r.pad);
  p.v = Tensor::with_layout(r.dtype, {s.B, s.Hkv, s.Lk, s.Dv}, r.layout, r.pad);
  std::mt19937_64 rng(seed);
  fill_uniform(p.q, rng, r.spread);
  fill_uniform(p.k, rng, r.spread);
  fill_uniform(p.v, rng, r.spread);
  if (r.with_dout) {
    p.dout = Tensor::with_layout(r.dtype, {s.B, s.Hq, s.Lq, s.Dv}, r.layout, r.pad);
    fill_uniform(*p.dout, rng, r.spread);
  }
  return p;
}

/// A float32 problem from row-major values (each must be a float for the test to mean what it says).
inline Problem make_problem(const Shape &s, Params params, const std::vector<double> &q, const std::vector<double> &k,
                            const std::vector<double> &v, const std::vector<double> &dout = {}) {
  Problem p;
  p.shape = s;
  p.params = params;
  p.q = Tensor::contiguous(Dtype::f32, {s.B, s.Hq, s.Lq, s.D});
  p.k = Tensor::contiguous(Dtype::f32, {s.B, s.Hkv, s.Lk, s.D});
  p.v = Tensor::contiguous(Dtype::f32, {s.B, s.Hkv, s.Lk, s.Dv});
  p.q.assign(q);
  p.k.assign(k);
  p.v.assign(v);
  if (!dout.empty()) {
    p.dout = Tensor::contiguous(Dtype::f32, {s.B, s.Hq, s.Lq, s.Dv});
    p.dout->assign(dout);
  }
  return p;
}

}  // namespace attncheck::test
