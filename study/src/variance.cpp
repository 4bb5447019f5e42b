// Section 1: the distribution of q·k for q, k i.i.d. N(0, I_d).
//
// x = Σ_i q_i k_i is a sum of d i.i.d. products with E[q_i k_i] = 0, Var(q_i k_i) = E[q_i²]E[k_i²] = 1, so
// Var(x) = d; E[(q_i k_i)⁴] = 9 gives E[x⁴] = 9d + 3d(d−1) = 3d² + 6d (excess kurtosis 6/d: heavier tails than a
// Gaussian for small d). Scaling by c multiplies the variance by c².
#include "random.h"
#include "sections.h"
#include "stats.h"

#include <algorithm>
#include <cmath>

namespace attncheck::study {
namespace {
/// The central 99.7% (the "3σ" range of a Gaussian): quantiles 0.15% and 99.85%.
constexpr double kCentralMass = 0.997;
constexpr double kSigmas = 3;  ///< the ±3σ the 99.7% corresponds to
constexpr int kFourth = 4;
}  // namespace

VarianceSection run_variance(const Plan &plan, std::uint64_t seed, double z) {
  VarianceSection sec;
  sec.quantile_lo = (1 - kCentralMass) / 2;
  sec.quantile_hi = 1 - sec.quantile_lo;
  const auto n = static_cast<std::size_t>(plan.variance_samples);
  for (int dk : plan.dks) {
    Rng rng(seed, stream_key({kStreamVariance, static_cast<std::uint64_t>(dk)}));
    std::vector<double> x(n);
    for (auto &xi : x) {
      double dot = 0;
      for (int i = 0; i < dk; ++i) {
        const double qi = rng.normal();
        dot += qi * rng.normal();
      }
      xi = dot;
    }
    VarianceRow row;
    row.dk = dk;
    row.n = plan.variance_samples;
    auto scaled_variance = [&](double c) {
      std::vector<double> y(x);
      for (auto &v : y) v *= c;
      return variance_estimate(y, z);
    };
    const double d = dk;
    row.var_unscaled = variance_estimate(x, z);
    row.var_inv_sqrt = scaled_variance(1 / std::sqrt(d));
    row.var_inv_linear = scaled_variance(1 / d);
    row.var_inv_cbrt = scaled_variance(1 / std::cbrt(d));
    row.fourth_moment = raw_moment_estimate(x, kFourth, z);
    row.sd = std::sqrt(row.var_unscaled.value);
    std::int64_t within = 0;
    for (double v : x) {
      row.max_abs = std::max(row.max_abs, std::abs(v));
      within += std::abs(v) <= kSigmas * std::sqrt(d);
    }
    row.max_abs_inv_sqrt = row.max_abs / std::sqrt(d);
    row.frac_within_3sd = static_cast<double>(within) / static_cast<double>(n);
    std::sort(x.begin(), x.end());
    row.q_lo = quantile_estimate(x, sec.quantile_lo, z);
    row.q_hi = quantile_estimate(x, sec.quantile_hi, z);
    sec.rows.push_back(row);
  }
  return sec;
}

}  // namespace attncheck::study
