#include "stats.h"

#include <algorithm>
#include <cmath>

namespace attncheck::study {

double normal_quantile_two_sided(double confidence) {
  // erfc(z/√2) decreases from 1 at z = 0; kZHigh is far beyond any confidence the report uses.
  constexpr double kZHigh = 40;
  constexpr int kBisections = 200;
  const double tail = 1 - confidence;
  double lo = 0, hi = kZHigh;
  for (int i = 0; i < kBisections; ++i) {
    const double mid = (lo + hi) / 2;
    (std::erfc(mid / std::sqrt(2.0)) > tail ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

Estimate mean_estimate(std::span<const double> x, double z) {
  const auto n = static_cast<double>(x.size());
  double sum = 0;
  for (double v : x) sum += v;
  const double mean = sum / n;
  double ss = 0;
  for (double v : x) ss += (v - mean) * (v - mean);
  const double se = x.size() > 1 ? std::sqrt(ss / (n - 1) / n) : 0;
  return {mean, mean - z * se, mean + z * se, static_cast<std::int64_t>(x.size())};
}

Estimate variance_estimate(std::span<const double> x, double z) {
  const auto n = static_cast<double>(x.size());
  double sum = 0;
  for (double v : x) sum += v;
  const double mean = sum / n;
  double m2 = 0, m4 = 0;
  for (double v : x) {
    const double d2 = (v - mean) * (v - mean);
    m2 += d2;
    m4 += d2 * d2;
  }
  const double s2 = m2 / (n - 1);
  m4 /= n;
  const double se = std::sqrt(std::max(0.0, m4 - s2 * s2) / n);
  return {s2, s2 - z * se, s2 + z * se, static_cast<std::int64_t>(x.size())};
}

Estimate raw_moment_estimate(std::span<const double> x, int k, double z) {
  const auto n = static_cast<double>(x.size());
  double mk = 0, m2k = 0;
  for (double v : x) {
    const double p = std::pow(v, k);
    mk += p;
    m2k += p * p;
  }
  mk /= n;
  m2k /= n;
  const double se = std::sqrt(std::max(0.0, m2k - mk * mk) / n);
  return {mk, mk - z * se, mk + z * se, static_cast<std::int64_t>(x.size())};
}

Estimate quantile_estimate(std::span<const double> sorted, double p, double z) {
  const auto n = static_cast<double>(sorted.size());
  const auto last = static_cast<double>(sorted.size() - 1);
  auto at = [&](double rank) {
    return sorted[static_cast<std::size_t>(std::clamp(rank, 0.0, last))];
  };
  const double center = n * p, half = z * std::sqrt(n * p * (1 - p));
  return {at(std::floor(center)), at(std::floor(center - half)), at(std::ceil(center + half)),
          static_cast<std::int64_t>(sorted.size())};
}

}  // namespace attncheck::study
