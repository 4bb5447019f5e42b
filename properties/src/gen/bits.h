// Random bits as the draws and mutations need them (private to gen/): uniform, normal and picks from an rc::Random,
// identical on every platform; and the spacing of a dtype's values.
#pragma once

#include "attncheck/dtype.h"

#include <rapidcheck/Random.h>

#include <cmath>
#include <cstdint>
#include <numbers>

namespace attncheck::gen_detail {

/// Random bits as the draws need them.
class Bits {
 public:
  explicit Bits(const rc::Random &r) : r_(r) {}
  std::uint64_t next() { return r_.next(); }
  /// Uniform in [0, 1) with 53 bits.
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  /// Uniform integer in [lo, hi].
  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  bool chance(double p) { return unit() < p; }
  /// N(0, 1) by Box–Muller: identical on every platform.
  double normal() {
    const double u1 = 1.0 - unit(), u2 = unit();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
  template <class C>
  auto pick(const C &c) {
    return c[static_cast<std::size_t>(next() % c.size())];
  }

 private:
  rc::Random r_;
};

/// Significand bits of the dtype: 24, 11, 8.
inline int precision_bits(Dtype dt) { return -std::ilogb(unit_roundoff(dt)); }
/// Spacing of the dtype's values around x.
inline double ulp_in(Dtype dt, double x) {
  if (x == 0) return min_subnormal(dt);
  return std::max(std::ldexp(1.0, std::ilogb(x) - precision_bits(dt) + 1), min_subnormal(dt));
}

}  // namespace attncheck::gen_detail
