#include "study_internal.h"

#include "attncheck/error_model.h"
#include "attncheck/reference.h"

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

double kernel_tolerance(const Problem &p, std::size_t index) {
  const ExactForward exact = reference_forward(p);
  return forward_bounds(p, exact, PrecisionProfile::for_storage(p.dtype())).out[index];
}

}  // namespace attncheck::study
