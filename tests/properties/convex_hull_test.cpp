// The convex_hull property: correct kernels keep every output within the range of the values its query sees;
// planted bugs that break the weights (or read a key the query must not see) fail and shrink small.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

TEST_CASE("convex_hull: a correct kernel's outputs stay within the range of the values each query sees") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "convex_hull", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("convex_hull: an accumulator not rescaled when the row max grows leaves the range on a two-key row") {
  const RunReport r = check_property(bug(Bug::no_rescale), "convex_hull", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "convex_hull");
  CHECK(c.outcome.step == Step::values);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lq == 1);
  CHECK(s.Lk == 2);  // the second key raises the max: the smallest row that rescales
  CHECK(s.D * s.Dv <= 2);
}

TEST_CASE("convex_hull: a key read past the last one pulls a one-key row out of range") {
  const RunReport r = check_property(bug(Bug::read_past_last_key), "convex_hull", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Shape &s = counterexample(r, "convex_hull")->minimal.spec.shape;
  CHECK(s.Lk == 1);  // the extra key (k = v = 0 past the tensor) averages into the only value
  CHECK(s.Lq * s.D * s.Dv * s.B * s.Hq == 1);
}
