// The padding_isolation property: correct kernels never read the NaN padding of a padded layout, in several
// summation orders; a kernel that reads one key past the last one reads it and fails.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

TEST_CASE("padding_isolation: a correct kernel never reads NaN padding, in every summation order") {
  for (const support::Variant &v : summation_orders()) {
    const Report r = check_property(support::variant_kernel(v), "padding_isolation", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("padding_isolation: a key loop that runs one key past the end reads the NaN padding after a head") {
  const Report r = check_property(bug(Bug::read_past_last_key), "padding_isolation", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "padding_isolation");
  CHECK(c.outcome.step == Step::finite);
  const Shape &s = c.minimal.spec.shape;
  // Past the last element of the last head the bug reads 0, not padding: it needs a second kv head or batch.
  CHECK(s.B * s.Hkv == 2);
  CHECK(s.Lq * s.Lk * s.D * s.Dv == 1);
}
