// The permutation_equivariance property: correct kernels give the same O for reversed keys (with their values)
// and reversed rows for reversed queries; planted bugs that depend on where a key sits fail and shrink small.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <vector>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

TEST_CASE(
    "permutation_equivariance: a correct kernel ignores reversed keys and reverses its rows for reversed queries") {
  // Three problems per case: every other summation order keeps the test fast and still spans blocks, reversal,
  // splits and exp2.
  const std::vector<support::Variant> orders = summation_orders();
  for (std::size_t n = 0; n < orders.size(); n += 2) {
    const RunReport r = check_property(support::variant_kernel(orders[n]), "permutation_equivariance", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("permutation_equivariance: a dropped partial last key block is found with one key past a full block") {
  const RunReport r = check_property(bug(Bug::drop_last_partial_block), "permutation_equivariance", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "permutation_equivariance");
  CHECK(c.outcome.detail.rfind("O(π k, π v)", 0) == 0);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lk == 17);  // one full block of 16 keys and a partial block of one: reversal moves the dropped key
  CHECK(s.Lq * s.D * s.Dv * s.B * s.Hq == 1);
}

TEST_CASE("permutation_equivariance: an accumulator not rescaled depends on the key order on a two-key row") {
  const RunReport r = check_property(bug(Bug::no_rescale), "permutation_equivariance", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Shape &s = counterexample(r, "permutation_equivariance")->minimal.spec.shape;
  CHECK(s.Lq == 1);
  CHECK(s.Lk == 2);  // ascending logits rescale, descending ones do not
  CHECK(s.D * s.Dv <= 2);
}
