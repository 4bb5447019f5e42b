// The backward formulas against central finite differences at 256 bits, and the reference's refusals.
#include "attncheck/reference.hpp"
#include "finite_difference.h"
#include "random_problem.h"

#include <catch2/catch.hpp>

#include <string>

using namespace attncheck;
using attncheck::test::check_against_fd;
using attncheck::test::kFdBits;
using attncheck::test::random_problem;
using attncheck::test::RandomSpec;
using boost::multiprecision::mpfr_float;


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
