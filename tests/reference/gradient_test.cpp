// The backward formulas against central finite differences at 256 bits, and the reference's refusals.
#include "attncheck/reference.hpp"
#include "random_problem.h"

#include <catch2/catch.hpp>

#include <string>

using namespace attncheck;
using attncheck::test::random_problem;
using attncheck::test::RandomSpec;
using boost::multiprecision::mpfr_float;

namespace {

constexpr unsigned kFdBits = 256;
/// Step h = 2^-kFdStepExp: truncation error ~h² ≈ 1e-60, rounding error ~2^-256/h ≈ 1e-47.
constexpr int kFdStepExp = 100;
/// |finite difference − gradient| ≤ kFdRel · max(1, |gradient|): far above both errors, far below any formula slip.
constexpr double kFdRel = 1e-35;

/// f(q, k, v) = Σ dO · O(q, k, v).
mpfr_float objective(const InputsT<mpfr_float> &in) {
  const ForwardT<mpfr_float> f = forward_t(in, KeepP::no);
  mpfr_float sum = RealOps<mpfr_float>::make(in.bits), tmp = sum;
  for (std::size_t n = 0; n < f.out.size(); ++n) RealOps<mpfr_float>::fma(sum, in.dout[n], f.out[n], tmp);
  return sum;
}

/// Compares each entry of `grad` with (f(x + h e_n) − f(x − h e_n)) / 2h, perturbing member `which` of the inputs.
void check_against_fd(const InputsT<mpfr_float> &in, std::vector<mpfr_float> InputsT<mpfr_float>::*which,
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

}  // namespace

TEST_CASE("backward agrees with central finite differences of sum dO·O at 256 bits", "[reference][gradient]") {
  const ScopedDefaultPrecision<mpfr_float> prec(kFdBits);  // the perturbations and differences above
  struct Case {
    Shape shape;
    Mask mask;
    double spread;
  };
  const Case cases[] = {
      {{1, 2, 1, 3, 4, 3, 2}, Mask::causal, 1.0},  // GQA, causal with Lq < Lk
      {{1, 2, 2, 4, 3, 2, 3}, Mask::causal, 1.0},  // Lq > Lk: a row that sees no key
      {{1, 1, 1, 2, 5, 3, 2}, Mask::none, 6.0},    // peaked softmax
  };
  std::uint64_t seed = 0xfd;
  for (const Case &c : cases) {
    const Problem p = random_problem(RandomSpec{c.shape, Dtype::f32, c.mask, c.spread}, ++seed);
    INFO(c.shape.describe() << " " << mask_name(c.mask) << " spread " << c.spread);
    const InputsT<mpfr_float> in = load_inputs<mpfr_float>(p, kFdBits);
    const BackwardT<mpfr_float> g = backward_t(in);
    check_against_fd(in, &InputsT<mpfr_float>::q, g.dq, "dq");
    check_against_fd(in, &InputsT<mpfr_float>::k, g.dk, "dk");
    check_against_fd(in, &InputsT<mpfr_float>::v, g.dv, "dv");
  }
}

TEST_CASE("shapes that disagree are refused with a message naming them", "[reference][errors]") {
  const Shape s{1, 2, 1, 3, 4, 8, 2};
  const Problem good = random_problem(RandomSpec{s, Dtype::f32, Mask::none, 1.0}, 1);

  Problem bad_d = good;
  bad_d.k = Tensor::contiguous(Dtype::f32, {1, 1, 4, 6});
  REQUIRE_THROWS_AS(reference_forward(bad_d), std::invalid_argument);
  REQUIRE_THROWS_WITH(reference_forward(bad_d), Catch::Contains("head dims differ"));
  REQUIRE_THROWS_WITH(certified_forward(bad_d), Catch::Contains("head dims differ"));

  Problem bad_heads = good;
  bad_heads.q = Tensor::contiguous(Dtype::f32, {1, 3, 3, 8});
  bad_heads.k = Tensor::contiguous(Dtype::f32, {1, 2, 4, 8});
  bad_heads.v = Tensor::contiguous(Dtype::f32, {1, 2, 4, 2});
  REQUIRE_THROWS_WITH(reference_forward(bad_heads), Catch::Contains("not a multiple"));

  Problem bad_dout = good;
  bad_dout.dout = Tensor::contiguous(Dtype::f32, {1, 2, 3, 5});
  REQUIRE_THROWS_WITH(reference_backward(bad_dout), Catch::Contains("dout"));

  Problem stale_shape = good;
  stale_shape.shape.Lk = 5;
  REQUIRE_THROWS_WITH(reference_forward(stale_shape), Catch::Contains("Problem::shape"));

  REQUIRE_THROWS_WITH(reference_forward(good, kMinReferenceBits - 1), Catch::Contains("bits"));
}

TEST_CASE("backward without dout is refused", "[reference][errors]") {
  const Shape s{1, 1, 1, 2, 2, 2, 2};
  Problem p = random_problem(RandomSpec{s, Dtype::f32, Mask::none, 1.0, Layout::bhld, 0, false}, 2);
  REQUIRE_FALSE(p.dout.has_value());
  REQUIRE_NOTHROW(reference_forward(p));
  REQUIRE_THROWS_AS(reference_backward(p), std::invalid_argument);
  REQUIRE_THROWS_WITH(reference_backward(p), Catch::Contains("dout"));
  REQUIRE_THROWS_WITH(certified_backward(p), Catch::Contains("dout"));
  REQUIRE_THROWS_AS(backward_t(load_inputs<mpfr_float>(p)), std::invalid_argument);
}
