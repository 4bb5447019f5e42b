// The accuracy property: correct kernels pass in every summation order; planted forward bugs fail and shrink small.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

TEST_CASE("accuracy: a correct kernel stays within the error bound in every summation order") {
  for (const support::Variant &v : summation_orders()) {
    const Report r = check_property(support::variant_kernel(v), "accuracy", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("accuracy: a missing scale is found and shrinks to L ≤ 2, D ≤ 4 with small integer values") {
  const Report r = check_property(bug(Bug::missing_scale), "accuracy", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "accuracy");
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lq <= 2);
  CHECK(s.Lk <= 2);
  CHECK(s.D <= 4);
  WARN(r.text());
}
