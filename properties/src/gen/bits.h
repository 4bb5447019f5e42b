// Random bits as the draws and mutations need them (private to gen/): uniform, normal and picks from an rc::Random
// or, for values, a SplitMix64 stream seeded from one, identical on every platform; and the spacing of a dtype's
// values.
#pragma once

#include "attncheck/dtype.h"

#include <rapidcheck/Random.h>

#include <cmath>
#include <cstdint>
#include <numbers>

namespace attncheck::gen_detail {

/// SplitMix64 (Steele, Lea & Flood 2014): one 64-bit word per call from a counter. The stream of a case's values:
/// seeded with one word of the case's rc::Random, it costs a few instructions a word where RapidCheck's Random
/// computes a Threefish block every four words (a quarter of drawing a case); values need no splitting.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_;
};

/// Random bits as the draws need them, from an engine with next(): rc::Random (specs, mutations) or SplitMix64
/// (values).
template <class Engine>
class BasicBits {
 public:
  explicit BasicBits(const Engine &e) : e_(e) {}
  std::uint64_t next() { return e_.next(); }
  /// Uniform in [0, 1) with 53 bits.
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  /// Uniform integer in [lo, hi].
  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  bool chance(double p) { return unit() < p; }
  /// N(0, 1) by Box–Muller, both of each pair used: identical on every platform.
  double normal() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - unit(), u2 = unit();
    const double r = std::sqrt(-2.0 * std::log(u1)), t = 2.0 * std::numbers::pi * u2;
    spare_ = r * std::sin(t);
    have_spare_ = true;
    return r * std::cos(t);
  }
  template <class C>
  auto pick(const C &c) {
    return c[static_cast<std::size_t>(next() % c.size())];
  }

 private:
  Engine e_;
  double spare_ = 0;
  bool have_spare_ = false;
};
using Bits = BasicBits<rc::Random>;
using ValueBits = BasicBits<SplitMix64>;

/// Significand bits of the dtype: 24, 11, 8.
inline int precision_bits(Dtype dt) { return -std::ilogb(unit_roundoff(dt)); }
/// Spacing of the dtype's values around x.
inline double ulp_in(Dtype dt, double x) {
  if (x == 0) return min_subnormal(dt);
  return std::max(std::ldexp(1.0, std::ilogb(x) - precision_bits(dt) + 1), min_subnormal(dt));
}

}  // namespace attncheck::gen_detail
