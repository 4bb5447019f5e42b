// The causal property: correct kernels pass in several summation orders and under either declared alignment;
// kernels that let a row read a hidden key fail within the default case budget on a small shrunk case.
#include "attncheck/check.h"
#include "attncheck/property.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

namespace {
const Counterexample &shrunk(const RunReport &r) { return *counterexample(r, "causal"); }
}  // namespace

TEST_CASE("causal: a correct kernel's rows ignore changes of hidden keys in every summation order") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "causal", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("causal: a correct kernel ignores hidden keys in float16 and bfloat16 storage") {
  for (Dtype dt : {Dtype::f16, Dtype::bf16}) {
    const RunReport r = check_property(support::variant_kernel(support::Variant{}), "causal", options(dt));
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("causal: a row that sees one future key is found, and shrinks to a row that should see no key") {
  const RunReport r = check_property(bug(Bug::causal_off_by_one), "causal", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = shrunk(r);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lq == 2);  // Lq > Lk: row 0 should see no key, and sees key 0
  CHECK(s.Lk == 1);
  CHECK(s.B * s.Hq * s.D * s.Dv == 1);
  REQUIRE(c.outcome.failing_case);  // the report shows the changed problem
  CHECK(c.outcome.failing_what.find("changed to other finite values") != std::string::npos);
}

TEST_CASE("causal: a row that sees one future key changes when that key changes, on a 2×2 square") {
  // Lq = Lk = 2: row 0 sees key 0 and must not see key 1; the buggy kernel's row 0 reads key 1.
  Case c;
  c.spec.shape = {.Lq = 2, .Lk = 2};
  c.spec.mask = Mask::causal;
  c.resize_values(/*backward=*/false);
  c.v = {1, 3};
  const PropertyDef &causal = *find_property("causal");
  CHECK(causal.run(env_of(support::variant_kernel(support::Variant{})), c).verdict == Verdict::pass);
  const Outcome o = causal.run(env_of(bug(Bug::causal_off_by_one)), c);
  INFO(o.detail);
  CHECK(o.verdict == Verdict::fail);
  CHECK(o.step == Step::mask);
  CHECK(o.detail.find("O[0,0,0,0]: changed to") == 0);
  CHECK(o.detail.find("keys hidden from row 0 (j ≥ 1) changed to other finite values") != std::string::npos);
}

TEST_CASE("causal: a top-left aligned mask fails the default contract and passes when it is declared") {
  const RunReport r = check_property(bug(Bug::causal_top_left), "causal", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Shape &s = shrunk(r).minimal.spec.shape;
  CHECK(s.Lq == 2);  // Lq > Lk: row 0 sees no key bottom-right aligned, key 0 top-left aligned
  CHECK(s.Lk == 1);
  CHECK(s.B * s.Hq * s.D * s.Dv == 1);

  const RunReport declared = check_property(bug(Bug::causal_top_left), "causal", declaring("causal=top-left"));
  INFO(declared.text());
  CHECK(declared.verdict() == Verdict::pass);
  // ... and a bottom-right kernel declared top-left is caught the other way round.
  const RunReport wrong = check_property(support::variant_kernel(support::Variant{}), "causal",
                                      declaring("causal=top-left"));
  INFO(wrong.text());
  CHECK(wrong.verdict() == Verdict::fail);
}
