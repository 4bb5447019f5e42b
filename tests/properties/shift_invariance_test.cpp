// The shift_invariance property: correct kernels keep O when every key moves by one vector and follow a shift of
// every value; planted bugs whose weights do not sum to 1, or that see a key outside the problem, fail and shrink
// small.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

TEST_CASE(
    "shift_invariance: a correct kernel ignores a vector added to every key and follows one added to every value") {
  // Three problems per case: every other summation order keeps the test fast and still spans blocks, reversal,
  // splits and exp2.
  const std::vector<support::Variant> orders = summation_orders();
  for (std::size_t n = 0; n < orders.size(); n += 2) {
    const RunReport r = check_property(support::variant_kernel(orders[n]), "shift_invariance", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("shift_invariance: weights that do not sum to 1 (no rescale) do not follow a shift of every value") {
  const RunReport r = check_property(bug(Bug::no_rescale), "shift_invariance", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "shift_invariance");
  CHECK(c.outcome.detail.rfind("O(v+w)", 0) == 0);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lq == 1);
  CHECK(s.Lk == 2);  // the second key raises the max: the smallest row that rescales
  CHECK(s.D * s.Dv <= 2);
}

TEST_CASE("shift_invariance: a key read past the last one does not move with the keys, on a one-key row") {
  const RunReport r = check_property(bug(Bug::read_past_last_key), "shift_invariance", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Shape &s = counterexample(r, "shift_invariance")->minimal.spec.shape;
  CHECK(s.Lk == 1);
  CHECK(s.Lq * s.D * s.Dv * s.B * s.Hq == 1);
}
