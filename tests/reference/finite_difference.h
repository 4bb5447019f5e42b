// The finite-difference check of the reference's gradients, shared by the gradient and feature tests: central
// differences of f(q, k, v) = Σ dO·O at 256 bits against the backward's dQ, dK, dV.
#pragma once

#include "attncheck/reference.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

namespace attncheck::test {

using boost::multiprecision::mpfr_float;

inline constexpr unsigned kFdBits = 256;
/// Step h = 2^-kFdStepExp: truncation error ~h² ≈ 1e-60, rounding error ~2^-256/h ≈ 1e-47.
inline constexpr int kFdStepExp = 100;
/// |finite difference − gradient| ≤ kFdRel · max(1, |gradient|): far above both errors, far below any formula slip.
inline constexpr double kFdRel = 1e-35;

/// f(q, k, v) = Σ dO · O(q, k, v).
inline mpfr_float objective(const InputsT<mpfr_float> &in) {
  const ForwardT<mpfr_float> f = forward_t(in, KeepP::no);
  mpfr_float sum = RealOps<mpfr_float>::make(in.bits), tmp = sum;
  for (std::size_t n = 0; n < f.out.size(); ++n) RealOps<mpfr_float>::fma(sum, in.dout[n], f.out[n], tmp);
  return sum;
}

/// Compares each entry of `grad` with (f(x + h e_n) − f(x − h e_n)) / 2h, perturbing member `which` of the inputs.
inline void check_against_fd(const InputsT<mpfr_float> &in, std::vector<mpfr_float> InputsT<mpfr_float>::*which,
                      const std::vector<mpfr_float> &grad, const char *name) {
  const mpfr_float h = ldexp(mpfr_float(1), -kFdStepExp);
  REQUIRE(grad.size() == (in.*which).size());
  for (std::size_t n = 0; n < grad.size(); ++n) {
    InputsT<mpfr_float> plus = in, minus = in;
    (plus.*which)[n] += h;
    (minus.*which)[n] -= h;
    const mpfr_float fd = (objective(plus) - objective(minus)) / (2 * h);
    const double err = static_cast<double>(abs(fd - grad[n]));
    const double tol = kFdRel * std::max(1.0, static_cast<double>(abs(grad[n])));
    INFO(name << "[" << n << "] gradient " << static_cast<double>(grad[n]) << " finite difference "
              << static_cast<double>(fd));
    REQUIRE(err <= tol);
  }
}

}  // namespace attncheck::test
