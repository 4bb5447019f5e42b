// Deterministic random numbers for the study: std::mt19937_64 (its output sequence is fixed by the standard)
// and a Marsaglia polar normal generator (std::normal_distribution's algorithm is implementation-defined).
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <random>

namespace attncheck::study {

/// splitmix64 finalizer: decorrelates the per-section seeds derived from one user seed.
inline std::uint64_t mix_seed(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// A stream identifier from its parts (section, then grid coordinates), folded with mix_seed.
inline std::uint64_t stream_key(std::initializer_list<std::uint64_t> parts) {
  std::uint64_t key = 0;
  for (auto part : parts) key = mix_seed(key ^ part);
  return key;
}

class Rng {
 public:
  /// `stream` separates the sections so that changing one's sample size leaves the others' samples alone.
  Rng(std::uint64_t seed, std::uint64_t stream) : engine_(mix_seed(seed ^ mix_seed(stream))) {}

  /// Uniform on [0, 1): the top 53 bits of one 64-bit draw, times 2⁻⁵³.
  double uniform() {
    constexpr int kBits = std::numeric_limits<double>::digits;  // 53
    constexpr int kDrop = std::numeric_limits<std::uint64_t>::digits - kBits;
    return static_cast<double>(engine_() >> kDrop) * std::ldexp(1.0, -kBits);
  }

  /// N(0, 1) by Marsaglia's polar method: (u, v) uniform in the unit disc, s = u² + v², then
  /// u·√(−2 ln s / s) and v·√(−2 ln s / s) are independent standard normals.
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u = 0, v = 0, s = 0;
    do {
      u = 2 * uniform() - 1;
      v = 2 * uniform() - 1;
      s = u * u + v * v;
    } while (s >= 1 || s == 0);
    const double m = std::sqrt(-2 * std::log(s) / s);
    spare_ = v * m;
    has_spare_ = true;
    return u * m;
  }

 private:
  std::mt19937_64 engine_;
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace attncheck::study
