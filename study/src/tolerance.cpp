#include "study_internal.h"

#include <cmath>
#include <limits>

namespace attncheck::study {
namespace {
constexpr int kOpsPerKey = 2;  ///< exp and its addition to the row sum
constexpr int kOpsFixed = 4;   ///< division, multiply by v, addition to O, final rounding
}  // namespace

double gamma_n(double n, double u) {
  const double nu = n * u;
  return nu >= 1 ? std::numeric_limits<double>::infinity() : nu / (1 - nu);
}

double naive_tolerance(Dtype dt, int keys, double exact_out) {
  return gamma_n(kOpsPerKey * keys + kOpsFixed, unit_roundoff(dt)) * std::abs(exact_out);
}

double kernel_tolerance(const Problem &p, std::size_t, double exact_out) {
  return naive_tolerance(p.dtype(), static_cast<int>(p.shape.Lk), exact_out);
}

}  // namespace attncheck::study
