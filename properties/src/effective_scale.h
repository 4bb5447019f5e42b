// Probes shared by variance_normalization and gradient_nonvanishing: problems whose softmax weights the kernel
// returns as O (v = identity, Dv = Lk ⇒ O_ij = P_ij), and rigorous intervals that the error model puts around the
// logit differences log P_ij − log P_ik = s_ij − s_ik read off them.
//
// Every interval here holds for a CORRECT kernel (|Ô − O| ≤ β_O, the error model's soundness) up to outward
// rounding of the double arithmetic done here; a kernel whose effective scale differs from 1/√D lands outside.
#pragma once

#include "attncheck/property.h"

#include "gen/bits.h"
#include "slack.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace attncheck::props::probe {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
/// Outward steps (ulps of double) around each std::log: glibc's log is within 1 ulp; 2 steps also cover the
/// rounding of P̂ ± β.
inline constexpr int kLogUlps = 2;
/// The integer probe's logit difference under the contract: scale·g = ⌈kProbeLogitGap·√D⌉/√D ≈ 2, i.e.
/// P ≈ (0.88, 0.12): both far from underflow and from 1 in every storage dtype.
inline constexpr double kProbeLogitGap = 2;

inline double down(double x, int steps = 1) {
  for (int n = 0; n < steps; ++n) x = std::nextafter(x, -kInf);
  return x;
}
inline double up(double x, int steps = 1) {
  for (int n = 0; n < steps; ++n) x = std::nextafter(x, kInf);
  return x;
}

/// A closed interval of reals; lo may be −∞, hi +∞.
struct Interval {
  double lo = -kInf, hi = kInf;
  bool contains(double x) const { return lo <= x && x <= hi; }
  bool finite() const { return std::isfinite(lo) && std::isfinite(hi); }
};

/// Interval of log P for an exact weight P with |P̂ − P| ≤ β, P ∈ [0, 1]: [log max(P̂ − β, 0), log min(P̂ + β, 1)]
/// (−∞ at the bottom when P̂ − β ≤ 0: underflow or a bound as large as the value).
inline Interval log_weight(double p_hat, double beta) {
  const double lo = std::max(down(p_hat - beta), 0.0), hi = std::min(up(p_hat + beta), 1.0);
  Interval r;
  r.lo = lo > 0 ? down(std::log(lo), kLogUlps) : -kInf;
  r.hi = hi > 0 ? up(std::log(hi), kLogUlps) : -kInf;
  return r;
}

/// Interval of log P_a − log P_b (the logit difference s_a − s_b) from two weights and their bounds.
inline Interval log_ratio(double pa, double ba, double pb, double bb) {
  const Interval a = log_weight(pa, ba), b = log_weight(pb, bb);
  Interval r;
  // −∞ − (−∞) (both weights may be 0) is NaN: the difference is then unbounded on that side.
  const double lo = a.lo - b.hi, hi = a.hi - b.lo;
  r.lo = std::isnan(lo) ? -kInf : down(lo);
  r.hi = std::isnan(hi) ? kInf : up(hi);
  return r;
}

/// [min d², max d²] over d in `d`.
inline Interval square(const Interval &d) {
  Interval r;
  if (d.contains(0)) {
    r.lo = 0;
  } else {
    const double m = std::min(std::abs(d.lo), std::abs(d.hi));
    r.lo = down(m * m);
  }
  const double M = std::max(std::abs(d.lo), std::abs(d.hi));
  r.hi = up(M * M);
  return r;
}

/// v = identity in every (batch, kv head): v[b, h, j, c] = [j = c] (requires Dv = Lk).
inline void set_identity_v(Case &c) {
  const Shape &s = c.spec.shape;
  std::fill(c.v.begin(), c.v.end(), 0.0);
  for (std::int64_t bh = 0; bh < s.B * s.Hkv; ++bh)
    for (std::int64_t j = 0; j < s.Lk; ++j) c.v[static_cast<std::size_t>((bh * s.Lk + j) * s.Dv + j)] = 1;
}

/// The integer probe of the effective scale at head dim D (the dtype and layout of `base`): one query of ones,
/// key 0 = 0, key 1 = integers summing to −g with g = ⌈kProbeLogitGap·√D⌉, so that q·(k_0 − k_1) = g exactly
/// in every dtype; v = identity. Lk = Dv = 2, or 3 when D = 2 (key 2 = key 0), so that Dv ≠ D and a kernel that
/// scales by 1/√Dv is told apart from 1/√D — except for a case with Dv = D ≥ 2 (probe_dv_equals_d): what a kernel
/// that declines Dv ≠ D is given (CaseOptions::tie_head_dims), then Lk = Dv = D, keys 2… = key 0, and 1/√Dv is 1/√D
/// for it. The weights of keys 0 and 1 keep their ratio e^{s·g} whatever the other keys. No mask.
struct ScaleProbe {
  Case c;
  double gap = 0;  ///< g = q·(k_0 − k_1)
};
/// The probes of a case with Dv = D ≥ 2 keep Dv = D (scale_probe).
inline bool probe_dv_equals_d(const Shape &s) { return s.D == s.Dv && s.D >= 2; }
inline ScaleProbe scale_probe(const CaseSpec &base) {
  ScaleProbe pr;
  Case &c = pr.c;
  c.spec = base;
  c.spec.mask = Mask::none;
  const std::int64_t D = base.shape.D;
  const std::int64_t L = probe_dv_equals_d(base.shape) ? D : D == 2 ? 3 : 2;
  c.spec.shape = Shape{.B = 1, .Hq = 1, .Hkv = 1, .Lq = 1, .Lk = L, .D = D, .Dv = L};
  c.resize_values(false);
  const auto g = static_cast<std::int64_t>(std::ceil(kProbeLogitGap * std::sqrt(static_cast<double>(D))));
  std::fill(c.q.begin(), c.q.end(), 1.0);
  std::fill(c.k.begin(), c.k.end(), 0.0);
  // Key 1: −⌊g/D⌋ everywhere and one more −1 in the first g mod D entries (small integers: exact in bfloat16).
  for (std::int64_t d = 0; d < D; ++d)
    c.k[static_cast<std::size_t>(D + d)] = -static_cast<double>(g / D + (d < g % D ? 1 : 0));
  set_identity_v(c);
  pr.gap = static_cast<double>(g);
  return pr;
}

/// The effective scale interval from the probe's returned weights P̂_0, P̂_1 and their bounds: every scale s whose
/// exact weights lie within the bounds of the returned ones, s = (log P_0 − log P_1)/g.
inline Interval effective_scale(const ScaleProbe &pr, const std::vector<double> &p_hat,
                                const std::vector<double> &beta) {
  const Interval d = log_ratio(p_hat[0], beta[0], p_hat[1], beta[1]);
  return Interval{down(d.lo / pr.gap), up(d.hi / pr.gap)};
}

/// 64-bit FNV-1a over the case's spec line and the bits of its values: the seed of a property's own draws, so
/// that the same case gives the same draws (and outcome).
inline std::uint64_t case_hash(const Case &c) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](std::uint64_t x) {
    for (int byte = 0; byte < 8; ++byte) {
      h ^= (x >> (8 * byte)) & 0xffU;
      h *= 0x100000001b3ULL;
    }
  };
  for (char ch : c.spec.describe()) mix(static_cast<unsigned char>(ch));
  for (double x : c.flat()) {
    mix(std::bit_cast<std::uint64_t>(x));
  }
  return h;
}

/// SplitMix64 with Box–Muller normals: a small deterministic generator, identical on every platform (unlike
/// std::normal_distribution, whose algorithm is the library's choice).
class Normal {
 public:
  explicit Normal(std::uint64_t seed) : bits_(seed) {}
  double operator()() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    constexpr double kTwoPi = 6.283185307179586476925286766559;
    const double u1 = (static_cast<double>(next() >> 11) + 1) * 0x1p-53;  // (0, 1]: log(u1) finite
    const double u2 = static_cast<double>(next() >> 11) * 0x1p-53;
    const double r = std::sqrt(-2 * std::log(u1));
    spare_ = r * std::sin(kTwoPi * u2);
    have_spare_ = true;
    return r * std::cos(kTwoPi * u2);
  }

 private:
  std::uint64_t next() { return bits_.next(); }
  gen_detail::SplitMix64 bits_;
  double spare_ = 0;
  bool have_spare_ = false;
};

}  // namespace attncheck::props::probe
