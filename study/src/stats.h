// Estimators with confidence intervals (normal approximation, CLT) used throughout the study.
#pragma once

#include "attncheck/study.h"

#include <cstdint>
#include <span>
#include <vector>

namespace attncheck::study {

/// Two-sided confidence level of every interval in the report.
inline constexpr double kConfidence = 0.99;

/// z with P(|N(0,1)| ≤ z) = confidence, i.e. erfc(z/√2) = 1 − confidence, by bisection on std::erfc.
double normal_quantile_two_sided(double confidence);

/// Mean of independent samples with the interval x̄ ± z·s/√n.
Estimate mean_estimate(std::span<const double> x, double z);

/// Variance of independent samples: s² (unbiased) with the CLT interval s² ± z·√((m₄ − s⁴)/n), where m₄ is the
/// sample 4th central moment — valid whatever the distribution's kurtosis (q·k is not Gaussian for small d_k).
Estimate variance_estimate(std::span<const double> x, double z);

/// Raw moment E[x^k] with the interval from the sample 2k-th raw moment: m_k ± z·√((m_{2k} − m_k²)/n).
Estimate raw_moment_estimate(std::span<const double> x, int k, double z);

/// Quantile p of the samples (sorted ascending) with the order-statistic interval: ranks
/// n·p ± z·√(n·p(1−p)) (binomial count of samples below the true quantile, normal approximation).
Estimate quantile_estimate(std::span<const double> sorted, double p, double z);

}  // namespace attncheck::study
