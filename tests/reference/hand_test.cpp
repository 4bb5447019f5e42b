// Hand-computed cases: the reference against values worked out on paper.
#include "attncheck/reference.h"
#include "random_problem.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

using namespace attncheck;
using attncheck::test::make_problem;

namespace {
/// Relative tolerance for an expected value computed in double from a closed form (a few ulps).
constexpr double kClosedFormRel = 4 * std::numeric_limits<double>::epsilon();
/// Absolute tolerance for an exact zero that the reference reaches through 128-bit roundings.
constexpr double kZeroAt128 = 1e-30;
}  // namespace

TEST_CASE("a single key gives its value and logit exactly", "[reference][hand]") {
  // s = 0.5 · (1·3 + 2·(−1)) = 0.5; P = 1; O = v; LSE = s. Backward: dS = 0, so dQ = dK = 0 and dV = dO.
  const Shape s{1, 1, 1, 1, 1, 2, 2};
  const Problem p = make_problem(s, Params{0.5, Mask::none}, {1, 2}, {3, -1}, {7, -0.25}, {1.5, -2});
  const ExactForward f = reference_forward(p);
  REQUIRE(f.out == std::vector<double>{7, -0.25});
  REQUIRE(f.lse == std::vector<double>{0.5});
  const ExactBackward g = reference_backward(p);
  REQUIRE(g.dq == std::vector<double>{0, 0});
  REQUIRE(g.dk == std::vector<double>{0, 0});
  REQUIRE(g.dv == std::vector<double>{1.5, -2});
}

TEST_CASE("two keys with logits a and b weigh their values by e^a/(e^a+e^b)", "[reference][hand]") {
  // D = 1, q = 1, scale = 1: the logits are the keys themselves. v = (1, 0) then (0, 1) reads the weights.
  const double a = 0.75, b = -1.5;
  const Shape s{1, 1, 1, 1, 2, 1, 2};
  const Problem p = make_problem(s, Params{1.0, Mask::none}, {1}, {a, b}, {1, 0, 0, 1});
  const ExactForward f = reference_forward(p);
  const double wa = 1 / (1 + std::exp(b - a)), wb = 1 / (1 + std::exp(a - b));
  REQUIRE(f.out[0] == Approx(wa).epsilon(kClosedFormRel));
  REQUIRE(f.out[1] == Approx(wb).epsilon(kClosedFormRel));
  REQUIRE(f.lse[0] == Approx(a + std::log1p(std::exp(b - a))).epsilon(kClosedFormRel));
}

TEST_CASE("equal logits average integer values, causal rows see their prefix", "[reference][hand]") {
  // q = (1, 0) and every key starts with 2: all logits are 2 (scale 1). Values (3, 6), (6, 0), (0, 3).
  // Causal with Lq = 2, Lk = 3: row 0 sees keys 0, 1 → O = (4.5, 3), LSE = 2 + log 2;
  // row 1 sees all three → O = (3, 3), LSE = 2 + log 3.
  const Shape s{1, 1, 1, 2, 3, 2, 2};
  const Problem p =
      make_problem(s, Params{1.0, Mask::causal}, {1, 0, 1, 0}, {2, 5, 2, -3, 2, 7}, {3, 6, 6, 0, 0, 3});
  const ExactForward f = reference_forward(p);
  REQUIRE(f.out == std::vector<double>{4.5, 3, 3, 3});
  REQUIRE(f.lse[0] == Approx(2 + std::log(2.0)).epsilon(kClosedFormRel));
  REQUIRE(f.lse[1] == Approx(2 + std::log(3.0)).epsilon(kClosedFormRel));
}

TEST_CASE("the gradients of uniform attention match a hand derivation", "[reference][hand]") {
  // One query (1, 0) over the three keys above (no mask), dO = (1, 0):
  // P = 1/3 each, dP_j = v_j0 = (3, 6, 0), D = dO·O = 3, dS = P (dP − D) = (0, 1, −1),
  // dQ = Σ_j dS_j k_j = k_1 − k_2 = (0, −10), dK_j = dS_j q = (0,0), (1,0), (−1,0), dV_j = P_j dO = (1/3, 0).
  const Shape s{1, 1, 1, 1, 3, 2, 2};
  const Problem p = make_problem(s, Params{1.0, Mask::none}, {1, 0}, {2, 5, 2, -3, 2, 7}, {3, 6, 6, 0, 0, 3}, {1, 0});
  const ExactBackward g = reference_backward(p);
  REQUIRE(g.dq[0] == Approx(0).margin(kZeroAt128));
  REQUIRE(g.dq[1] == Approx(-10).epsilon(kClosedFormRel));
  const std::vector<double> dk{0, 0, 1, 0, -1, 0};
  for (std::size_t n = 0; n < dk.size(); ++n) REQUIRE(g.dk[n] == Approx(dk[n]).epsilon(kClosedFormRel).margin(kZeroAt128));
  for (std::size_t j = 0; j < 3; ++j) {
    REQUIRE(g.dv[2 * j] == 1.0 / 3);  // 1/3 correctly rounded
    REQUIRE(g.dv[2 * j + 1] == 0);
  }
}
